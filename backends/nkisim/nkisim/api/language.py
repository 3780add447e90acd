"""`nki.language` (nl): dtypes, tile sizes, loops, SPMD ids, allocation and matmul here; memory
movement and tensor indexing in language_memory, element-wise math and reductions in
language_math (re-exported: `nl.add`, `nl.load`, ... are this module's names).

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
from . import masks as M
from . import objects as _objects
from .objects import NKIObject  # noqa: F401  (nl.NKIObject)
from ..machine import runtime
from ..data.buffers import (ParDim, Storage, Tensor, arange, ds, hbm, mgrid,  # noqa: F401
                            private_hbm, psum, sbuf, shared_hbm, as_buffer)  # (re-exported)
from ..machine.core import (alloc, compute, check_onchip, free_size, engine_cost, dt_of,
                            matmul_core, transpose_core)
from ..errors import compile_error
from ..machine.timing import GPSIMD, VECTOR
from .language_math import (_SCALAR_FUNCS, _shape, _unmodelled, unary, exp, log, sqrt, rsqrt, tanh,
                            sigmoid, gelu, gelu_apprx_tanh, gelu_apprx_sigmoid,
                            gelu_apprx_sigmoid_dx, gelu_dx, silu, silu_dx, relu, square,
                            reciprocal, negative, abs, sign, sin, cos, tan, erf, erf_dx, softplus,
                            mish, ceil, floor, trunc, arctan, exp2, log2, logical_not, invert,
                            bitwise_not, identity, binary, fdt_ok, add, subtract, multiply, divide,
                            maximum, minimum, power, mod, fmod, floor_divide, equal, not_equal,
                            greater, greater_equal, less, less_equal, logical_and, logical_or,
                            logical_xor, bitwise_and, bitwise_or, bitwise_xor, left_shift,
                            right_shift, inplace, where, select, reduce, sum, max, min, mean, prod,
                            all, any, var, softmax, rms_norm, cumsum, dropout)  # noqa: F401
from .language_memory import (_positional_reshape, load, store, load_transpose2d, copy,
                              loop_reduce, assign, broadcast_to)  # noqa: F401
from .language_ext import (abs_max, abs_min, expand_dims, random_seed, bypass,  # noqa: F401
                           prelu)

# ---- dtypes -------------------------------------------------------------------------------
float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)
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
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
uint64 = np.dtype(np.uint64)
bool_ = np.dtype(np.bool_)
bool = bool_  # noqa: A001  (`nl.bool`, as the NKI Library writes it; code here has none)
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
    """A launch-grid axis of n programs, one per physical core of the logical core."""
    from ..machine import cores
    return cores.nc(n)


def spmd_dim(size, *factors):
    """One launch-grid axis of size*factors... programs, sharded over the physical cores
    by its nl.nc factor (machine/cores.py)."""
    from ..machine import cores
    return cores.spmd_dim(size, *factors)


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


def ndarray(shape, dtype, buffer=None, name="", lazy_initialization=False, address=None, **kw):
    """Uninitialised tensor (filled with NaN / a sentinel so unwritten data is detectable).
    `lazy_initialization` changes nothing here: the contents are undefined either way, and a
    PSUM location's first accumulation already overwrites it (see PSUM accumulation).
    An SBUF one records which elements instructions wrote: an `nl.loop_reduce` into an
    element never written starts from the reduction's first value (language_memory.assign).
    `address=` is honoured for PSUM (tensors pinned to one address share its storage:
    objects.pinned_alias); elsewhere accepted and not honoured (objects.placement names it
    in the result)."""
    if kw:
        _unmodelled("nl.ndarray", kw)
    same = _objects.pinned_alias("nl.ndarray", address, _shape(shape), dt_of(dtype),
                                 as_buffer(buffer)) if address is not None else None
    if same is not None:
        return same
    t = _declared(shape, dtype, buffer, name, track=True)
    if isinstance(t, _modalloc.ModularTensor):
        _objects.placement("nl.ndarray", address)
        return t
    return _objects.pin("nl.ndarray", address, t)


def _declared(shape, dtype, buffer, name, track):
    """A declared tensor; `track`: an SBUF one (not a rotating-buffer one) in a run with
    numerics records which elements were written (Storage.written)."""
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
    t = alloc(_shape(shape), dt_of(dtype), as_buffer(buffer), name=name, pdim=pdim)
    st = t.st
    if track and st.kind == "sbuf" and st.data is not None:
        st.written = np.zeros(st.shape, dtype=bool)
    return t


def _filled(shape, dtype, buffer, value, name=""):
    """A tile filled with `value` (`lazy_initialization=` only lets the compiler choose when
    the fill runs; the values are the same, so it is accepted and the fill issued here).
    Written whole by its fill, so it records no write set."""
    t = _declared(shape, dtype, buffer, name, track=False)
    core.memset_tile(t, value)
    return t


def zeros(shape, dtype, buffer=None, name="", lazy_initialization=False, address=None, **kw):
    if kw:
        _unmodelled("nl.zeros", kw)
    _objects.placement("nl.zeros", address)
    if lazy_initialization and as_buffer(buffer).kind == "psum":
        return _lazy_psum_zeros(shape, dtype, buffer, name)
    return _filled(shape, dtype, buffer, 0, name)


def _lazy_psum_zeros(shape, dtype, buffer, name):
    """A PSUM tile zeroed with `lazy_initialization=True`: the compiler chooses when the
    fill runs, and a matmul that starts an accumulation group in PSUM overwrites instead of
    adding, so no fill instruction is issued (the values are zero as for any nl.zeros).
    Named in compiler_effects."""
    t = _declared(shape, dtype, buffer, name, track=False)
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


def shared_identity_matrix(n, dtype=np.uint8, dst=None, **kw):
    """An n x n identity matrix in SBUF (NKI 2.30+ docs: "Create an identity matrix in SBUF";
    the NKI Library passes it straight to nc_matmul). It is loaded by one DMA from the
    constant in HBM; the compiler reuses one per dtype, so a run keeps one per (n, dtype).
    `dst`: the identity is written into that tensor instead."""
    if kw:
        _unmodelled("nl.shared_identity_matrix", kw)
    dt = dt_of(dtype)
    s = runtime.CUR
    cache = getattr(s, "identity_sbuf", None)
    if dst is None and cache is not None and (n, dt.name) in cache:
        return cache[(n, dt.name)]
    const = shared_constant(np.eye(n), dtype)
    out = dst if dst is not None else alloc((n, n), dt, sbuf, name="identity")
    core.dma(out, const, None)
    if dst is None and s is not None:
        if cache is None:
            cache = s.identity_sbuf = {}
        cache[(n, dt.name)] = out
    return out


def static_cast(arr, dtype):
    """Convert a numpy array to an NKI dtype (host-side helper)."""
    dt = D.lookup(dtype)
    return D.quantize(np.asarray(arr), dt)


# ---- memory movement ----------------------------------------------------------------------
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


def gather_flattened(data, indices, axis=0, dtype=None, **kw):
    """Per partition, the elements of data's flattened free axes at `indices` (nisa.nc_n_gather
    on GpSimdE, then a copy when `dtype` differs)."""
    if kw:
        _unmodelled("nl.gather_flattened", kw)
    if axis not in (0, None):
        _unmodelled("nl.gather_flattened", {"axis": axis})
    from . import isa_gather  # noqa: PLC0415  (nl over nisa, as NKI builds it)
    out = core.tmp(indices.shape, data.st.dt, sbuf, overwritten=True)
    isa_gather.nc_n_gather(dst=out, data=data, indices=indices)
    if dtype is None or dt_of(dtype) is out.st.dt:
        return out
    conv = core.tmp(out.shape, dt_of(dtype), sbuf, overwritten=True)
    core.copy_op(conv, out)
    return conv


def rand(shape, dtype=np.float32, **kw):
    if kw:
        _unmodelled("nl.rand", kw)
    out = alloc(_shape(shape), dt_of(dtype), sbuf)
    compute(GPSIMD, engine_cost(GPSIMD, free_size(out), streams=1), [], [out],
            lambda: np.random.default_rng(getattr(core.sim(), "random_seed", 0)).random(
                out.shape), "rand")
    return out


from . import hwrules as _hw  # noqa: E402  (namespace rules; kept out of the import block)
from . import modalloc as _modalloc  # noqa: E402
from ..errors import NkiRuntimeError as _NkiRuntimeError  # noqa: E402
import builtins  # noqa: E402  (this module's all/max/min/sum are nl reductions)
from .grids import (NkiBlockGrid, NkiGrid, NkiTileGrid, alloc_blocks,  # noqa: E402,F401
                    alloc_tiles, blocks, tiles)
from . import table as _table  # noqa: E402
_table.install_unmodelled(globals(), "nki.language")  # every documented name exists
