"""Modular allocation (`ncc.sbuf.mod_alloc(num_free_tiles=...)`, `ncc.psum.mod_alloc(
num_bank_tiles=...)`) honoured: a tensor with block dimensions gets only `n` physical tiles
per block dimension, and block i is physical tile i % n. Two blocks that share a tile share
its data and its dependencies (a write to block 2 of a two-tile allocation overwrites block
0), and capacity counts the physical tiles only. Addresses (`base_addr`, `base_bank`) are
not modelled: distinct allocations never overlap.

The tensor kernels hold is a `ModularTensor` whose `shape` is the physical one; its block
dimensions take integer indices (remapped modulo the tile count) or slices that stay within
one window of `n` blocks.

PSUM accumulation groups follow the logical block: the first matmul into a block accumulates
from zero, as on hardware, even when its physical tile still holds an earlier block's sum
(`acc[i] += nc_matmul(...)` over a loop of i with one bank tile). So a PSUM tile taken over by
another logical block counts as never written again.
"""
import itertools

import numpy as np

from ..data.buffers import Tensor
from ..errors import compile_error


class ModularTensor(Tensor):
    """A tensor allocated with modular block dimensions (see the module docstring)."""
    __slots__ = ("nkisim_logical", "nkisim_tiles", "nkisim_owner")

    @staticmethod
    def wrap(t, logical_blocks, tiles):
        m = ModularTensor.__new__(ModularTensor)
        for s in Tensor.__slots__:
            if s != "__weakref__":
                setattr(m, s, getattr(t, s))
        m.nkisim_logical = tuple(logical_blocks)
        m.nkisim_tiles = tuple(tiles)
        m.nkisim_owner = {}  # physical block index -> the logical block that holds it
        return m

    def _remap(self, key):
        single = not isinstance(key, tuple)
        keys = [key] if single else list(key)
        blocks = []  # per leading block dimension: [(logical, physical)], None: untracked
        for i, n in enumerate(self.nkisim_tiles):
            if i >= len(keys) or keys[i] is Ellipsis:
                if self.nkisim_logical[i] != n and i < len(keys):
                    raise compile_error("`...` over a modular block dimension (%d blocks in %d "
                                        "tiles): index the blocks" % (self.nkisim_logical[i], n))
                break
            k = keys[i]
            big = self.nkisim_logical[i]
            if isinstance(k, slice):
                a, b, step = k.indices(big)
                if step != 1 or b <= a:
                    raise compile_error("slice %r of a modular block dimension" % (k,))
                if big != n:
                    if a // n != (b - 1) // n:
                        raise compile_error(
                            "slice %d:%d of a block dimension allocated with %d tiles spans "
                            "more than one modular window" % (a, b, n))
                    keys[i] = slice(a % n, (b - 1) % n + 1)
                blocks.append([(j, j % n) for j in range(a, b)])
                continue
            try:
                j = int(k)
            except TypeError:
                if big == n:
                    blocks.append(None)
                    continue
                raise compile_error("a block dimension allocated with %d of %d tiles "
                                    "(mod_alloc) takes integer indices, got %r" % (n, big, k))
            if not -big <= j < big:
                raise compile_error("block index %d out of range for %d blocks" % (j, big))
            keys[i] = j % big % n
            blocks.append([(j % big, j % big % n)])
        self._take_over(blocks)
        return keys[0] if single else tuple(keys)

    def _take_over(self, blocks):
        """Give each physical PSUM tile the indexed logical blocks map to to that block; a
        tile another block held before counts as never written (see the module docstring)."""
        st = self.st
        if st.kind != "psum" or not blocks or None in blocks \
                or all(b == n for b, n in zip(self.nkisim_logical, self.nkisim_tiles)):
            return
        owner = self.nkisim_owner
        for combo in itertools.product(*blocks):
            logical = tuple(c[0] for c in combo)
            phys = tuple(c[1] for c in combo)
            held = owner.get(phys)
            owner[phys] = logical
            if held is None or held == logical or st.written is None:
                continue
            if st.written is True:
                st.written = np.ones(st.shape, dtype=bool)
            st.written[phys] = False

    def __getitem__(self, key):
        return Tensor.__getitem__(self, self._remap(key))

    def __setitem__(self, key, value):
        Tensor.__setitem__(self, self._remap(key), value)


def physical_shape(shape, pdim, tiles):
    """(physical shape, logical block counts, tiles per block dimension) for a modular
    allocation of `shape` whose partition dimension is `pdim`."""
    tiles = tuple(int(t) for t in tiles)
    if len(tiles) > pdim:
        raise compile_error("mod_alloc: %d tile counts for %d block dimensions"
                            % (len(tiles), pdim))
    blocks = tuple(shape[:pdim])
    full = tiles + blocks[len(tiles):]
    if any(t <= 0 for t in full):
        raise compile_error("mod_alloc: tile counts must be positive, got %r" % (tiles,))
    phys_blocks = tuple(min(t, b) for t, b in zip(full, blocks))
    return phys_blocks + tuple(shape[pdim:]), blocks, phys_blocks
