"""`nki.language` (nl): allocation, memory movement, element-wise math, reductions, matmul.

Functions follow the old (tile-returning) API; ops that create tiles allocate them in SBUF
(PSUM for matmul/transpose results). Every call that does work issues one or more
instructions to the timing model (see engine helpers in `core`).
"""
import contextlib
import math
import sys

import numpy as np

from ..machine import constants as C
from ..machine import core
from ..data import dtypes as D
from ..data import ops as O
from . import masks as M
from ..data import reinterpret as _reinterpret
from ..machine import runtime
from ..data.buffers import _advanced_index  # noqa: E402  (the general indexing path)
from ..data.buffers import (Buffer, IExpr, ParDim, Storage, Tensor, arange, ds, hbm, mgrid, private_hbm,
                      psum, sbuf, shared_hbm, as_buffer)
from ..machine.core import (alloc, compute, dma, check_onchip, free_size, engine_cost, dt_of,
                   value_of, fuse_or_copy, matmul_core, transpose_core)
from ..errors import compile_error, runtime_error
from ..machine.timing import GPSIMD, SCALAR, TENSOR, VECTOR

# ---- dtypes -------------------------------------------------------------------------------
float32 = np.float32
float16 = np.float16
bfloat16 = D.bfloat16
tfloat32 = D.tfloat32
float32r = D.float32r
float8_e4m3 = D.float8_e4m3
float8_e5m2 = D.float8_e5m2
float8_e4m3fn = D.float8_e4m3fn
float8_e5m2_x4 = D.float8_e5m2_x4        # trn3 MX dtypes (nkisim.mx)
float8_e4m3fn_x4 = D.float8_e4m3fn_x4
float4_e2m1fn_x4 = D.float4_e2m1fn_x4
float8_e8m0fnu = D.float8_e8m0fnu
int8 = np.int8
int16 = np.int16
int32 = np.int32
int64 = np.int64
uint8 = np.uint8
uint16 = np.uint16
uint32 = np.uint32
uint64 = np.uint64
bool_ = np.bool_
fp32 = D.fp32            # float32, with its limits: `nl.fp32.min`
finfo = D.finfo          # `nl.finfo(nl.bfloat16).max`
sizeinbytes = D.sizeinbytes


# ---- tile sizes ---------------------------------------------------------------------------
class _TileSize:
    pmax = C.PMAX
    psum_fmax = C.PSUM_BANK_BYTES // 4
    psum_bank_fmax = C.PSUM_BANK_BYTES // 4
    psum_bank_fmax_bytes = C.PSUM_BANK_BYTES
    psum_num_banks = C.PSUM_NUM_BANKS
    gemm_stationary_fmax = C.GEMM_STATIONARY_FMAX
    gemm_moving_fmax = C.GEMM_MOVING_FMAX
    bn_stats_fmax = C.BN_STATS_FMAX
    psum_min_align = 4
    sbuf_min_align = 4

    @property
    def sbuf_fmax_bytes(self):
        sim = runtime.CUR
        return (sim.target if sim else C.TRN2).sbuf_bytes_per_partition

    @property
    def total_available_sbuf_size(self):
        return self.sbuf_fmax_bytes

    @property
    def sbuf_size_bytes(self):
        return self.sbuf_fmax_bytes * C.PMAX

    @property
    def sbuf_fmax(self):
        return self.sbuf_fmax_bytes // 4


tile_size = _TileSize()


def par_dim(n):
    """Marks a partition dimension (old API): dimensions before it are block dimensions."""
    return ParDim(int(n))


def _unmodelled(fname, kw):
    """Keyword arguments nkisim does not model are an error, not silently ignored."""
    raise compile_error("%s: argument%s %s %s not modelled by nkisim (the simulator would "
                        "ignore %s); remove %s" % (fname, "s" if len(kw) > 1 else "",
                                                   ", ".join(sorted(kw)),
                                                   "are" if len(kw) > 1 else "is",
                                                   "them" if len(kw) > 1 else "it",
                                                   "them" if len(kw) > 1 else "it"))


# ---- loops --------------------------------------------------------------------------------
def affine_range(*args, **kw):
    """A loop of independent iterations. Loops of 2 or more iterations tell the scheduler
    where they begin and end: the compiler groups the narrow per-element instructions of a
    small one (at most GROUP_MAX_TRIP iterations) into wide ones (timing.Scheduler.join,
    core.compute)."""
    r = range(*args)
    s = runtime.CUR
    if s is None or len(r) < 2:
        return r
    return _AffineLoop(r)


class _AffineLoop:
    """A small affine_range: iterates like its range and marks the loop for the scheduler."""
    __slots__ = ("r",)

    def __init__(self, r):
        self.r = r

    def __len__(self):
        return len(self.r)

    def __getitem__(self, i):
        return self.r[i]

    def __iter__(self):
        s = runtime.CUR
        if s is None:
            return iter(self.r)
        return _affine_loop(self.r, s)


def _affine_loop(r, s):
    s.sched.begin_affine(len(r))
    try:
        for i in r:
            s.sched.next_iteration()
            yield i
    finally:
        s.sched.end_affine()


def sequential_range(*args, **kw):
    """A loop with a loop-carried dependency: its instructions keep program order on every
    engine (no reordering across iterations), and later code starts after it."""
    r = range(*args)
    s = runtime.CUR
    if s is None:
        return r
    return _ordered_loop(r)


def _ordered_loop(r):
    _begin_ordered()
    try:
        for i in r:
            yield i
    finally:
        _end_ordered()


def _begin_ordered():
    """Start of a sequential_range loop (scheduler: program order from here)."""
    s = runtime.CUR
    if s is not None:
        s.sched.begin_ordered()


def _end_ordered():
    """End of a sequential_range loop (scheduler: later code starts after the loop)."""
    s = runtime.CUR
    if s is not None:
        s.sched.end_ordered()


def static_range(*args, **kw):
    return range(*args)


def dynamic_range(*args, **kw):
    """A loop the compiler keeps as a runtime loop. NKI 0.7 (SDK 2.33) traces kernels as
    Python and drops it: in the `nki` namespace it is an error pointing to nl.fori_loop /
    nl.while_loop; the legacy namespace keeps it."""
    if runtime.CUR is not None and _hw.strict():
        raise compile_error("nl.dynamic_range is not available in NKI 0.7 (SDK 2.33), which "
                            "traces kernels as Python; use nl.fori_loop (or nl.while_loop) "
                            "for a runtime loop, or nl.affine_range / nl.sequential_range")
    return range(*args)


def fori_loop(lower, upper, body_fun, init_val=None, step=1, **kw):
    if kw:
        _unmodelled("nl.fori_loop", kw)
    val = init_val
    for i in range(lower, upper, step):
        r = body_fun(i, val) if init_val is not None else body_fun(i)
        if init_val is not None:
            val = r
    return val


def while_loop(cond_fun, body_fun, init_val):
    val = init_val
    while cond_fun(val):
        val = body_fun(val)
    return val


@contextlib.contextmanager
def no_reorder():
    yield


# ---- SPMD ---------------------------------------------------------------------------------
def program_id(axis=0):
    sim = core.sim()
    pid = sim.program_id
    if axis >= len(pid):
        return 0
    return pid[axis]


def num_programs(axes=None):
    sim = core.sim()
    if axes is None:
        return math.prod(sim.grid)
    if isinstance(axes, (tuple, list)):
        return math.prod(sim.grid[a] if a < len(sim.grid) else 1 for a in axes)
    return sim.grid[axes] if axes < len(sim.grid) else 1


def program_ndim():
    return len(core.sim().grid)


def nc(n):
    return int(n)


spmd_dim = nc


# ---- predicates ---------------------------------------------------------------------------
def is_sbuf(t):
    return t.st.kind == "sbuf"


def is_psum(t):
    return t.st.kind == "psum"


def is_hbm(t):
    return t.st.kind == "hbm"


def is_on_chip(t):
    return t.st.kind != "hbm"


# ---- creation -----------------------------------------------------------------------------
def _shape(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(map(int, shape))


def ndarray(shape, dtype, buffer=None, name="", lazy_initialization=False, **kw):
    """Uninitialised tensor (filled with NaN / a sentinel so unwritten data is detectable).
    `lazy_initialization` changes nothing here: the contents are undefined either way, and a
    PSUM location's first accumulation already overwrites it (see PSUM accumulation)."""
    if kw:
        _unmodelled("nl.ndarray", kw)
    pdim = 0
    if isinstance(shape, (tuple, list)):
        for i, s in enumerate(shape):
            if type(s) is ParDim:
                pdim = i
                break
    mod_tiles = getattr(buffer, "nkisim_tiles", None)
    if mod_tiles and pdim > 0:
        phys, nblocks, ptiles = _modalloc.physical_shape(_shape(shape), pdim, mod_tiles)
        t = alloc(phys, dt_of(dtype), as_buffer(buffer), name=name, pdim=pdim)
        return _modalloc.ModularTensor.wrap(t, nblocks, ptiles)
    return alloc(_shape(shape), dt_of(dtype), as_buffer(buffer), name=name, pdim=pdim)


def _filled(shape, dtype, buffer, value, name=""):
    """A tile filled with `value` (`lazy_initialization=` only lets the compiler choose when
    the fill runs; the values are the same, so it is accepted and the fill issued here)."""
    t = ndarray(shape, dtype, buffer, name)
    core.memset_tile(t, value)
    return t


def zeros(shape, dtype, buffer=None, name="", lazy_initialization=False, **kw):
    if kw:
        _unmodelled("nl.zeros", kw)
    if lazy_initialization and as_buffer(buffer).kind == "psum":
        return _lazy_psum_zeros(shape, dtype, buffer, name)
    return _filled(shape, dtype, buffer, 0, name)


def _lazy_psum_zeros(shape, dtype, buffer, name):
    """A PSUM tile zeroed with `lazy_initialization=True`: the compiler chooses when the
    fill runs, and a matmul that starts an accumulation group in PSUM overwrites instead of
    adding, so no fill instruction is issued (the values are zero as for any nl.zeros).
    Named in compiler_effects."""
    t = ndarray(shape, dtype, buffer, name)
    s = runtime.CUR
    if s.numerics:
        t.write(np.zeros(t.shape, dtype=np.float32), None)
    # no instruction: the blocks of a block-dimension tile become live when first used
    blk, t.st.dep.blk = t.st.dep.blk, None
    s.sched.issue_zero(VECTOR, [], [(t.st.dep, t.box)])
    t.st.dep.blk = blk
    line = core.current_kernel_line()
    why = "PSUM zero fill with lazy_initialization left to the first matmul"
    rec = s.sched.effects.setdefault((line, why), [0, 0])
    rec[0] += 1
    return t


def ones(shape, dtype, buffer=None, name="", lazy_initialization=False, **kw):
    if kw:
        _unmodelled("nl.ones", kw)
    return _filled(shape, dtype, buffer, 1, name)


def full(shape, fill_value, dtype, buffer=None, name="", lazy_initialization=False, **kw):
    if kw:
        _unmodelled("nl.full", kw)
    return _filled(shape, dtype, buffer, fill_value, name)


def empty_like(a, dtype=None, buffer=None, name="", **kw):
    if kw:
        _unmodelled("nl.empty_like", kw)
    return ndarray(a.shape, dtype if dtype is not None else a.dtype,
                   buffer if buffer is not None else a.buffer, name)


def zeros_like(a, dtype=None, buffer=None, name="", **kw):
    if kw:
        _unmodelled("nl.zeros_like", kw)
    return zeros(a.shape, dtype if dtype is not None else a.dtype,
                 buffer if buffer is not None else a.buffer, name)


def ones_like(a, dtype=None, buffer=None, name="", **kw):
    if kw:
        _unmodelled("nl.ones_like", kw)
    return ones(a.shape, dtype if dtype is not None else a.dtype,
                buffer if buffer is not None else a.buffer, name)


def full_like(a, fill_value, dtype=None, buffer=None, name="", **kw):
    if kw:
        _unmodelled("nl.full_like", kw)
    return full(a.shape, fill_value, dtype if dtype is not None else a.dtype,
                buffer if buffer is not None else a.buffer, name)


def shared_constant(constant, dtype=None, **kw):
    if kw:
        _unmodelled("nl.shared_constant", kw)
    arr = np.asarray(constant)
    dt = dt_of(dtype if dtype is not None else arr.dtype)
    st = Storage(tuple(arr.shape), dt, shared_hbm, data=D.quantize(arr, dt).copy()
                 if core.sim().numerics else None)
    return Tensor.root(st)


def shared_identity_matrix(n, dtype=np.uint8, **kw):
    if kw:
        _unmodelled("nl.shared_identity_matrix", kw)
    return shared_constant(np.eye(n), dtype)


def static_cast(arr, dtype):
    """Convert a numpy array to an NKI dtype (host-side helper)."""
    dt = D.lookup(dtype)
    return D.quantize(np.asarray(arr), dt)


# ---- memory movement ----------------------------------------------------------------------
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
    `loop_indices`, the assignment accumulates: dst = op(dst, x) on every iteration (dst is
    initialised before the loop). Returns the tile to assign (x, converted to `dtype`)."""
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


def assign(view, value):
    """`view[...] = value` for tensors."""
    if _LOOP_REDUCE and isinstance(value, Tensor):
        lr = _LOOP_REDUCE.pop(id(value), None)
        if lr is not None and lr[0] is value:
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


# ---- element-wise ------------------------------------------------------------------------
_SCALAR_FUNCS = {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "gelu", "gelu_apprx_tanh",
                 "gelu_apprx_sigmoid", "gelu_dx", "silu", "silu_dx", "relu", "square",
                 "reciprocal", "sin", "cos", "tan", "erf", "erf_dx", "softplus", "mish",
                 "arctan", "exp2", "log2", "sign", "abs"}


def unary(name, x, dtype=None, mask=None):
    """Element-wise unary op on a tile; transcendental functions run on ScalarE."""
    if not isinstance(x, Tensor):
        v = O.UNARY[name](np.float32(x))
        return v
    check_onchip(x, name)
    if name in O.BITWISE and not x.st.dt.is_int:
        raise compile_error("invalid dtype %s for nl.%s (integer types only)" % (x.st.dt.name,
                                                                                 name))
    if dtype is not None:
        dt = dt_of(dtype)
    elif x.st.dt.is_float or name in O.BITWISE or name in ("negative", "abs"):
        dt = x.st.dt
    else:
        dt = D.FLOAT32
    out = core.tmp(x.shape, dt, sbuf)
    eng = SCALAR if name in _SCALAR_FUNCS else VECTOR
    f = O.UNARY[name]

    def run():
        v = value_of(x)
        if x.st.dt.is_float or name not in O.BITWISE:
            if v.dtype != np.float32 and name not in O.BITWISE:
                v = v.astype(np.float32)
        return f(v)
    compute(eng, engine_cost(eng, free_size(out)), [x], [out], run, name, mask=mask)
    return M.masked_result(out, mask)


def _make_unary(name):
    def fn(x, dtype=None, mask=None, **kw):
        if kw:
            _unmodelled("nl." + name, kw)
        return unary(name, x, dtype, mask)
    fn.__name__ = name
    fn.nkisim_op = name
    fn.__doc__ = "Element-wise %s." % name
    O.register(fn, name)
    return fn


exp = _make_unary("exp")
log = _make_unary("log")
sqrt = _make_unary("sqrt")
rsqrt = _make_unary("rsqrt")
tanh = _make_unary("tanh")
sigmoid = _make_unary("sigmoid")
gelu = _make_unary("gelu")
gelu_apprx_tanh = _make_unary("gelu_apprx_tanh")
gelu_apprx_sigmoid = _make_unary("gelu_apprx_sigmoid")
gelu_dx = _make_unary("gelu_dx")
silu = _make_unary("silu")
silu_dx = _make_unary("silu_dx")
relu = _make_unary("relu")
square = _make_unary("square")
reciprocal = _make_unary("reciprocal")
negative = _make_unary("negative")
abs = _make_unary("abs")
sign = _make_unary("sign")
sin = _make_unary("sin")
cos = _make_unary("cos")
tan = _make_unary("tan")
erf = _make_unary("erf")
erf_dx = _make_unary("erf_dx")
softplus = _make_unary("softplus")
mish = _make_unary("mish")
ceil = _make_unary("ceil")
floor = _make_unary("floor")
trunc = _make_unary("trunc")
arctan = _make_unary("arctan")
exp2 = _make_unary("exp2")
log2 = _make_unary("log2")
logical_not = _make_unary("logical_not")
invert = _make_unary("invert")
bitwise_not = invert
identity = _make_unary("identity")


def binary(name, a, b, dtype=None, mask=None):
    """Element-wise binary op with numpy broadcasting (VectorE)."""
    ta = isinstance(a, Tensor)
    tb = isinstance(b, Tensor)
    if not ta and not tb:
        return O.BINARY[name](a, b)
    if ta:
        check_onchip(a, name)
    if tb:
        check_onchip(b, name)
    if ta and tb:
        dt = D.promote(a.st.dt, b.st.dt)
        if a.shape == b.shape:
            shape = a.shape
        else:
            shape, _ = core.tile_shape((a.shape, b.shape), "nl." + name)
    else:
        t = a if ta else b
        s = b if ta else a
        dt = t.st.dt
        if not dt.is_float and isinstance(s, float):
            dt = D.FLOAT32
        shape = t.shape
    if name in O.COMPARISON and dtype is None:
        dt = dt if dt.is_float else D.UINT8
    if name == "divide" and dtype is None and not dt.is_float:
        dt = D.FLOAT32  # true division: integer tiles give float32 (nl.floor(a / b) idiom)
    if dtype is not None:
        dt = dt_of(dtype)
    if name in O.BITWISE and not dt.is_int:
        raise compile_error("invalid dtype %s for nl.%s (integer types only)" % (dt.name, name))
    out = core.tmp(tuple(shape), dt, sbuf)
    f = O.BINARY[name]
    n = free_size(out)
    if ta and tb:
        # tensor_tensor: 2N unless one side is a per-partition/scalar broadcast (tensor_scalar)
        small = free_size(a) == 1 or free_size(b) == 1
        if small:
            cost = core.vector_cost(n, None, core.perf_factor("tensor_scalar", [a, b], [out]))
        else:
            cost = core.tensor_tensor_cost(name, a, b, out)
        ins = [a, b]
    else:
        cost = core.vector_cost(n, None, core.perf_factor("tensor_scalar", [a if ta else b],
                                                         [out]))
        ins = [a if ta else b]
    eng = VECTOR
    if fdt_ok(dt) and (not (ta and tb) or small):
        eng, cost = core.place_scalar_form("nl." + name, (name,), n, cost)
    fdt = dt.is_float

    nd = len(shape)

    def run():
        va = value_of(a, nd) if ta else a
        vb = value_of(b, nd) if tb else b
        if fdt and name not in O.BITWISE:
            if ta and va.dtype != np.float32:
                va = va.astype(np.float32)
            if tb and vb.dtype != np.float32:
                vb = vb.astype(np.float32)
        return f(va, vb)
    compute(eng, cost, ins, [out], run, name, mask=mask)
    return M.masked_result(out, mask)


def fdt_ok(dt):
    """Float tiles only go to ScalarE's affine path (integer arithmetic stays on VectorE)."""
    return dt.is_float


# `nki` namespace: binary ops the hardware rejects (hwrules); the value is the alternative
_HW_BINARY = {"divide": "nl.multiply by nl.reciprocal, or nisa.tensor_tensor / "
                        "nisa.tensor_scalar with np.divide",
              "mod": "nisa.tensor_scalar / nisa.tensor_tensor with np.mod",
              "fmod": "nisa.tensor_scalar / nisa.tensor_tensor with np.fmod"}


def _hw_binary_check(name, x, y):
    if name in _HW_BINARY:
        _hw.reject("nl.%s" % name, _HW_BINARY[name])
    elif name == "power" and not isinstance(y, Tensor):
        _hw.reject("nl.power with a scalar exponent", "nisa.tensor_scalar with np.power, or "
                   "nisa.activation")
    elif isinstance(x, Tensor) and isinstance(y, Tensor) and x.shape != y.shape:
        _hw.reject("nl.%s broadcasting %s with %s" % (name, list(x.shape), list(y.shape)),
                   "operands of equal shape (nl.broadcast_to first) or nisa.tensor_scalar "
                   "with a [P, 1] operand")


def _make_binary(name):
    def fn(x, y, dtype=None, mask=None, **kw):
        if kw:
            _unmodelled("nl." + name, kw)
        _hw_binary_check(name, x, y)
        return binary(name, x, y, dtype, mask)
    fn.__name__ = name
    fn.nkisim_op = name
    fn.__doc__ = "Element-wise %s with broadcasting." % name
    O.register(fn, name)
    return fn


add = _make_binary("add")
subtract = _make_binary("subtract")
multiply = _make_binary("multiply")
divide = _make_binary("divide")
maximum = _make_binary("maximum")
minimum = _make_binary("minimum")
power = _make_binary("power")
mod = _make_binary("mod")
fmod = _make_binary("fmod")
floor_divide = _make_binary("floor_divide")
equal = _make_binary("equal")
not_equal = _make_binary("not_equal")
greater = _make_binary("greater")
greater_equal = _make_binary("greater_equal")
less = _make_binary("less")
less_equal = _make_binary("less_equal")
logical_and = _make_binary("logical_and")
logical_or = _make_binary("logical_or")
logical_xor = _make_binary("logical_xor")
bitwise_and = _make_binary("bitwise_and")
bitwise_or = _make_binary("bitwise_or")
bitwise_xor = _make_binary("bitwise_xor")
left_shift = _make_binary("left_shift")
right_shift = _make_binary("right_shift")


def inplace(t, o, name):
    """`t op= o`: PSUM `+=` of a fresh matmul result is a fused accumulation (no extra
    instruction); anything else is an element-wise op written back into `t`."""
    if (name == "add" and isinstance(o, Tensor) and t.st.kind == "psum"
            and o.st.name == "__matmul__"):
        m = M.result_mask(o)
        if m is None:
            core.accumulate_fused(t, o)
            return t
        # a masked matmul accumulates only the rectangle it computed
        box = M.mask_box("nisa.nc_matmul", m, o.shape)
        if box is None:
            core.accumulate_fused(t, o)
        elif box[0][1] > box[0][0] and box[1][1] > box[1][0]:
            if tuple(t.shape) != tuple(o.shape):
                raise compile_error("shape mismatch in PSUM accumulation of a masked matmul: "
                                    "%s += %s" % (list(t.shape), list(o.shape)))
            (r0, r1), (c0, c1) = box
            core.accumulate_fused(t[r0:r1, c0:c1], o[r0:r1, c0:c1])
        return t
    res = binary(name, t, o)
    fuse_or_copy(t, res)
    return t


def where(condition, x, y, dtype=None, mask=None, **kw):
    """Element-wise select: x where condition is non-zero, else y."""
    if kw:
        _unmodelled("nl.where", kw)
    tensors = [v for v in (condition, x, y) if isinstance(v, Tensor)]
    for v in tensors:
        check_onchip(v, "where")
    shapes = [v.shape for v in tensors] + [np.shape(v) for v in (condition, x, y)
                                           if isinstance(v, np.ndarray)]
    shape, nd = core.tile_shape(shapes, "nl.where")
    if dtype is not None:
        dt = dt_of(dtype)
    else:
        dts = [v.st.dt for v in (x, y) if isinstance(v, Tensor)]
        dt = dts[0] if dts else D.FLOAT32
        if len(dts) == 2:
            dt = D.promote(dts[0], dts[1])
    out = core.tmp(tuple(shape), dt, sbuf)

    def run():
        c = value_of(condition, nd)
        vx = value_of(x, nd)
        vy = value_of(y, nd)
        return np.where(np.asarray(c) != 0, vx, vy)
    compute(VECTOR, core.vector_cost(free_size(out), 2.0), tensors, [out], run, "select",
            mask=mask)
    return M.masked_result(out, mask)


select = where


# ---- reductions ---------------------------------------------------------------------------
def _axes(x, axis):
    nd = len(x.shape)
    if axis is None:
        axes = tuple(range(1, nd))
    elif isinstance(axis, (list, tuple)):
        axes = tuple(int(a) % nd for a in axis)
    else:
        axes = (int(axis) % nd,)
    if 0 in axes:
        raise compile_error("reduction along the partition dimension (axis 0) is not supported; "
                            "reduce along free axes, or use nisa.tensor_partition_reduce / "
                            "a matmul")
    return axes


_REDUCE_IDENTITY = {"add": 0.0, "sum": 0.0, "mean": 0.0, "maximum": -np.inf, "max": -np.inf,
                    "minimum": np.inf, "min": np.inf, "multiply": 1.0, "prod": 1.0}


def reduce(name, x, axis, dtype=None, keepdims=False, mask=None, negate=False, out=None,
           engine=VECTOR):
    """Reduction along free axes (VectorE)."""
    check_onchip(x, name)
    axes = _axes(x, axis)
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if keepdims else \
        tuple(n for i, n in enumerate(x.shape) if i not in axes)
    if out is None:
        dt = dt_of(dtype) if dtype is not None else x.st.dt
        if name in ("all", "any", "logical_and", "logical_or"):
            dt = dt_of(dtype) if dtype is not None else D.UINT8
        out = core.tmp(shape, dt, sbuf)
    f = O.REDUCE[name]
    n = free_size(x)
    factor = 1.0
    if (x.st.dt is D.BFLOAT16 and out.st.dt is D.BFLOAT16 and name in ("add", "sum", "max",
                                                                       "maximum")):
        factor = 0.5

    def run():
        v = value_of(x)
        if v.dtype.kind == "f" and v.dtype != np.float32:
            v = v.astype(np.float32)
        sel = None
        if mask is not None:
            try:
                sel = np.broadcast_to(np.asarray(mask), x.shape)
            except ValueError:
                sel = None
        if x.valid is not None:
            sel = x.valid if sel is None else (sel & x.valid)
        if sel is not None and name in _REDUCE_IDENTITY:
            v = np.where(sel, v, _REDUCE_IDENTITY[name])
            if name == "mean":
                cnt = np.maximum(sel.sum(axis=axes, keepdims=keepdims), 1)
                r = np.sum(v, axis=axes, keepdims=keepdims) / cnt
                return -r if negate else r
        r = f(v, axis=axes, keepdims=keepdims)
        return -r if negate else r
    compute(engine, core.vector_cost(n, factor) if engine == VECTOR
            else engine_cost(engine, n, streams=1),
            [x], [out], run, "tensor_reduce", mask=mask)
    return out


def _make_reduce(name):
    def fn(x, axis=None, dtype=None, keepdims=False, mask=None, **kw):
        if kw:
            _unmodelled("nl." + name, kw)
        return reduce(name, x, axis, dtype, keepdims, mask)
    fn.__name__ = name
    fn.__doc__ = "Reduction (%s) along free axes." % name
    return fn


sum = _make_reduce("sum")
max = _make_reduce("max")
min = _make_reduce("min")
mean = _make_reduce("mean")
prod = _make_reduce("prod")
all = _make_reduce("all")
any = _make_reduce("any")
O.register(sum, "add")
O.register(max, "maximum")
O.register(min, "minimum")
O.register(prod, "multiply")


def var(x, axis=None, dtype=None, keepdims=False, mask=None, **kw):
    """Variance along free axes (bn_stats + bn_aggr on VectorE)."""
    if kw:
        _unmodelled("nl.var", kw)
    check_onchip(x, "var")
    axes = _axes(x, axis)
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if keepdims else \
        tuple(n for i, n in enumerate(x.shape) if i not in axes)
    out = core.tmp(shape, dt_of(dtype) if dtype is not None else x.st.dt, sbuf)
    n = free_size(x)

    def run():
        return np.var(value_of(x).astype(np.float32), axis=axes, keepdims=keepdims)
    cost = core.vector_cost(n) + core.vector_cost(1, runtime.CUR.costs.bn_aggr_factor)
    compute(VECTOR, cost, [x], [out],
            run, "bn_stats", mask=mask)
    return out


def softmax(x, axis=-1, dtype=None, mask=None, **kw):
    """Softmax along a free axis (max, exp with bias, sum, reciprocal, multiply)."""
    if kw:
        _unmodelled("nl.softmax", kw)
    _hw.reject("nl.softmax", "nl.max, nl.exp (or nisa.activation with a bias), nl.sum and "
               "nl.reciprocal")
    m = reduce("max", x, axis, keepdims=True)
    e = exp(subtract(x, m))
    s = reduce("sum", e, axis, keepdims=True)
    return multiply(e, reciprocal(s), dtype=dtype)


def rms_norm(x, w, axis=-1, n=None, epsilon=1e-6, dtype=None, **kw):
    """x * rsqrt(mean(x^2) + eps) * w along a free axis."""
    if kw:
        _unmodelled("nl.rms_norm", kw)
    _hw.reject("nl.rms_norm", "nl.square, nl.mean, nl.rsqrt and nl.multiply")
    sq = square(x)
    ms = reduce("mean", sq, axis, keepdims=True)
    r = rsqrt(add(ms, float(epsilon)))
    return multiply(multiply(x, r), w, dtype=dtype)


def cumsum(x, axis=-1, dtype=None, **kw):
    """Inclusive prefix sum along the last free axis (VectorE scan)."""
    if kw:
        _unmodelled("nl.cumsum", kw)
    check_onchip(x, "cumsum")
    out = core.tmp(x.shape, dt_of(dtype) if dtype is not None else x.st.dt, sbuf)
    compute(VECTOR, core.vector_cost(free_size(x), 2.0), [x], [out],
            lambda: np.cumsum(value_of(x).astype(np.float32), axis=axis), "tensor_tensor_scan")
    return out


def dropout(x, rate, dtype=None, mask=None, **kw):
    """Dropout with a fixed-seed mask (deterministic)."""
    if kw:
        _unmodelled("nl.dropout", kw)
    check_onchip(x, "dropout")
    out = alloc(x.shape, dt_of(dtype) if dtype is not None else x.st.dt, sbuf)
    r = float(rate) if not isinstance(rate, Tensor) else 0.0

    def run():
        rng = np.random.default_rng(0)
        keep = rng.random(x.shape) >= r
        return np.where(keep, value_of(x), 0)
    compute(VECTOR, core.vector_cost(free_size(x)), [x], [out], run, "dropout", mask=mask)
    return out


# ---- matmul / transpose -------------------------------------------------------------------
def _to_sbuf(t):
    """nl.matmul operands must be in SBUF: a PSUM tile is first copied out (VectorE)."""
    if t.st.kind != "psum":
        return t
    out = core.tmp(t.shape, t.st.dt, sbuf)
    core.copy_op(out, t)
    return out


def _same_precision(x, y):
    """nl.matmul of an fp32 tile with a bf16/fp16/fp8 one: TensorE takes either two fp32-class
    operands or two narrow ones, so the compiler converts; the narrow operand is widened to
    fp32 (exact) by a VectorE copy."""
    x32 = x.st.dt.name in core._FP32ISH
    y32 = y.st.dt.name in core._FP32ISH
    if x32 == y32:
        return x, y
    narrow = y if x32 else x
    wide = core.tmp(narrow.shape, D.FLOAT32, sbuf)
    core.copy_op(wide, narrow)
    return (x, wide) if x32 else (wide, y)


def matmul(x, y, transpose_x=False, mask=None, **kw):
    """x @ y (or x.T @ y with transpose_x) into a new PSUM fp32 tile."""
    if kw:
        _unmodelled("nl.matmul", kw)
    if not transpose_x:
        _hw.reject("nl.matmul without transpose_x=True", "nl.matmul(xT, y, transpose_x=True) "
                   "with x already transposed (or nisa.nc_matmul)")
    check_onchip(x, "matmul")
    check_onchip(y, "matmul")
    x = _to_sbuf(x)
    y = _to_sbuf(y)
    x, y = _same_precision(x, y)
    if not transpose_x:
        if len(x.shape) != 2:
            raise compile_error("nl.matmul expects 2-D tiles")
        xt = transpose_core(x, to_sbuf=True)
    else:
        xt = x
    return matmul_core(None, xt, y, None, "nl.matmul")


def transpose(x, dtype=None, mask=None, **kw):
    """2-D partition <-> free transpose on TensorE (result in PSUM)."""
    if kw:
        _unmodelled("nl.transpose", kw)
    check_onchip(x, "transpose")
    if len(x.shape) == 1:
        x = _positional_reshape(x, (x.shape[0], 1))  # a reduced [P] tile is [P, 1]
    if dtype is not None and dt_of(dtype) is not x.st.dt:
        _unmodelled("nl.transpose", {"dtype": dtype})
    if mask is None:
        return transpose_core(x)
    return M.masked_transpose(x, mask, None, None, "nl.transpose")


# ---- debugging ----------------------------------------------------------------------------
def device_print(prefix, x, **kw):
    """Print a tile's values (or a Python value) to stderr."""
    core.sim()
    if isinstance(x, Tensor):
        v = x.read()
        print(prefix, v if v is not None else x, file=sys.stderr)
    else:
        print(prefix, x, file=sys.stderr)


def gather_flattened(data, indices, **kw):
    raise compile_error("nl.gather_flattened is not supported by nkisim")


def rand(shape, dtype=np.float32, **kw):
    if kw:
        _unmodelled("nl.rand", kw)
    out = alloc(_shape(shape), dt_of(dtype), sbuf)
    compute(GPSIMD, engine_cost(GPSIMD, free_size(out), streams=1), [], [out],
            lambda: np.random.default_rng(0).random(out.shape), "rand")
    return out


from . import hwrules as _hw  # noqa: E402  (namespace rules; kept out of the import block)
from . import modalloc as _modalloc  # noqa: E402
from ..errors import NkiRuntimeError as _NkiRuntimeError  # noqa: E402
import builtins  # noqa: E402  (this module's all/max/min/sum are nl reductions)
from .grids import (NkiBlockGrid, NkiGrid, NkiTileGrid, alloc_blocks,  # noqa: E402,F401
                    alloc_tiles, blocks, tiles)
