"""The view methods of `nki.language.NkiTensor` (NKI 0.3+): `slice`, `select`,
`vector_select`, `permute`, `broadcast`, `expand_dim`, `squeeze_dim`, `reshape_dim`,
`flatten_dims`, and the queries `get_pattern`, `is_contiguous`, `is_indirect`.

Each view is a new tensor over the same storage, made from the element positions of the
viewed tensor (any view: a slice, an `.ap()` pattern, another of these): the method applies
its numpy counterpart to that array of positions. `select` with a tile index reads the index
when the view is made (in program order, as the dynamic offsets of `access.py`); such views
are resolved here, so `is_indirect` is False for every view nkisim builds.
"""
import math

import numpy as np

from ..data.buffers import Tensor
from ..errors import compile_error, runtime_error


def positions(t):
    """Flat storage positions (int64, the view's shape) of the elements of view t."""
    st = t.st
    dims = st.shape
    strides = [math.prod(dims[i + 1:]) for i in range(len(dims))]
    if t.adv is not None:
        arrays = np.broadcast_arrays(*[np.asarray(a, dtype=np.int64) for a in t.adv])
        flat = np.zeros(arrays[0].shape if arrays else (), dtype=np.int64)
        for a, s in zip(arrays, strides):
            flat = flat + a * s
        return flat.reshape(t.shape)
    idx = np.zeros(t.shape, dtype=np.int64)
    base = 0
    for sd, k in enumerate(t.sk):
        if type(k) is int:
            base += k * strides[sd]
    for vdim, sd in enumerate(t.vd):
        if sd < 0:
            continue
        start, step, n = t.sk[sd]
        sh = [1] * len(t.shape)
        sh[vdim] = n
        idx = idx + ((start + step * np.arange(n, dtype=np.int64)) * strides[sd]).reshape(sh)
    return idx + base


def _view(t, flat):
    st = t.st
    flat = np.ascontiguousarray(flat)
    if flat.ndim == 0:
        raise compile_error("a view keeps at least one dimension")
    adv = np.unravel_index(flat, st.shape)
    box = []
    for a in adv:
        box += [int(a.min()), int(a.max()) + 1] if a.size else [0, 0]
    return Tensor.advanced(st, adv, flat.shape, tuple(box))


def _dim(t, dim, what="dim", extra=0):
    try:
        d = int(dim)
    except (TypeError, ValueError):
        raise compile_error("%s must be an integer, got %r" % (what, dim)) from None
    nd = len(t.shape) + extra
    if not -nd <= d < nd:
        raise compile_error("%s %d is out of range for a %d-D view" % (what, d, nd))
    return d % nd


def slice_(self, dim, start, end, step=1):
    """Elements start:end:step of dimension dim (0 <= start < end <= size, step >= 1)."""
    d = _dim(self, dim)
    n = self.shape[d]
    start, end, step = int(start), int(end), int(step)
    if not (0 <= start < end <= n) or step < 1:
        raise compile_error("slice(%d, %d, %d, %d) is outside dimension %d of size %d"
                            % (d, start, end, step, d, n))
    key = [slice(None)] * len(self.shape)
    key[d] = slice(start, end, step)
    return _view(self, positions(self)[tuple(key)])


def select(self, dim, index):
    """The slice at `index` (an int, or a one-element on-chip tile read now) of dimension
    dim, which the view drops."""
    d = _dim(self, dim)
    if isinstance(index, Tensor):
        if index.size != 1 or index.st.kind == "hbm":
            raise compile_error("select(): a dynamic index must be a one-element on-chip tile")
        if d == 0 and self.st.kind != "hbm":
            raise compile_error("select(): a dynamic select of an on-chip tile cannot take "
                                "the partition dimension")
        v = index.read()
        index = 0 if v is None else int(np.asarray(v).reshape(-1)[0])
    i = int(index)
    if not 0 <= i < self.shape[d]:
        raise compile_error("select(%d, %d): index outside dimension of size %d"
                            % (d, i, self.shape[d]))
    if len(self.shape) == 1:
        raise compile_error("select() would leave no dimension")
    return _view(self, np.take(positions(self), i, axis=d))


def vector_select(self, dim, vector_offset):
    """Partition p of the view reads index vector_offset[p] of dimension `dim` (0, of an HBM
    tensor): the rows gathered, one per partition of the [P, 1] offset tile (read now)."""
    d = _dim(self, dim)
    if d != 0 or self.st.kind != "hbm":
        raise compile_error("vector_select(): only dimension 0 of an HBM tensor")
    if not isinstance(vector_offset, Tensor) or vector_offset.st.kind == "hbm" or \
            vector_offset.size != vector_offset.shape[0]:
        raise compile_error("vector_select(): vector_offset must be a [P, 1] on-chip tile")
    v = vector_offset.read()
    rows = np.zeros(vector_offset.shape[0], dtype=np.int64) if v is None else \
        np.asarray(v).reshape(-1).astype(np.int64)
    if rows.size and (rows.min() < 0 or rows.max() >= self.shape[0]):
        raise runtime_error("err_tensor_access_out_of_bound: a vector_select row lies outside "
                            "dimension 0 of size %d" % self.shape[0])
    return _view(self, np.take(positions(self), rows, axis=0))


def permute(self, dims):
    """The view with its dimensions reordered (numpy transpose)."""
    dims = tuple(int(x) for x in dims)
    if sorted(dims) != list(range(len(self.shape))):
        raise compile_error("permute(%r) is not a permutation of %d dimensions"
                            % (dims, len(self.shape)))
    return _view(self, np.transpose(positions(self), dims))


def broadcast(self, dim, size):
    """A size-1 dimension repeated `size` times (stride 0)."""
    d = _dim(self, dim)
    if self.shape[d] != 1:
        raise compile_error("broadcast(%d, %d): dimension %d has size %d, not 1"
                            % (d, size, d, self.shape[d]))
    return _view(self, np.repeat(positions(self), int(size), axis=d))


def expand_dim(self, dim):
    """A new dimension of size 1 at dim."""
    return _view(self, np.expand_dims(positions(self), _dim(self, dim, extra=1)))


def squeeze_dim(self, dim):
    """Drop dimension dim, which must have size 1."""
    d = _dim(self, dim)
    if self.shape[d] != 1:
        raise compile_error("squeeze_dim(%d): dimension has size %d, not 1" % (d, self.shape[d]))
    return _view(self, np.squeeze(positions(self), axis=d))


def reshape_dim(self, dim, shape):
    """Split dimension dim into `shape` (one entry may be -1)."""
    d = _dim(self, dim)
    shape = [int(s) for s in shape]
    n = self.shape[d]
    if shape.count(-1) > 1:
        raise compile_error("reshape_dim: at most one -1")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = n // known if known else 0
    if math.prod(shape) != n:
        raise compile_error("reshape_dim(%d, %r): dimension has %d elements" % (d, shape, n))
    flat = positions(self)
    return _view(self, flat.reshape(flat.shape[:d] + tuple(shape) + flat.shape[d + 1:]))


def flatten_dims(self, start_dim, end_dim):
    """Merge dimensions start_dim..end_dim (inclusive) into one."""
    a, b = _dim(self, start_dim, "start_dim"), _dim(self, end_dim, "end_dim")
    if a > b:
        raise compile_error("flatten_dims(%d, %d): start after end" % (a, b))
    flat = positions(self)
    return _view(self, flat.reshape(flat.shape[:a] + (-1,) + flat.shape[b + 1:]))


def get_pattern(self):
    """[[stride, count], ...] of the view in elements, when it is affine (else an error)."""
    flat = positions(self)
    pattern = []
    for d, n in enumerate(flat.shape):
        step = 0
        if n > 1:
            step = int(np.take(flat, 1, axis=d).flat[0] - np.take(flat, 0, axis=d).flat[0])
        pattern.append([step, int(n)])
    if flat.size:
        ref = flat.flat[0] + sum(np.arange(n).reshape([-1 if i == d else 1
                                                       for i in range(flat.ndim)]) * s
                                 for d, (s, n) in enumerate(pattern))
        if not np.array_equal(ref, flat):
            raise compile_error("get_pattern(): the view is not an affine access pattern")
    return pattern


def is_contiguous(self):
    """True when the view's elements are consecutive in storage, in order."""
    flat = positions(self).reshape(-1)
    return bool(flat.size == 0 or np.array_equal(flat, np.arange(flat[0], flat[0] + flat.size)))


def is_indirect(self):
    """False: nkisim resolves dynamic indices when a view is made."""
    return False


_METHODS = {"slice": slice_, "select": select, "vector_select": vector_select,
            "permute": permute, "broadcast": broadcast, "expand_dim": expand_dim,
            "squeeze_dim": squeeze_dim, "reshape_dim": reshape_dim, "flatten_dims": flatten_dims,
            "get_pattern": get_pattern, "is_contiguous": is_contiguous,
            "is_indirect": is_indirect}


def install():
    """Add the methods the tensor type does not define itself."""
    for name, fn in _METHODS.items():
        if not hasattr(Tensor, name):
            fn.__name__ = name
            setattr(Tensor, name, fn)
