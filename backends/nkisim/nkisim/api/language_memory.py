"""`nki.language` memory movement (load, store, copy, broadcast_to, assignment and
loop_reduce) and the tensor indexing rules NKI adds to Python's (`t[...]`, `t[...] = v`,
`t.reshape`, `t.view`).
"""
import numpy as np

from ..machine import core
from ..data import ops as O
from . import masks as M
from ..data import reinterpret as _reinterpret
from ..machine import runtime
from ..data.buffers import _advanced_index  # the general indexing path
from ..data.buffers import (IExpr, Tensor, sbuf)
from ..machine.core import (alloc, compute, dma, check_onchip, free_size, engine_cost, dt_of,
                            value_of, fuse_or_copy)
from ..errors import compile_error
from ..errors import NkiRuntimeError as _NkiRuntimeError
from ..machine.timing import GPSIMD, TENSOR, VECTOR
from .language_math import _shape, _unmodelled, binary


def load(src, mask=None, dtype=None, mode=None, **kw):
    """HBM -> new SBUF tile with the shape of `src`. `mode` (out-of-bounds handling):
    only the default, oob_mode.error, is modelled."""
    if kw:
        _unmodelled("nl.load", kw)
    if mode not in (None, 0):
        _unmodelled("nl.load", {"mode=%r" % (mode,): None})
    if not isinstance(src, Tensor):
        raise compile_error("nl.load expects a tensor, got %r" % (type(src).__name__,))
    dt = dt_of(dtype) if dtype is not None else src.st.dt
    # one element (`x[i]` of a 1-D tensor) lands in a [1, 1] tile: on-chip tiles have a
    # partition and a free axis
    out = core.tmp(src.shape if len(src.shape) else (1, 1), dt, sbuf, overwritten=mask is None)
    if mask is None:
        # duplicate-load elimination (core.kept_load; named in compiler_effects)
        s = runtime.CUR
        kept = core.kept_load(s, src, dt)
        if kept is not None:
            core.reuse_load(s, out, kept, src)
            return out
        dma(out, src, mask)
        core.keep_load(s, out, src, dt)
        return out
    dma(out, src, mask)
    return M.masked_result(out, mask)


def store(dst, value, mask=None, mode=None, **kw):
    """Tile (SBUF/PSUM) or scalar -> HBM (or any tensor) via DMA. `mode`: as nl.load's."""
    if kw:
        _unmodelled("nl.store", kw)
    if mode not in (None, 0):
        _unmodelled("nl.store", {"mode=%r" % (mode,): None})
    if not isinstance(dst, Tensor):
        raise compile_error("nl.store expects a destination tensor")
    if not isinstance(value, Tensor):
        tmp = alloc(dst.shape, dst.st.dt, sbuf)
        core.memset_tile(tmp, value)
        value = tmp
    elif value.st.kind == "psum":
        _hw.reject("nl.store from PSUM", "nl.copy / nisa.tensor_copy to SBUF, then nl.store")
        tmp = alloc(value.shape, value.st.dt, sbuf)
        fuse_or_copy(tmp, value)
        value = tmp
    dma(dst, value, mask)
    return None


def load_transpose2d(src, mask=None, dtype=None, **kw):
    """DMA transpose of a 2-D HBM tile."""
    if kw:
        _unmodelled("nl.load_transpose2d", kw)
    if len(src.shape) != 2:
        raise compile_error("load_transpose2d expects a 2-D tile")
    dt = dt_of(dtype) if dtype is not None else src.st.dt
    out = alloc((src.shape[1], src.shape[0]), dt, sbuf)
    dma(out, src, mask, transpose=True)
    return M.masked_result(out, mask)


def copy(src, mask=None, dtype=None, **kw):
    """New SBUF tile holding a copy of `src` (may convert dtype)."""
    if kw:
        _unmodelled("nl.copy", kw)
    if not isinstance(src, Tensor):
        raise compile_error("nl.copy expects a tensor")
    dt = dt_of(dtype) if dtype is not None else src.st.dt
    out = core.tmp(src.shape, dt, sbuf, overwritten=mask is None)
    if src.st.kind == "hbm":
        dma(out, src, mask)
        return M.masked_result(out, mask)
    core.copy_op(out, src, mask=mask)
    return M.masked_result(out, mask)


# id(tile) -> (tile, op name): results of nl.loop_reduce not yet assigned
_LOOP_REDUCE = {}


def loop_reduce(x, op, loop_indices, dtype=None, mask=None, name=None, **kw):
    """`dst[...] = nl.loop_reduce(x, op, loop_indices)`: inside the loop over
    `loop_indices`, the assignment accumulates: dst = op(dst, x) on every iteration. An
    element of dst no instruction has written (an `nl.ndarray` never initialised) starts
    from the reduction's first value instead (MODEL.md, "Reductions into uninitialised
    tensors"). Returns the tile to assign (x, converted to `dtype`)."""
    if kw:
        _unmodelled("nl.loop_reduce", kw)
    opname = O.op_name(op)
    if opname not in ("add", "maximum", "minimum", "multiply"):
        raise compile_error("nl.loop_reduce: unsupported op %r (np.add, np.maximum, "
                            "np.minimum, np.multiply)" % (op,))
    if not isinstance(x, Tensor):
        raise compile_error("nl.loop_reduce expects a tile")
    check_onchip(x, "loop_reduce")
    if not isinstance(loop_indices, (list, tuple)) or not loop_indices:
        raise compile_error("nl.loop_reduce: loop_indices must be a non-empty list of loop "
                            "variables")
    dt = dt_of(dtype) if dtype is not None else x.st.dt
    if dt is x.st.dt and x.st.kind == "sbuf":
        out = x
    else:
        out = core.tmp(x.shape, dt, sbuf)
        core.copy_op(out, x, mask=mask)
    if len(_LOOP_REDUCE) > 4096:
        _LOOP_REDUCE.clear()  # results never assigned: nothing to accumulate
    _LOOP_REDUCE[id(out)] = (out, opname, mask)
    return out


# the identity of each loop_reduce operator: op(identity, x) == x
_IDENTITY = {"add": 0, "multiply": 1, "maximum": -np.inf, "minimum": np.inf}


def _start_reduction(view, opname, mask):
    """Before `view[...] = nl.loop_reduce(x, op, ...)`: the elements of `view` that no
    instruction has written take op's identity, so that this reduction writes x there (the
    compiler starts the reduction from its first value; it leaves no instruction, so the
    cost is unchanged). Only storages that record their writes (Storage.written: PSUM and
    declared SBUF tensors) are changed; elsewhere dst = op(dst, x) as documented."""
    st = view.st
    w = st.written
    if st.data is None or st.kind == "hbm" or (st.kind == "sbuf" and not isinstance(
            w, np.ndarray)) or w is True:
        return
    if isinstance(w, np.ndarray) and w.shape != st.shape:
        return  # a reinterpretation of another storage's bytes: treated as written
    done = view.written_state()
    if done is True:
        return
    ident = _IDENTITY[opname]
    dt = st.dt
    if not dt.is_float and ident in (np.inf, -np.inf):
        info = np.iinfo(dt.np)
        ident = info.min if ident < 0 else info.max
    fresh = np.full(view.shape, ident, dtype=np.float64 if dt.is_float else dt.np)
    if done is not False:
        fresh = np.where(done, view.read(), fresh)
    view.write(fresh, mask)


def assign(view, value):
    """`view[...] = value` for tensors."""
    if _LOOP_REDUCE and isinstance(value, Tensor):
        lr = _LOOP_REDUCE.pop(id(value), None)
        if lr is not None and lr[0] is value:
            _start_reduction(view, lr[1], lr[2])
            res = binary(lr[1], view, value, dtype=view.st.dt, mask=lr[2])
            fuse_or_copy(view, res)
            return
    if isinstance(value, Tensor) and value.st is view.st and value.box == view.box \
            and value.shape == view.shape:
        return  # `t[k] += v` stores back the view `__iadd__` already updated
    if view.st.kind == "hbm":
        if isinstance(value, Tensor):
            store(view, value)
            return
        tmp = alloc(view.shape, view.st.dt, sbuf)
        core.memset_tile(tmp, value)
        dma(view, tmp)
        return
    if isinstance(value, Tensor):
        if value.st.kind == "hbm":
            dma(view, value)
        else:
            m = M.result_mask(value)
            if view.valid is not None:
                view.check_valid(m)  # out of bounds only where the mask excludes it
            fuse_or_copy(view, value, mask=m)
    else:
        core.memset_tile(view, value)


def broadcast_to(src, shape, **kw):
    """New tile with `src` broadcast to `shape`."""
    if kw:
        _unmodelled("nl.broadcast_to", kw)
    shape = _shape(shape)
    out = core.tmp(shape, src.st.dt, sbuf)
    nd = len(shape)
    padded = tuple(src.shape) + (1,) * (nd - len(src.shape))
    try:
        if np.broadcast_shapes(padded, shape) != shape:
            raise ValueError
    except ValueError:
        raise compile_error("cannot broadcast tile of shape %s to %s"
                            % (list(src.shape), list(shape)))
    partition = padded[0] != shape[0]
    if partition and src.st.kind == "psum":
        # neither TensorE nor GpSimdE reads PSUM: the compiler evacuates the tile to SBUF
        # first (VectorE)
        staged = core.tmp(src.shape, src.st.dt, sbuf)
        core.copy_op(staged, src)
        src = staged
    cost = core.pe_broadcast_cost(src, out) if partition else None
    if cost is not None:
        eng = TENSOR
    else:
        eng = GPSIMD if partition else VECTOR
        # a partition broadcast reads one source row per core and writes every partition:
        # one element stream per partition (the output)
        cost = engine_cost(eng, free_size(out), streams=1)
    compute(eng, cost, [src], [out],
            (lambda: np.broadcast_to(value_of(src, nd), shape)), "broadcast")
    return out


Tensor.broadcast_to = lambda self, shape: broadcast_to(self, shape)
_positional_reshape = Tensor.reshape


def _reshape(self, *shape, **kw):
    """`t.reshape((a, b))`, `t.reshape(a, b)` or `t.reshape(shape=(a, b))`."""
    if kw:
        if set(kw) != {"shape"} or shape:
            raise compile_error("reshape takes the new shape, positionally or as shape=, "
                                "got %s" % (", ".join(sorted(kw)) or "both forms"))
        shape = (kw["shape"],)
    return _positional_reshape(self, *shape)


_reshape.__name__ = "reshape"
Tensor.reshape = _reshape
_reinterpret.install()  # `t.view(dtype)`
_plain_index = Tensor.__getitem__


def _keep_free_axes(self, key):
    """`tile[:, j]` on a 2-D on-chip tile: an on-chip tile keeps at least its partition axis
    and one free axis, so an integer that would leave only the partition axis keeps its free
    axis with size 1 (as NKI does: the result is [P, 1]). Otherwise integers drop their axis
    (`t[:, i, :]` of a [P, n, 1] tile is [P, 1]); HBM tensors and keys with index
    expressions follow their own rules."""
    if type(key) in (bool, np.bool_) or (type(key) is np.ndarray and key.dtype == np.bool_):
        return _predicated(self, key)
    try:
        r = _plain_index(self, key)
    except _NkiRuntimeError as e:
        r = _masked_slices(self, key, e)
    if self.st.kind == "hbm" or self.vd is None or len(r.shape) != 1 or len(self.shape) < 2:
        return r
    keys = key if isinstance(key, tuple) else (key,)
    vd = self.vd
    pdim = self.st.pdim
    last = None
    i = 0
    for n, k in enumerate(keys):
        if k is None:
            continue
        if k is Ellipsis:
            return r
        if type(k) not in (int, slice, np.int64, np.int32):
            return r
        if i < len(vd) and vd[i] > pdim and type(k) is not slice:
            last = (n, i)
        i += 1
    if last is None:
        return r
    n, i = last
    j = int(keys[n])
    if j < 0:
        j += self.shape[i]
    out = list(keys)
    out[n] = slice(j, j + 1)
    return _plain_index(self, tuple(out))


def _predicated(t, pred):
    """`tile[predicate]` (old API): the operand access restricted to where the predicate
    holds. A predicate true on the whole tile restricts nothing and is the tile itself;
    a partial one would have to narrow the instruction's iteration domain, which nkisim
    does not model for operands (use the instruction's `mask=`)."""
    m = np.asarray(pred)
    if m.all():
        return t
    raise compile_error("tile[predicate] with a predicate that is false for some elements "
                        "is not modelled by nkisim; pass it as the instruction's mask= "
                        "instead")


def _masked_slices(t, key, err):
    """`x[nl.ds(p, 128), ...]` reaching past the tensor's end: legal in NKI when the access
    is masked (`nl.load(..., mask=...)`). The slices become index expressions on their own
    axes, whose out-of-range elements are then checked against the access's mask."""
    keys = key if isinstance(key, tuple) else (key,)
    ints = (int, np.int64, np.int32)
    if (builtins.any(type(k) is IExpr for k in keys)
            and builtins.all(type(k) is IExpr or type(k) in ints for k in keys)):
        # an integer index past the end next to index expressions (`w[i_p, h, i_f]` with
        # h == H under mask h < H): the general path checks it against the access's mask
        return _advanced_index(t, key)
    if not builtins.all(type(k) in (int, slice, np.int64, np.int32) for k in keys):
        raise err
    rest = builtins.max(0, len(t.shape) - len(keys))
    nslices = len([k for k in keys if type(k) is slice]) + rest
    out = []
    ax = 0
    for i, k in enumerate(list(keys) + [slice(None)] * rest):
        if type(k) is slice:
            if k.step not in (None, 1):
                raise err
            n = t.shape[i]
            a = 0 if k.start is None else int(k.start)
            b = n if k.stop is None else int(k.stop)
            out.append(IExpr(a, 1, builtins.max(0, b - a), ax, nslices))
            ax += 1
        else:
            out.append(k)
    return _plain_index(t, tuple(out))


_keep_free_axes.__name__ = "__getitem__"
Tensor.__getitem__ = _keep_free_axes


def _setitem(self, key, value):
    """`t[key] = value`; like indexing, a slice past the end is legal when the assigned
    masked result excludes it (checked by `assign`)."""
    try:
        view = _plain_index(self, key)
    except _NkiRuntimeError as e:
        view = _masked_slices(self, key, e)
    assign(view, value)


Tensor.__setitem__ = _setitem


from . import hwrules as _hw  # noqa: E402  (namespace rules)
import builtins  # noqa: E402  (nl's all/max/min/sum shadow them)
