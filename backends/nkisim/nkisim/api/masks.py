"""Masks (`mask=` predicates) on instructions whose results are tiles: the rectangle a mask
selects, and the mask a fresh result carries into the statement that consumes it.

An instruction runs over affine access patterns, so a mask on a 2-D instruction (nc_matmul,
nc_transpose) restricts it to one rectangle of the tile; any other predicate is a compile
error. `t[...] = nl.load(x, mask=m)` is one masked instruction writing `t` in place, so
assigning a masked result writes only where the mask holds (the rest of `t` keeps its
values), and `psum += nisa.nc_matmul(..., mask=m)` accumulates only the rectangle.
"""
import weakref

import numpy as np

from ..machine import core
from ..data.buffers import psum, sbuf
from ..errors import compile_error
from ..machine.timing import VECTOR

# result storage -> the mask (over the result's indices) of the call that produced it
_RESULT_MASKS = weakref.WeakKeyDictionary()


def masked_result(out, mask):
    """Record that `out` (a fresh result tile) was written only where `mask` holds."""
    if mask is not None and not (type(mask) in (bool, np.bool_) and mask):
        _RESULT_MASKS[out.st] = mask
    return out


def result_mask(value):
    """The mask of the masked call that produced `value` (a whole result tile), else None."""
    if not _RESULT_MASKS or value.box is not None:
        return None
    return _RESULT_MASKS.get(value.st)


def as_2d(mask, shape):
    """A predicate of rank <= 2 broadcast to the 2-D `shape`."""
    m = np.asarray(mask)
    return np.broadcast_to(m.reshape((1,) * (2 - m.ndim) + m.shape), tuple(shape))


def mask_box(fname, mask, shape):
    """A 2-D instruction's `mask` as the rectangle it selects, ((r0, r1), (c0, c1)); None when
    it masks nothing. Instructions run over affine access patterns, so a predicate that is
    not one rectangle of the tile cannot be expressed and is a compile error."""
    if mask is None or (type(mask) in (bool, np.bool_) and mask):
        return None
    m = np.asarray(mask)
    if m.dtype != np.bool_ or len(shape) != 2 or m.ndim > 2:
        raise compile_error("%s: mask must be a predicate over the input tile's "
                            "indices (got %r)" % (fname, mask))
    try:
        m = np.broadcast_to(m.reshape((1,) * (2 - m.ndim) + m.shape), tuple(shape))
    except ValueError:
        raise compile_error("%s: mask of shape %s does not match the input tile %s"
                            % (fname, list(np.shape(mask)), list(shape)))
    if m.all():
        return None
    rows = np.flatnonzero(m.any(axis=1))
    cols = np.flatnonzero(m.any(axis=0))
    if not rows.size:
        return (0, 0), (0, 0)
    r0, r1, c0, c1 = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    if not m[r0:r1, c0:c1].all() or m.sum() != (r1 - r0) * (c1 - c0):
        raise compile_error("%s: a mask that does not select one rectangle of the tile "
                            "is not modelled by nkisim" % fname)
    return (r0, r1), (c0, c1)


def masked_transpose(data, mask, dst, engine, fname):
    """Transpose of the rectangle of `data` a mask over data's indices selects: input
    [r0:r1, c0:c1] lands in output [c0:c1, r0:r1] (the compiler narrows both access
    patterns); the rest of the output is not written. Returns the output tile (a fresh one
    when dst is None, which then carries the written rectangle as its mask)."""
    if len(data.shape) != 2:
        raise compile_error("%s: transpose expects a 2-D tile, got shape %s"
                            % (fname, list(data.shape)))
    box = mask_box(fname, mask, data.shape)
    if box is None:
        return core.transpose_core(data, dst=dst, engine=engine)
    shape = (data.shape[1], data.shape[0])
    out = dst
    if out is None:
        out = core.tmp(shape, data.st.dt, sbuf if engine == VECTOR else psum)
    elif tuple(out.shape) != shape:
        raise compile_error("transpose output shape %s does not match %s"
                            % (list(out.shape), list(shape)))
    (r0, r1), (c0, c1) = box
    if r1 > r0 and c1 > c0:
        core.transpose_core(data[r0:r1, c0:c1], dst=out[c0:c1, r0:r1], engine=engine)
    if dst is not None:
        return out
    written = np.zeros(shape, dtype=bool)
    written[c0:c1, r0:r1] = True
    return masked_result(out, written)
