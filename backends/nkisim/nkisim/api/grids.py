"""NKI 0.7 (SDK 2.33) tile and block grids: `nl.tiles`, `nl.blocks`, `nl.alloc_tiles`,
`nl.alloc_blocks`, `NkiTileGrid`, `NkiBlockGrid`.

A grid is a view of a tensor navigated in tile (or block) coordinates: `tile_shape` applies
to the trailing dimensions, leading untiled dimensions are indexed one slab at a time, and a
block groups `block_shape` tiles. Partial last tiles and blocks are clamped to the tensor's
extent. Indexing a grid keeps it a grid (an integer consumes a coordinate); `.data` is the
selection as one tensor operand for nl/nisa calls. Creating, indexing and regrouping grids
issue no instruction.

Storage: an HBM allocation is the plain tensor of `element_shape`. An SBUF/PSUM allocation
whose rows exceed one tile (`element_shape[0] > tile_shape[0]`) uses the dense rank-two
layout: tile rows become partitions, each band of `tile_shape[0]` rows is laid out after the
previous one along the free axis. `.data` of a selection that spans several bands cannot be
one access pattern there (`is_data_representable` is False) and is an error.
"""
import math

from ..data.buffers import Tensor, as_buffer, front_end
from ..errors import compile_error


def _shape_tuple(what, v, min_rank=1):
    if not isinstance(v, tuple) or not all(type(x) is int for x in v):
        raise compile_error("%s must be a tuple of Python ints, got %r" % (what, v))
    if any(x <= 0 for x in v):
        raise compile_error("%s entries must be positive, got %r" % (what, v))
    if len(v) < min_rank:
        raise compile_error("%s needs at least %d dimensions, got %r" % (what, min_rank, v))
    return v


class _Dense:
    """The dense rank-two on-chip layout of an (R, C) grid allocation with tile rows tp."""

    def __init__(self, storage, rows, cols, tp):
        self.t = storage
        self.rows = rows
        self.cols = cols
        self.tp = tp

    def view(self, lo, hi):
        (r0, c0), (r1, c1) = lo, hi
        band = r0 // self.tp
        if (r1 - 1) // self.tp != band:
            return None
        f = band * self.cols
        return self.t[r0 - band * self.tp:r1 - band * self.tp, f + c0:f + c1]


class NkiGrid:
    """Common part of tile and block grids (`shape` counts cells, `element_shape` elements)."""

    def __init__(self, src, tile_shape, block_shape, lo, hi, nav, dropped, dense=None):
        self._src = src            # the tensor (or None with a dense layout)
        self._dense = dense
        self.tile_shape = tuple(tile_shape)
        self.block_shape = tuple(block_shape) if block_shape is not None else None
        self._lo = tuple(lo)       # selected element range per source dimension
        self._hi = tuple(hi)
        self._nav = tuple(nav)     # source dimensions still navigable, in order
        self._dropped = frozenset(dropped)  # untiled dimensions consumed by an integer

    # -- geometry ---------------------------------------------------------------------------
    @property
    def _rank(self):
        return len(self._lo)

    @property
    def _first_tiled(self):
        return self._rank - len(self.tile_shape)

    def _cell(self, d):
        """Elements per coordinate step along source dimension d."""
        k = d - self._first_tiled
        if k < 0:
            return 1
        return self.tile_shape[k] * (self.block_shape[k] if self.block_shape else 1)

    @property
    def shape(self):
        return tuple(math.ceil((self._hi[d] - self._lo[d]) / self._cell(d)) for d in self._nav)

    @property
    def element_shape(self):
        return tuple(self._hi[d] - self._lo[d] for d in range(self._rank)
                     if d not in self._dropped)

    @property
    def index_step_elements(self):
        return tuple(self._cell(d) for d in self._nav)

    @property
    def is_remainder(self):
        """True when the selection is cut short by the tensor's extent."""
        return any((self._hi[d] - self._lo[d]) % self._cell(d) != 0
                   for d in range(self._first_tiled, self._rank))

    @property
    def dtype(self):
        return (self._src if self._src is not None else self._dense.t).dtype

    @property
    def buffer(self):
        return (self._src if self._src is not None else self._dense.t).buffer

    @property
    def is_data_representable(self):
        return self._view() is not None

    def _view(self):
        if self._dense is not None:
            return self._dense.view(self._lo, self._hi)
        key = tuple(self._lo[d] if d in self._dropped else slice(self._lo[d], self._hi[d])
                    for d in range(self._rank))
        return self._src[key]

    @property
    def data(self):
        v = self._view()
        if v is None:
            raise compile_error("grid selection %s of a dense on-chip grid spans several tile "
                                "rows and is not one access pattern; select one tile row "
                                "(or index tiles one by one)" % (list(self.element_shape),))
        return v

    # -- navigation -------------------------------------------------------------------------
    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > len(self._nav):
            raise compile_error("too many grid indices (%d) for a grid of shape %s"
                                % (len(key), list(self.shape)))
        lo, hi = list(self._lo), list(self._hi)
        nav, dropped = [], set(self._dropped)
        shape = self.shape
        for i, d in enumerate(self._nav):
            k = key[i] if i < len(key) else slice(None)
            cell = self._cell(d)
            if isinstance(k, slice):
                a, b, step = k.indices(shape[i])
                if step != 1:
                    raise compile_error("grid slices must have step 1, got %r" % (k,))
                b = max(a, b)
                lo[d], hi[d] = (min(self._lo[d] + a * cell, self._hi[d]),
                                min(self._lo[d] + b * cell, self._hi[d]))
                nav.append(d)
            else:
                try:
                    j = int(k)
                except TypeError:
                    raise compile_error("grid index must be an int or a slice, got %r" % (k,))
                if j < 0:
                    j += shape[i]
                if not 0 <= j < shape[i]:
                    raise compile_error("grid index %d out of range for %d cells" % (int(k),
                                                                                     shape[i]))
                lo[d] = self._lo[d] + j * cell
                hi[d] = min(lo[d] + cell, self._hi[d])
                if d < self._first_tiled:
                    dropped.add(d)
        return type(self)(self._src, self.tile_shape, self.block_shape, lo, hi, nav, dropped,
                          self._dense)

    def _regroup(self, cls, tile_shape, block_shape):
        """A new grid over this selection (all dimensions navigable again)."""
        tile_shape = self.tile_shape if tile_shape is None else \
            _shape_tuple("tile_shape", tile_shape, 2)
        rank = self._rank
        if len(tile_shape) > rank - len(self._dropped):
            raise compile_error("tile_shape %r has more dimensions than the selection %s"
                                % (tile_shape, list(self.element_shape)))
        nav = [d for d in range(rank) if d not in self._dropped]
        return cls(self._src, tile_shape, block_shape, self._lo, self._hi, nav, self._dropped,
                   self._dense)

    def __repr__(self):
        return "%s(shape=%s, tile_shape=%s%s, element_shape=%s)" % (
            type(self).__name__, list(self.shape), list(self.tile_shape),
            ", block_shape=%s" % list(self.block_shape) if self.block_shape else "",
            list(self.element_shape))


class NkiTileGrid(NkiGrid):
    """A view navigated in tile coordinates."""

    def __init__(self, src, tile_shape, block_shape, lo, hi, nav, dropped, dense=None):
        super().__init__(src, tile_shape, None, lo, hi, nav, dropped, dense)


class NkiBlockGrid(NkiGrid):
    """A view navigated in block coordinates (a block is `block_shape` tiles)."""


def _grid_of_tensor(cls, t, tile_shape, block_shape):
    tile_shape = _shape_tuple("tile_shape", tile_shape, 2)
    if len(tile_shape) > len(t.shape):
        raise compile_error("tile_shape %r has more dimensions than the tensor %s"
                            % (tile_shape, list(t.shape)))
    rank = len(t.shape)
    return cls(t, tile_shape, block_shape, (0,) * rank, tuple(t.shape), range(rank), ())


def tiles(source, *, tile_shape=None):
    """`nl.tiles(tensor_or_grid, tile_shape=...)`: a tile-coordinate view (no instruction)."""
    if isinstance(source, NkiGrid):
        return source._regroup(NkiTileGrid, tile_shape, None)
    if not isinstance(source, Tensor):
        raise compile_error("nl.tiles expects a tensor or a grid, got %r"
                            % (type(source).__name__,))
    if tile_shape is None:
        raise compile_error("nl.tiles of a tensor needs tile_shape")
    return _grid_of_tensor(NkiTileGrid, source, tile_shape, None)


def blocks(source, *, tile_shape=None, block_shape):
    """`nl.blocks(tensor_or_grid, tile_shape=..., block_shape=...)`: a block-coordinate view;
    block_shape counts tiles per block along each tiled dimension."""
    if isinstance(source, NkiGrid):
        ts = source.tile_shape if tile_shape is None else tile_shape
        block_shape = _shape_tuple("block_shape", block_shape)
        if len(block_shape) != len(ts):
            raise compile_error("block_shape %r must have the rank of tile_shape %r"
                                % (block_shape, ts))
        return source._regroup(NkiBlockGrid, ts, block_shape)
    if not isinstance(source, Tensor):
        raise compile_error("nl.blocks expects a tensor or a grid, got %r"
                            % (type(source).__name__,))
    if tile_shape is None:
        raise compile_error("nl.blocks of a tensor needs tile_shape")
    block_shape = _shape_tuple("block_shape", block_shape)
    if len(block_shape) != len(tile_shape):
        raise compile_error("block_shape %r must have the rank of tile_shape %r"
                            % (block_shape, tile_shape))
    return _grid_of_tensor(NkiBlockGrid, source, tile_shape, block_shape)


def _allocate(cls, tile_shape, block_shape, element_shape, buffer, dtype, address, name):
    ndarray = front_end("ndarray")  # the language's, registered at package load
    tile_shape = _shape_tuple("tile_shape", tile_shape, 2)
    element_shape = _shape_tuple("element_shape", element_shape, len(tile_shape))
    if address is not None:
        raise compile_error("alloc_tiles/alloc_blocks: address= is not modelled by nkisim "
                            "(the simulator would ignore it); remove it")
    buf = as_buffer(buffer)
    if buf is None or buf.kind == "hbm" or element_shape[0] <= tile_shape[0] or \
            len(element_shape) != 2:
        if buf is not None and buf.kind != "hbm" and len(element_shape) != 2:
            raise compile_error("alloc_tiles/alloc_blocks on %s: only rank-two element shapes "
                                "are modelled by nkisim, got %r" % (buf.kind, element_shape))
        t = ndarray(element_shape, dtype, buffer=buffer, name=name)
        return _grid_of_tensor(cls, t, tile_shape, block_shape)
    rows, cols = element_shape
    tp = tile_shape[0]
    bands = math.ceil(rows / tp)
    t = ndarray((tp, bands * cols), dtype, buffer=buffer, name=name)
    g = cls(None, tile_shape, block_shape, (0, 0), (rows, cols), (0, 1), (),
            _Dense(t, rows, cols, tp))
    return g


def alloc_tiles(*, tile_shape, element_shape, buffer, dtype, address=None, name=""):
    """`nl.alloc_tiles(...)`: new uninitialised storage of `element_shape` as a tile grid."""
    return _allocate(NkiTileGrid, tile_shape, None, element_shape, buffer, dtype, address, name)


def alloc_blocks(*, tile_shape, block_shape, element_shape, buffer, dtype, address=None,
                 name=""):
    """`nl.alloc_blocks(...)`: new uninitialised storage as a block grid (same tile layout as
    alloc_tiles; blocks only group tiles)."""
    block_shape = _shape_tuple("block_shape", block_shape)
    if len(block_shape) != len(tile_shape):
        raise compile_error("block_shape %r must have the rank of tile_shape %r"
                            % (block_shape, tile_shape))
    return _allocate(NkiBlockGrid, tile_shape, block_shape, element_shape, buffer, dtype,
                     address, name)
