"""Dynamic access patterns: `t.ap(pattern, offset, scalar_offset=, vector_offset=,
indirect_dim=)` (NKI 0.3+, deep dive "NKI access patterns").

- `scalar_offset`: a one-element on-chip tile (or an int); the access starts at
  `offset + value * prod(t.shape[indirect_dim + 1:])` elements of the base tensor.
- `vector_offset`: a [P, 1] on-chip tile of row indices (indirect_dim 0 only); partition w
  of the access (the pattern's first dimension, of count P) reads from
  `offset + value[w] * prod(t.shape[1:])` plus the pattern's other dimensions; the pattern's
  first stride is ignored, as on the hardware.

The offsets are read when the view is made, i.e. at the instruction that uses it, in program
order (the values an earlier instruction wrote). Without numerics they read as 0: the
instruction's time does not depend on them. The view does not wait on the offset tile's
writer in the timing model (a small, one-element dependency).
"""
import math

import numpy as np

from ..data import dtypes as D
from ..data.buffers import Tensor
from ..errors import compile_error, runtime_error


def _offset_values(what, t, count=None):
    if isinstance(t, (int, np.integer)):
        return np.array([int(t)])
    if not isinstance(t, Tensor):
        raise compile_error("ap(): %s must be an on-chip tile (or an int for scalar_offset), "
                            "got %r" % (what, type(t).__name__))
    if t.st.kind == "hbm":
        raise compile_error("ap(): %s must be in SBUF, not HBM" % what)
    if count is not None and (t.shape[0] != count or t.size != count):
        raise compile_error("ap(): vector_offset must be a [%d, 1] tile (one row index per "
                            "partition of the access), got %s" % (count, list(t.shape)))
    if count is None and t.size != 1:
        raise compile_error("ap(): scalar_offset must hold one element, got shape %s"
                            % (list(t.shape),))
    v = t.read()
    if v is None:  # no numerics: the trace and the time do not depend on the value
        return np.zeros(t.size, dtype=np.int64)
    v = np.asarray(v).reshape(-1)
    if v.dtype.kind == "f":
        if not np.all(np.isfinite(v)) or np.any(v != np.round(v)):
            raise runtime_error("ap(): %s holds a non-integer value %r" % (what, v.tolist()))
    return v.astype(np.int64)


def _vector_view(t, pattern, offset, rows):
    st = t.st
    counts = [int(c) for _, c in pattern]
    shape = tuple(counts)
    row = math.prod(st.shape[1:])
    idx = np.full(shape, int(offset), dtype=np.int64)
    for ax, (stride, count) in enumerate(pattern):
        if ax == 0:
            continue
        sh = [1] * len(shape)
        sh[ax] = int(count)
        idx = idx + (np.arange(int(count), dtype=np.int64) * int(stride)).reshape(sh)
    idx = idx + (rows * row).reshape((counts[0],) + (1,) * (len(shape) - 1))
    if idx.size and (idx.min() < 0 or idx.max() >= math.prod(st.shape)):
        raise runtime_error("err_tensor_access_out_of_bound: a vector_offset row lies outside "
                            "the tensor of shape %s" % (list(st.shape),))
    adv = np.unravel_index(idx, st.shape)
    box = []
    for a in adv:
        box += [int(a.min()), int(a.max()) + 1] if a.size else [0, 0]
    return Tensor.advanced(st, adv, shape, tuple(box))


def _is_identity(t, pattern, offset, dtype):
    """`t.ap(pattern, offset)` of a whole tensor `t` that walks its storage in row-major
    order, element by element: [[prod(shape[1:]), shape[0]], ..., [1, shape[-1]]] at 0."""
    if t.sk is None or t.box is not None or t.vd != tuple(range(len(t.st.shape))):
        return False
    if dtype is not None and D.lookup(dtype) is not t.st.dt:
        return False
    try:
        if int(offset) != 0 or len(pattern) != len(t.st.shape):
            return False
        stride = 1
        for (st, count), n in reversed(list(zip(pattern, t.st.shape))):
            if int(count) != n or (int(st) != stride and n != 1):
                return False
            stride *= n
    except (TypeError, ValueError):
        return False
    return True


def _dynamic_ap(orig):
    def ap(self, pattern=None, offset=None, scalar_offset=None, vector_offset=None,
           indirect_dim=0, dtype=None, **kw):
        """Physical access pattern [[stride, count], ...] from `offset`, optionally moved at
        run time by `scalar_offset` (on `indirect_dim`) or `vector_offset` (per partition)."""
        offset = 0 if offset is None else offset
        if scalar_offset is None and vector_offset is None:
            if _is_identity(self, pattern, offset, dtype):
                # the pattern of the tensor's own layout: the view is the tensor itself (so
                # a view made from it, e.g. by the NKI Library's TensorView, is one of a
                # whole tensor)
                return Tensor.root(self.st)
            return orig(self, pattern, offset, dtype=dtype, **kw)
        if scalar_offset is not None and vector_offset is not None:
            raise compile_error("ap(): give scalar_offset or vector_offset, not both")
        if not isinstance(pattern, (list, tuple)) or not pattern:
            raise compile_error("ap(): pattern must be a list of [stride, count] pairs")
        if dtype is not None and D.lookup(dtype) is not self.st.dt:
            raise compile_error("ap(): a dynamic offset with dtype= (a reinterpreting view) is "
                                "not modelled by nkisim")
        dims = self.st.shape
        try:
            indirect_dim = int(indirect_dim)
        except (TypeError, ValueError):
            raise compile_error("ap(): indirect_dim must be an integer") from None
        if not 0 <= indirect_dim < len(dims):
            raise compile_error("ap(): indirect_dim %d is not a dimension of a tensor of shape "
                                "%s" % (indirect_dim, list(dims)))
        if scalar_offset is not None:
            value = int(_offset_values("scalar_offset", scalar_offset)[0])
            step = math.prod(dims[indirect_dim + 1:])
            return orig(self, pattern, int(offset) + value * step, dtype=dtype, **kw)
        if indirect_dim != 0:
            raise compile_error("ap(): vector_offset supports only indirect_dim=0")
        if self.sk is None or self.box is not None:
            raise compile_error("ap() is only supported on a whole tensor")
        rows = _offset_values("vector_offset", vector_offset, int(pattern[0][1]))
        return _vector_view(self, pattern, offset, rows)
    ap.nkisim_dynamic = True
    ap.nkisim_mx = getattr(orig, "nkisim_mx", False)
    return ap


def install():
    """Wrap `Tensor.ap` (after nkisim.mx's dtype wrapper) with the dynamic forms."""
    if not getattr(Tensor.ap, "nkisim_dynamic", False):
        Tensor.ap = _dynamic_ap(Tensor.ap)
