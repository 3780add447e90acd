"""`nki.isa` (nisa): one function per engine instruction.

Every function accepts both API styles: the new one (SDK >= 2.27) with an explicit `dst`
first (positionally or by keyword) and no return value, and the old one that returns a new
tile (and may take `dtype=` / `mask=`).
"""
import numpy as np

from ..machine import constants as C
from ..machine import core
from . import masks as M
from ..data import dtypes as D
from ..data import ops as O
from ..machine import runtime
from ..data.buffers import Tensor, psum, sbuf
from ..machine.core import (alloc, check_onchip, compute, dma as _dma, dt_of, free_size, value_of,
                   vector_cost, scalar_cost, gpsimd_cost, perf_factor, matmul_core,
                   transpose_core, copy_op, memset_tile)
from ..errors import compile_error
from ..machine.timing import GPSIMD, SCALAR, TENSOR, VECTOR
from . import mx as _mx
from . import table as _table

_mx.install()  # `t.ap(..., dtype=)`


# ---- enums --------------------------------------------------------------------------------
class engine:
    unknown = 0
    tensor = 1
    scalar = 2
    activation = 2
    gpsimd = 3
    pool = 3
    dma = 4
    vector = 5
    sync = 6


_ENGINE_MAP = {1: TENSOR, 2: SCALAR, 3: GPSIMD, 5: VECTOR}


def _engine(e, default):
    if e is None:
        return default
    if isinstance(e, str):
        e = getattr(engine, e, 0)
    return _ENGINE_MAP.get(int(e), default)


class dge_mode:
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode:
    error = 0
    skip = 1


class reduce_cmd:
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class matmul_perf_mode:
    none = 0
    double_row = 1
    double_row_gen3 = 1


class dma_engine:
    unknown = 0


class nc_version:
    gen2 = 2
    gen3 = 3
    gen4 = 4


def get_nc_version():
    sim = runtime.CUR
    name = sim.target.name if sim is not None else "trn2"
    return {"trn1": nc_version.gen2, "trn3": nc_version.gen4}.get(name, nc_version.gen3)


# ---- argument binding ---------------------------------------------------------------------
def _bind(fname, args, kw, names, new):
    """Map positional/keyword arguments onto `names` (with 'dst' first when `new`). An
    unknown keyword is a compile error (it would otherwise be silently ignored)."""
    for k in kw:
        if k != "dst" and k not in names:
            raise compile_error("nisa.%s got an unexpected keyword argument %r (accepted: %s)"
                                % (fname, k, ", ".join(["dst"] + list(names))))
    if not args:
        return kw
    names = (["dst"] + names) if new else names
    out = {}
    if len(args) > len(names):
        raise compile_error("nisa.%s: too many positional arguments" % fname)
    for n, v in zip(names, args):
        out[n] = v
    for k, v in kw.items():
        if k in out:
            raise compile_error("nisa.%s: argument %r given twice" % (fname, k))
        out[k] = v
    return out


_DEFAULTS = (None, False, 0, "none")


def _reject(fname, p, *names):
    """Arguments nkisim does not model: a non-default value is a compile error rather than
    an argument silently ignored."""
    for n in names:
        v = p.get(n)
        if n == "mask" and (type(v) in (bool, np.bool_) and v or
                            type(v) is np.ndarray and v.dtype == np.bool_ and v.all()):
            continue  # a predicate that is true everywhere masks nothing
        if isinstance(v, (tuple, list)) or not any(v is d or (type(v) is type(d) and v == d)
                                                   for d in _DEFAULTS):
            raise compile_error("nisa.%s: %s=%r is not modelled by nkisim (the simulator would "
                                "ignore it); remove it or use an equivalent supported form"
                                % (fname, n, v))


def _is_new(args, kw, pos):
    if "dst" in kw:
        return True
    return len(args) > pos and isinstance(args[pos], Tensor)


def _out(p, shape, dt_default, buffer=sbuf):
    """Destination: `dst` (new API) or a fresh tile (old API)."""
    dst = p.get("dst")
    if dst is not None:
        if not isinstance(dst, Tensor):
            raise compile_error("dst must be a tensor")
        return dst, False
    dt = dt_of(p["dtype"]) if p.get("dtype") is not None else dt_default
    return core.tmp(tuple(shape), dt, buffer), True


def _check_same_shape(opname, dst, shape):
    if tuple(dst.shape) != tuple(shape):
        if dst.size != int(np.prod(shape)) or dst.shape[0] != shape[0]:
            raise compile_error("nisa.%s: dst shape %s does not match the result shape %s"
                                % (opname, list(dst.shape), list(shape)))


def _f32(v):
    if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.dtype != np.float32:
        return v.astype(np.float32)
    return v


def _opnd(x, nd=None):
    """Operand value: tile values (aligned to rank nd on the partition axis), or a scalar."""
    if isinstance(x, Tensor):
        return _f32(value_of(x, nd))
    return x


# ---- TensorE ------------------------------------------------------------------------------
def nc_matmul(*args, **kw):
    """dst = stationary.T @ moving (TensorE, PSUM fp32). Accumulates when `accumulate` is True,
    or (None) when the destination was already written."""
    new = _is_new(args, kw, 2)
    p = _bind("nc_matmul", args, kw, ["stationary", "moving", "is_stationary_onezero",
                                      "is_moving_onezero", "is_transpose", "accumulate",
                                      "tile_position", "tile_size", "perf_mode", "mask",
                                      "name", "dtype", "psum_accumulate_flag"], new)
    _reject("nc_matmul", p, "tile_position", "tile_size", "psum_accumulate_flag")
    dst = p.get("dst")
    if _is_double_row(p.get("perf_mode")):
        _reject("nc_matmul", p, "is_transpose", "mask")
        return _double_row_matmul(dst, p["stationary"], p["moving"], p.get("accumulate"))
    if p.get("is_transpose"):
        _reject("nc_matmul", p, "mask")
        return _matmul_transpose(p)
    st, mv = p["stationary"], p["moving"]
    if not _hw.strict():
        # the legacy compiler placed a PSUM operand (an nc_transpose result) in SBUF first
        st, mv = _psum_to_sbuf(st), _psum_to_sbuf(mv)
    if p.get("mask") is not None:
        return _masked_matmul(dst, st, mv, p)
    return matmul_core(dst, st, mv, p.get("accumulate"), "nisa.nc_matmul")


_FP8 = ("float8_e4m3", "float8_e5m2", "float8_e4m3fn")


def _is_double_row(mode):
    if mode is None or mode in (0, "none", matmul_perf_mode.none):
        return False
    if mode in (matmul_perf_mode.double_row, "double_row", "double_row_gen3"):
        return True
    raise compile_error("nisa.nc_matmul: unknown perf_mode %r (none or double_row)" % (mode,))


def _double_row_matmul(dst, st, mv, accumulate):
    """nc_matmul(perf_mode=double_row): TensorE's FP8 double-row mode (NeuronCore-v3/v4, i.e.
    trn2 and later; not NeuronCore-v2/trn1), which packs two FP8 rows per PE row for 2x
    throughput. stationary [K, 2, M] and moving [K, 2, N] hold two K-row sets each; the
    result is the [M, N] product contracted over both, sum_k,r st[k, r, m] * mv[k, r, n],
    in the time of one K-row pass."""
    s = runtime.CUR
    if s.target.name == "trn1":
        raise compile_error("nisa.nc_matmul: perf_mode double_row is not supported on "
                            "NeuronCore-v2 (trn1); it needs trn2 or later")
    for nm, t in (("stationary", st), ("moving", mv)):
        if not isinstance(t, Tensor) or len(t.shape) != 3 or t.shape[1] != 2:
            raise compile_error("nisa.nc_matmul(perf_mode=double_row): %s must be a [K, 2, F] "
                                "tile (got %s)" % (nm, list(getattr(t, "shape", ()))))
        if t.st.kind != "sbuf":
            raise compile_error("err_unsupported_memory: nisa.nc_matmul %s must be in SBUF (it "
                                "is in %s)" % (nm, t.st.kind.upper()))
        if t.st.dt.name not in _FP8:
            raise compile_error("nisa.nc_matmul(perf_mode=double_row) is an FP8 mode; %s is %s"
                                % (nm, t.st.dt.name))
    k, m_size, n_size = st.shape[0], st.shape[2], mv.shape[2]
    if mv.shape[0] != k:
        raise compile_error("nisa.nc_matmul: contraction (partition) sizes differ: stationary "
                            "%d vs moving %d" % (k, mv.shape[0]))
    if k > C.PMAX or m_size > C.GEMM_STATIONARY_FMAX or n_size > C.GEMM_MOVING_FMAX:
        raise compile_error("nisa.nc_matmul(perf_mode=double_row): tile [K=%d, M=%d, N=%d] "
                            "exceeds [%d, %d, %d]" % (k, m_size, n_size, C.PMAX,
                                                      C.GEMM_STATIONARY_FMAX,
                                                      C.GEMM_MOVING_FMAX))
    if dst is None:
        out = Tensor.root(core.Storage((m_size, n_size), D.FLOAT32, psum, name=core._MM,
                                       charge=False))
    else:
        out = dst
        if out.st.kind != "psum" or out.shape[0] != m_size or free_size(out) != n_size:
            raise compile_error("nisa.nc_matmul: output must be a PSUM tile of shape [%d, %d]"
                                % (m_size, n_size))
    if s.numerics:
        a = _f32(st.read()).reshape(2 * k, m_size)   # rows (k, r): the same order in both
        b = _f32(mv.read()).reshape(2 * k, n_size)
        res = O.matmul_tn(a, b).reshape(out.shape)
        if dst is None:
            out.write(res)
        else:
            core.psum_accumulate(out, res, accumulate)
    cyc = max(min(64, m_size), n_size)  # one pass over the moving tile, as a plain FP8 matmul
    flops = 2.0 * 2 * k * m_size * n_size
    s.flops += flops
    s.flops_peak_ns += flops / (2 * s.target.peak_flops_bf16) * 1e9  # FP8 double: 2x peak
    s.matmul_count += 1
    s.sbuf_read += st.size * st.st.dt.itemsize + mv.size * mv.st.dt.itemsize
    s.psum_write += out.size * 4
    s.sched.issue(TENSOR, cyc * s.ns_tensor, [(st.st.dep, st.box), (mv.st.dep, mv.box)],
                  [(out.st.dep, out.box)], s.costs.matmul_init_cycles * s.ns_tensor)
    s.last_st = out.st
    s.last_eng = TENSOR
    return None if dst is not None else out


def _masked_matmul(dst, st, mv, p):
    """nc_matmul(mask=...): the mask is a predicate over the output [M, N] (stationary free x
    moving free; a [1, N] predicate on the moving free axis broadcasts over M). It restricts
    the instruction to the rectangle it selects: stationary[:, r0:r1] x moving[:, c0:c1] into
    output [r0:r1, c0:c1]; the rest of the output is not written (nor accumulated by
    `psum += nc_matmul(...)`)."""
    for t in (st, mv):
        if not isinstance(t, Tensor) or len(t.shape) != 2:
            raise compile_error("nisa.nc_matmul: mask= needs 2-D stationary and moving tiles")
    m_rows, n_cols = st.shape[1], mv.shape[1]
    box = M.mask_box("nisa.nc_matmul", p["mask"], (m_rows, n_cols))
    if box is None:
        return matmul_core(dst, st, mv, p.get("accumulate"), "nisa.nc_matmul")
    (r0, r1), (c0, c1) = box
    out = dst
    if out is None:
        out = Tensor.root(core.Storage((m_rows, n_cols), D.FLOAT32, psum, name=core._MM,
                                       charge=False))
    elif tuple(out.shape) != (m_rows, n_cols):
        raise compile_error("nisa.nc_matmul: output tile shape %s does not match [%d, %d]"
                            % (list(out.shape), m_rows, n_cols))
    if r1 > r0 and c1 > c0:
        matmul_core(out[r0:r1, c0:c1], st[:, r0:r1], mv[:, c0:c1], p.get("accumulate"),
                    "nisa.nc_matmul")
    if dst is not None:
        return None
    return M.masked_result(out, M.as_2d(p["mask"], (m_rows, n_cols)))


def _psum_to_sbuf(t):
    if not isinstance(t, Tensor) or t.st.kind != "psum":
        return t
    staged = core.tmp(t.shape, t.st.dt, sbuf)
    copy_op(staged, t)
    return staged


def _matmul_transpose(p):
    """nc_matmul(is_transpose=True): the PE array passes `stationary` through transposed (the
    moving operand must be the [P, P] identity); the result keeps the stationary's values."""
    st, mv, dst = p["stationary"], p["moving"], p.get("dst")
    for t in (st, mv):
        if not isinstance(t, Tensor):
            raise compile_error("nisa.nc_matmul: stationary and moving must be tiles")
        check_onchip(t, "nisa.nc_matmul")
    if len(st.shape) != 2:
        raise compile_error("nisa.nc_matmul(is_transpose=True) expects a 2-D stationary tile, "
                            "got shape %s" % (list(st.shape),))
    k = st.shape[0]
    if tuple(mv.shape) != (k, k):
        raise compile_error("nisa.nc_matmul(is_transpose=True): moving must be the [%d, %d] "
                            "identity matrix, got shape %s" % (k, k, list(mv.shape)))
    if p.get("accumulate"):
        raise compile_error("nisa.nc_matmul(is_transpose=True) cannot accumulate")
    out = transpose_core(st, dst=dst)
    return None if dst is not None else out


def nc_transpose(*args, **kw):
    """Transpose partition and free axes (TensorE into PSUM, or VectorE for <=32x32)."""
    new = _is_new(args, kw, 1)
    p = _bind("nc_transpose", args, kw, ["data", "engine", "mask", "dtype", "name"], new)
    eng = _engine(p.get("engine"), TENSOR)
    data = p["data"]
    check_onchip(data, "nisa.nc_transpose")
    engine = VECTOR if eng == VECTOR else None
    r = M.masked_transpose(data, p.get("mask"), p.get("dst"), engine, "nisa.nc_transpose")
    return None if p.get("dst") is not None else r


# ---- ScalarE ------------------------------------------------------------------------------
def _activation(fname, args, kw, force_reduce=False):
    new = _is_new(args, kw, 0)
    p = _bind(fname, args, kw, ["op", "data", "bias", "scale", "reduce_op", "reduce_res",
                                "reduce_cmd", "mask", "dtype", "name", "acc_flags"], new)
    _reject(fname, p, "acc_flags")
    cmd = p.get("reduce_cmd")
    if cmd is not None and not (type(cmd) is int and cmd == reduce_cmd.reset_reduce):
        # reset_reduce is what a reduction into reduce_res does by itself; the accumulating
        # forms (reduce, load_reduce) and the register-only ones are not modelled
        raise compile_error("nisa.%s: reduce_cmd=%r is not modelled by nkisim (only "
                            "reduce_cmd.reset_reduce)" % (fname, cmd))
    op = O.op_name(p["op"])
    data = p["data"]
    if op not in O.UNARY:
        raise compile_error("nisa.%s: unsupported activation function %r" % (fname, p["op"]))
    if not isinstance(data, Tensor):
        raise compile_error("nisa.%s: data must be a tile" % fname)
    check_onchip(data, "nisa." + fname)
    bias = p.get("bias")
    scale = p.get("scale", 1.0)
    if scale is None:
        scale = 1.0
    if bias is not None and not isinstance(bias, (Tensor, int, float, np.floating, np.ndarray)):
        raise compile_error("err_activation_bias_invalid_type: bias must be a tile or scalar")
    if not isinstance(scale, (Tensor, int, float, np.floating, np.ndarray)):
        raise compile_error("err_activation_scale_invalid_type: scale must be a tile or scalar")
    dt_def = data.st.dt if data.st.dt.is_float else D.FLOAT32
    dst, _ = _out(p, data.shape, dt_def)
    _check_same_shape(fname, dst, data.shape)
    reduce_op = O.op_name(p.get("reduce_op"))
    rres = p.get("reduce_res")
    if force_reduce and reduce_op is None:
        reduce_op = "add"
    ins = [data] + [t for t in (bias, scale) if isinstance(t, Tensor)]
    f = O.UNARY[op]
    mask = p.get("mask")

    nd = len(data.shape)

    def run():
        v = _f32(data.read())
        sv = _opnd(scale, nd)
        if not (isinstance(sv, (int, float)) and sv == 1.0):
            v = v * sv
        if bias is not None:
            v = v + _opnd(bias, nd)
        return f(v)
    n = free_size(data)
    cost = scalar_cost(n)
    if rres is not None or force_reduce:
        cost += runtime.CUR.costs.scalar_min_ii_cycles * runtime.CUR.ns_scalar
    compute(SCALAR, cost, ins, [dst], run, "nisa." + fname, mask=mask)
    if rres is not None:
        if reduce_op not in O.REDUCE:
            raise compile_error("nisa.%s: unsupported reduce_op %r" % (fname, p.get("reduce_op")))
        s = runtime.CUR
        if s.numerics:
            axes = tuple(range(1, len(dst.shape)))
            r = O.REDUCE[reduce_op](_skip_masked(reduce_op, _f32(dst.read()), mask),
                                    axis=axes, keepdims=True)
            rres.write(r.reshape(rres.shape) if r.size == rres.size else r)
        s.sched.issue_zero(SCALAR, [(dst.st.dep, dst.box)], [(rres.st.dep, rres.box)])
    return None if p.get("dst") is not None else dst


_REDUCE_IDENTITY = {"add": 0.0, "sum": 0.0, "subtract": 0.0, "maximum": -np.inf,
                    "max": -np.inf, "minimum": np.inf, "min": np.inf, "multiply": 1.0,
                    "prod": 1.0}


def _skip_masked(op, v, mask):
    """Values to reduce with the elements a mask excludes replaced by op's identity (the
    instruction does not compute them, so they do not enter its reduction)."""
    if mask is None or (type(mask) in (bool, np.bool_) and mask):
        return v
    if op not in _REDUCE_IDENTITY:
        raise compile_error("a masked reduction with op %r is not modelled by nkisim" % (op,))
    try:
        m = np.broadcast_to(np.asarray(mask, dtype=bool), v.shape)
    except ValueError:
        raise compile_error("mask of shape %s does not match the tile %s"
                            % (list(np.shape(mask)), list(v.shape)))
    return np.where(m, v, np.float32(_REDUCE_IDENTITY[op]))


def activation(*args, **kw):
    """op(data * scale + bias) on ScalarE, optionally reducing along the free axis."""
    return _activation("activation", args, kw)


def activation_reduce(*args, **kw):
    """activation plus a free-axis reduction into reduce_res."""
    return _activation("activation_reduce", args, kw, force_reduce=True)


# ---- VectorE / GpSimdE --------------------------------------------------------------------
def tensor_tensor(*args, **kw):
    """Element-wise data1 op data2 (VectorE by default, or GpSimd)."""
    new = _is_new(args, kw, 2)
    p = _bind("tensor_tensor", args, kw, ["data1", "data2", "op", "engine", "mask", "dtype",
                                          "name"], new)
    a, b = p["data1"], p["data2"]
    op = O.op_name(p["op"])
    if op not in O.BINARY:
        raise compile_error("nisa.tensor_tensor: unsupported op %r" % (p["op"],))
    for t in (a, b):
        if not isinstance(t, Tensor):
            raise compile_error("nisa.tensor_tensor: data1 and data2 must be tiles")
        check_onchip(t, "nisa.tensor_tensor")
    if a.shape[0] != b.shape[0]:
        raise compile_error("nisa.tensor_tensor: partition sizes differ (%d vs %d)"
                            % (a.shape[0], b.shape[0]))
    if a.shape[0] > C.PMAX:
        raise compile_error("tensor_tensor data1 partition dimension %d exceeds maximum %d"
                            % (a.shape[0], C.PMAX))
    shape, nd = core.tile_shape((a.shape, b.shape), "nisa.tensor_tensor")
    dt_def = D.promote(a.st.dt, b.st.dt)
    if op in O.BITWISE and not dt_def.is_int:
        raise compile_error("nisa.tensor_tensor: invalid dtype %s for bitwise op %s"
                            % (dt_def.name, op))
    dst, _ = _out(p, shape, dt_def)
    _check_same_shape("tensor_tensor", dst, shape)
    eng = _engine(p.get("engine"), VECTOR)
    n = free_size(dst)
    if eng == GPSIMD:
        cost = gpsimd_cost(n, dst.st.dt.itemsize, streams=3)
    elif eng == SCALAR:
        cost = scalar_cost(2 * n)
    else:
        cost = core.tensor_tensor_cost(op, a, b, dst)
    f = O.BINARY[op]
    bitwise = op in O.BITWISE
    compute(eng, cost, [a, b], [dst],
            (lambda: f(value_of(a, nd), value_of(b, nd)) if bitwise
             else f(_f32(value_of(a, nd)), _f32(value_of(b, nd)))),
            "nisa.tensor_tensor", mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def _apply(op, v, operand, reverse):
    f = O.BINARY[op]
    return f(operand, v) if reverse else f(v, operand)


def tensor_scalar(*args, **kw):
    """(data op0 operand0) op1 operand1 with scalar or per-partition [P,1] operands."""
    new = _is_new(args, kw, 1)
    p = _bind("tensor_scalar", args, kw, ["data", "op0", "operand0", "reverse0", "op1",
                                          "operand1", "reverse1", "engine", "mask", "dtype",
                                          "name"], new)
    data = p["data"]
    if not isinstance(data, Tensor):
        raise compile_error("nisa.tensor_scalar: data must be a tile")
    check_onchip(data, "nisa.tensor_scalar")
    op0 = O.op_name(p["op0"])
    op1 = O.op_name(p.get("op1"))
    for o in (op0, op1):
        if o is not None and o not in O.BINARY:
            raise compile_error("nisa.tensor_scalar: unsupported op %r" % (o,))
    opnds = [p.get("operand0"), p.get("operand1")]
    ins = [data]
    for o in opnds:
        if isinstance(o, Tensor):
            check_onchip(o, "nisa.tensor_scalar")
            if free_size(o) != 1:
                raise compile_error("nisa.tensor_scalar: tensor operands must have shape [P, 1] "
                                    "(got %s)" % (list(o.shape),))
            ins.append(o)
    dst, _ = _out(p, data.shape, data.st.dt)
    _check_same_shape("tensor_scalar", dst, data.shape)
    chosen = p.get("engine") is not None and _engine(p.get("engine"), None) is not None
    eng = _engine(p.get("engine"), VECTOR)
    n = free_size(dst)
    if eng == SCALAR:
        cost = scalar_cost(n)
    elif eng == GPSIMD:
        cost = gpsimd_cost(n, dst.st.dt.itemsize, streams=2)
    else:
        cost = vector_cost(n, None, perf_factor("tensor_scalar", [data], [dst]))
        if not chosen and dst.st.dt.is_float:
            eng, cost = core.place_scalar_form("nisa.tensor_scalar", (op0, op1), n, cost)
    r0 = bool(p.get("reverse0", False))
    r1 = bool(p.get("reverse1", False))

    nd = len(data.shape)

    def run():
        v = _f32(data.read()) if data.st.dt.is_float else data.read()
        v = _apply(op0, v, _opnd(opnds[0], nd), r0)
        if op1 is not None:
            v = _apply(op1, v, _opnd(opnds[1], nd), r1)
        return v
    compute(eng, cost, ins, [dst], run, "nisa.tensor_scalar", mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def scalar_tensor_tensor(*args, **kw):
    """(data op0 operand0) op1 operand1, operand0 scalar/[P,1], operand1 a tile (VectorE)."""
    new = _is_new(args, kw, 1)
    p = _bind("scalar_tensor_tensor", args, kw, ["data", "op0", "operand0", "op1", "operand1",
                                                 "reverse0", "reverse1", "engine", "mask",
                                                 "dtype", "name"], new)
    data = p["data"]
    op0 = O.op_name(p["op0"])
    op1 = O.op_name(p["op1"])
    o0, o1 = p["operand0"], p["operand1"]
    ins = [data] + [t for t in (o0, o1) if isinstance(t, Tensor)]
    for t in ins:
        check_onchip(t, "nisa.scalar_tensor_tensor")
    dst, _ = _out(p, data.shape, data.st.dt)
    n = free_size(dst)
    r0 = bool(p.get("reverse0", False))
    r1 = bool(p.get("reverse1", False))

    nd = len(data.shape)

    def run():
        v = _apply(op0, _f32(data.read()), _opnd(o0, nd), r0)
        return _apply(op1, v, _opnd(o1, nd), r1)
    eng = _engine(p.get("engine"), VECTOR)
    if eng == GPSIMD:
        cost = gpsimd_cost(n, dst.st.dt.itemsize, streams=1 + len(ins))
    elif eng == VECTOR:
        cost = vector_cost(n, 2.0)
    else:
        raise compile_error("nisa.scalar_tensor_tensor runs on VectorE or GpSimdE (engine=%r)"
                            % (p.get("engine"),))
    compute(eng, cost, ins, [dst], run, "nisa.scalar_tensor_tensor", mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def tensor_reduce(*args, **kw):
    """Reduce along free axes (VectorE)."""
    new = _is_new(args, kw, 0)
    p = _bind("tensor_reduce", args, kw, ["op", "data", "axis", "negate", "keepdims", "mask",
                                          "dtype", "name"], new)
    from . import language as L
    op = O.op_name(p["op"])
    if op not in O.REDUCE:
        raise compile_error("nisa.tensor_reduce: unsupported op %r" % (p["op"],))
    data = p["data"]
    dst = p.get("dst")
    out = L.reduce(op, data, p.get("axis"), dtype=p.get("dtype"),
                   keepdims=bool(p.get("keepdims", False)) or (dst is not None and
                                                               len(dst.shape) == len(data.shape)),
                   mask=p.get("mask"), negate=bool(p.get("negate", False)), out=dst)
    return None if dst is not None else out


def tensor_partition_reduce(*args, **kw):
    """Reduce across partitions (GpSimd); result has one partition."""
    new = _is_new(args, kw, 0)
    p = _bind("tensor_partition_reduce", args, kw, ["op", "data", "mask", "dtype", "name"], new)
    op = O.op_name(p["op"])
    data = p["data"]
    check_onchip(data, "nisa.tensor_partition_reduce")
    shape = (1,) + tuple(data.shape[1:])
    dst, _ = _out(p, shape, data.st.dt)
    f = O.REDUCE[op]
    compute(GPSIMD, gpsimd_cost(free_size(data) * 4, data.st.dt.itemsize), [data], [dst],
            lambda: f(_f32(data.read()), axis=0, keepdims=True), "nisa.tensor_partition_reduce",
            mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def tensor_copy(*args, **kw):
    """Copy (and convert) a tile; also PSUM -> SBUF eviction."""
    new = _is_new(args, kw, 1)
    p = _bind("tensor_copy", args, kw, ["src", "engine", "mask", "dtype", "name"], new)
    src = p["src"]
    if not isinstance(src, Tensor):
        raise compile_error("nisa.tensor_copy: src must be a tile")
    check_onchip(src, "nisa.tensor_copy")
    dst, _ = _out(p, src.shape, src.st.dt)
    if dst.size != src.size:
        raise compile_error("nisa.tensor_copy: dst shape %s does not match src shape %s"
                            % (list(dst.shape), list(src.shape)))
    copy_op(dst, src, engine=_engine(p.get("engine"), VECTOR), mask=p.get("mask"),
            opname="nisa.tensor_copy")
    return None if p.get("dst") is not None else dst


def memset(*args, **kw):
    """Fill a tile with a constant."""
    new = _is_new(args, kw, 0)
    p = _bind("memset", args, kw, ["shape", "value", "dtype", "mask", "engine", "name"]
              if not new else ["value", "engine", "mask", "name", "dtype"], new)
    dst = p.get("dst")
    if dst is None:
        dst = alloc(tuple(p["shape"]), dt_of(p["dtype"]), sbuf)
    memset_tile(dst, p["value"], engine=_engine(p.get("engine"), VECTOR), mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def iota(*args, **kw):
    """Tile of index values from an index expression (GpSimd)."""
    new = "dst" in kw or (args and isinstance(args[0], Tensor))
    p = _bind("iota", args, kw, ["expr", "dtype", "mask", "name"], new)
    expr = p["expr"]
    vals = np.asarray(expr.values() if hasattr(expr, "values") else expr)
    shape = vals.shape if vals.ndim >= 2 else (vals.size, 1)
    dst, _ = _out(p, shape, D.INT32)
    compute(GPSIMD, gpsimd_cost(free_size(dst)), [], [dst],
            lambda: vals.reshape(dst.shape) if vals.size == dst.size else vals,
            "nisa.iota", mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def reciprocal(*args, **kw):
    """1/x on VectorE (8x slower than ScalarE)."""
    new = _is_new(args, kw, 1)
    p = _bind("reciprocal", args, kw, ["data", "mask", "dtype", "name", "engine"], new)
    data = p["data"]
    check_onchip(data, "nisa.reciprocal")
    dst, _ = _out(p, data.shape, data.st.dt)
    eng = _engine(p.get("engine"), VECTOR)
    n = free_size(data)
    if eng == SCALAR:
        cost = scalar_cost(n)
    elif eng == GPSIMD:
        cost = gpsimd_cost(n, dst.st.dt.itemsize, streams=2)
    elif eng == VECTOR:
        cost = vector_cost(n, runtime.CUR.costs.vector_reciprocal_factor)
    else:
        raise compile_error("nisa.reciprocal cannot run on TensorE")
    compute(eng, cost, [data], [dst], lambda: O.reciprocal(_f32(data.read())),
            "nisa.reciprocal", mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def tensor_tensor_scan(*args, **kw):
    """Scan along the last free axis: r[i] = (r[i-1] op0 data0[i]) op1 data1[i], r[-1] = initial."""
    new = _is_new(args, kw, 2)
    p = _bind("tensor_tensor_scan", args, kw, ["data0", "data1", "initial", "op0", "op1",
                                               "reverse0", "reverse1", "mask", "dtype",
                                               "name"], new)
    d0, d1 = p["data0"], p["data1"]
    op0, op1 = O.op_name(p["op0"]), O.op_name(p["op1"])
    init = p["initial"]
    ins = [d0, d1] + ([init] if isinstance(init, Tensor) else [])
    for t in ins:
        check_onchip(t, "nisa.tensor_tensor_scan")
    dst, _ = _out(p, d0.shape, D.promote(d0.st.dt, d1.st.dt))
    r0 = bool(p.get("reverse0", False))
    r1 = bool(p.get("reverse1", False))

    def run():
        a = _f32(d0.read())
        b = _f32(d1.read())
        cur = _opnd(init)
        if isinstance(cur, np.ndarray):
            cur = cur.reshape(a.shape[0], -1)[:, :1].reshape((a.shape[0],) + (1,) * 0)
        out = np.empty(a.shape, dtype=np.float32)
        for i in range(a.shape[-1]):
            cur = _apply(op0, cur, a[..., i], r0)
            cur = _apply(op1, cur, b[..., i], r1)
            out[..., i] = cur
        return out
    compute(VECTOR, vector_cost(free_size(d0), 2.0), ins, [dst], run, "nisa.tensor_tensor_scan",
            mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def bn_stats(*args, **kw):
    """Per-partition statistics of a tile (free size <= 512) for bn_aggr: [P, 6]
    (count, mean, sum of squared deviations, 0, 0, 0); masked-off elements are skipped."""
    new = _is_new(args, kw, 1)
    p = _bind("bn_stats", args, kw, ["data", "mask", "dtype", "name"], new)
    data = p["data"]
    check_onchip(data, "nisa.bn_stats")
    n = free_size(data)
    if n > C.BN_STATS_FMAX:
        raise compile_error("nisa.bn_stats: free size %d exceeds bn_stats_fmax %d"
                            % (n, C.BN_STATS_FMAX))
    dst, _ = _out(p, (data.shape[0], 6), D.FLOAT32)
    mask = p.get("mask")

    def run():
        v = _f32(data.read()).reshape(data.shape[0], -1).astype(np.float64)
        sel = np.ones(v.shape, dtype=bool)
        if mask is not None:
            sel &= np.broadcast_to(np.asarray(mask), data.shape).reshape(v.shape)
        if data.valid is not None:
            sel &= data.valid.reshape(v.shape)
        cnt = sel.sum(axis=1)
        safe = np.maximum(cnt, 1)
        mean = np.where(sel, v, 0.0).sum(axis=1) / safe
        m2 = np.where(sel, (v - mean[:, None]) ** 2, 0.0).sum(axis=1)
        out = np.zeros((data.shape[0], 6), dtype=np.float32)
        out[:, 0] = cnt
        out[:, 1] = mean
        out[:, 2] = m2
        return out
    compute(VECTOR, vector_cost(n), [data], [dst], run, "nisa.bn_stats", in_mask=mask)
    return None if p.get("dst") is not None else dst


def bn_aggr(*args, **kw):
    """Combine bn_stats groups ([P, 6k]) into [P, 2] = (mean, variance)."""
    new = _is_new(args, kw, 1)
    p = _bind("bn_aggr", args, kw, ["data", "mask", "dtype", "name"], new)
    _reject("bn_aggr", p, "mask")
    data = p["data"]
    check_onchip(data, "nisa.bn_aggr")
    dst, _ = _out(p, (data.shape[0], 2), D.FLOAT32)

    def run():
        v = data.read().reshape(data.shape[0], -1, 6).astype(np.float64)
        cnt = v[:, :, 0]
        mean = v[:, :, 1]
        m2 = v[:, :, 2]
        tot = np.maximum(cnt.sum(axis=1), 1)
        gm = (cnt * mean).sum(axis=1) / tot
        gm2 = (m2 + cnt * (mean - gm[:, None]) ** 2).sum(axis=1)
        out = np.stack([gm, gm2 / tot], axis=1).astype(np.float32)
        return out.reshape(dst.shape)
    compute(VECTOR, vector_cost(free_size(data), runtime.CUR.costs.bn_aggr_factor), [data], [dst], run,
            "nisa.bn_aggr")
    return None if p.get("dst") is not None else dst


def affine_select(*args, **kw):
    """Element-wise select by a predicate on index expressions (GpSimd)."""
    new = "dst" in kw
    p = _bind("affine_select", args, kw, ["pred", "on_true_tile", "on_false_value", "mask",
                                          "dtype", "name"], new)
    pred = np.asarray(p["pred"])
    t = p["on_true_tile"]
    fv = p["on_false_value"]
    check_onchip(t, "nisa.affine_select")
    if t.st.kind == "psum":
        # GpSimd cannot read PSUM: the compiler stages the tile through SBUF (VectorE copy)
        staged = core.tmp(t.shape, t.st.dt, sbuf)
        copy_op(staged, t)
        t = staged
    dst, _ = _out(p, t.shape, t.st.dt)
    compute(GPSIMD, gpsimd_cost(free_size(t), t.st.dt.itemsize), [t], [dst],
            lambda: np.where(np.broadcast_to(pred, t.shape), _f32(t.read()), fv),
            "nisa.affine_select", mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def tensor_scalar_reduce(*args, **kw):
    """tensor_scalar followed by a free-axis reduction into reduce_res (VectorE)."""
    new = _is_new(args, kw, 1)
    p = _bind("tensor_scalar_reduce", args, kw, ["data", "op0", "operand0", "reduce_op",
                                                 "reduce_res", "reverse0", "mask", "dtype",
                                                 "name"], new)
    _reject("tensor_scalar_reduce", p, "mask")
    data = p["data"]
    dst = p.get("dst")
    # the reduce runs on VectorE: the element-wise part stays there too
    kw2 = dict(data=data, op0=p["op0"], operand0=p["operand0"],
               reverse0=p.get("reverse0", False), dtype=p.get("dtype"), engine=engine.vector)
    if dst is not None:
        kw2["dst"] = dst
        tensor_scalar(**kw2)
        out = dst
    else:
        out = tensor_scalar(**kw2)
    rres = p["reduce_res"]
    rop = O.op_name(p["reduce_op"])
    s = runtime.CUR
    if s.numerics:
        r = O.REDUCE[rop](_f32(out.read()), axis=tuple(range(1, len(out.shape))), keepdims=True)
        rres.write(r.reshape(rres.shape))
    s.sched.issue(VECTOR, s.costs.vector_min_ii_cycles * s.ns_vector, [(out.st.dep, out.box)],
                  [(rres.st.dep, rres.box)])
    return None if dst is not None else out


def max8(*args, **kw):
    """Top-8 values per partition, descending (VectorE)."""
    new = _is_new(args, kw, 1)
    p = _bind("max8", args, kw, ["src", "mask", "dtype", "name"], new)
    _reject("max8", p, "mask")
    src = p["src"]
    check_onchip(src, "nisa.max8")
    dst, _ = _out(p, (src.shape[0], 8), src.st.dt)
    compute(VECTOR, vector_cost(free_size(src)), [src], [dst],
            lambda: -np.sort(-_f32(src.read()).reshape(src.shape[0], -1), axis=1)[:, :8],
            "nisa.max8")
    return None if p.get("dst") is not None else dst


def nc_find_index8(*args, **kw):
    """Indices of the 8 given values in each partition (VectorE)."""
    new = _is_new(args, kw, 1)
    p = _bind("nc_find_index8", args, kw, ["data", "vals", "mask", "dtype", "name"], new)
    _reject("nc_find_index8", p, "mask")
    data, vals = p["data"], p["vals"]
    dst, _ = _out(p, (data.shape[0], 8), D.UINT32)

    def run():
        d = _f32(data.read()).reshape(data.shape[0], -1)
        v = _f32(vals.read()).reshape(data.shape[0], -1)[:, :8]
        out = np.zeros((d.shape[0], 8), dtype=np.int64)
        for j in range(8):
            out[:, j] = np.argmax(d == v[:, j:j + 1], axis=1)
        return out
    compute(VECTOR, vector_cost(free_size(data)), [data, vals], [dst], run, "nisa.nc_find_index8")
    return None if p.get("dst") is not None else dst


def dropout(*args, **kw):
    """Dropout with a deterministic mask."""
    new = _is_new(args, kw, 1)
    p = _bind("dropout", args, kw, ["data", "prob", "mask", "dtype", "name"], new)
    _reject("dropout", p, "mask")
    data = p["data"]
    dst, _ = _out(p, data.shape, data.st.dt)
    prob = p["prob"]

    def run():
        r = float(prob) if not isinstance(prob, Tensor) else float(np.ravel(prob.read())[0])
        keep = np.random.default_rng(0).random(data.shape) >= r
        return np.where(keep, _f32(data.read()), 0)
    compute(VECTOR, vector_cost(free_size(data)), [data], [dst], run, "nisa.dropout")
    return None if p.get("dst") is not None else dst


# ---- DMA ----------------------------------------------------------------------------------
def dma_copy(*args, **kw):
    """DMA between HBM and SBUF (or within either); converts dtype through fp32."""
    p = _bind("dma_copy", args, kw, ["dst", "src", "mask", "dst_rmw_op", "oob_mode",
                                     "dge_mode", "engine", "priority", "name"], False)
    _reject("dma_copy", p, "engine", "priority")
    if p.get("oob_mode") not in (None, oob_mode.error):
        raise compile_error("nisa.dma_copy: oob_mode=%r is not modelled by nkisim (only "
                            "oob_mode.error)" % (p.get("oob_mode"),))
    dst, src = p["dst"], p["src"]
    if isinstance(src, Tensor) and src.st.kind == "psum":
        _hw.reject("nisa.dma_copy reading PSUM", "nisa.tensor_copy from PSUM to SBUF first")
    dge = p.get("dge_mode")
    if dge is not None and dge == dge_mode.hwdge and isinstance(src, Tensor) \
            and isinstance(dst, Tensor) and src.st.dt is not dst.st.dt:
        raise compile_error("nisa.dma_copy: hardware DGE (dge_mode.hwdge) cannot convert "
                            "dtypes (%s -> %s)" % (src.st.dt.name, dst.st.dt.name))
    if p.get("dst_rmw_op") is not None:
        op = O.op_name(p["dst_rmw_op"])
        s = runtime.CUR
        if s.numerics:
            old = _f32(dst.read()).copy()
            _dma(dst, src, p.get("mask"), opname="nisa.dma_copy")
            dst.write(O.BINARY[op](old, _f32(dst.read())))
            return None
    _dma(dst, src, p.get("mask"), opname="nisa.dma_copy")
    return None


def dma_transpose(*args, **kw):
    """Transposing DMA of a 2-D tile (HBM->SBUF or SBUF->SBUF)."""
    new = "dst" in kw or (len(args) >= 2 and isinstance(args[1], Tensor))
    p = _bind("dma_transpose", args, kw, ["src", "axes", "mask", "dtype", "dge_mode", "name"],
              new)
    src = p["src"]
    if len(src.shape) != 2:
        raise compile_error("nisa.dma_transpose: only 2-D tiles are supported by nkisim")
    if p.get("axes") is not None and tuple(p["axes"]) != (1, 0):
        raise compile_error("nisa.dma_transpose: axes=%r is not supported by nkisim (2-D "
                            "transpose only, axes=(1, 0))" % (p["axes"],))
    shape = (src.shape[1], src.shape[0])
    dst, _ = _out(p, shape, src.st.dt)
    _dma(dst, src, p.get("mask"), transpose=True, opname="nisa.dma_transpose")
    return None if p.get("dst") is not None else dst


def dma_compute(dst, srcs, reduce_op, scales=None, **kw):
    """dst = reduce_op over srcs (each optionally scaled), as DMA transfers."""
    op = O.op_name(reduce_op)
    s = runtime.CUR
    vals = None
    for i, src in enumerate(srcs):
        _dma(dst, src, opname="nisa.dma_compute")
        if s.numerics:
            v = _f32(src.read()).reshape(dst.shape)
            if scales is not None:
                v = v * scales[i]
            vals = v if vals is None else O.BINARY[op](vals, v)
    if s.numerics:
        dst.write(vals)
    return None


# ---- misc ---------------------------------------------------------------------------------
# trn3-only instructions: argument lists held in names (prompts/generated/facts.json, read by
# export_facts.py from literal `_bind` lists, describes the trn1/trn2 instruction set)
_NC_MATMUL_MX_ARGS = ["stationary", "moving", "stationary_scale", "moving_scale",
                      "tile_position", "tile_size", "accumulate", "name"]
_QUANTIZE_MX_ARGS = ["src", "dst_scale", "name"]


def nc_matmul_mx(*args, **kw):
    """MX matmul on TensorE (NeuronCore-v4 / trn3 only): dst[M, N] (+)= dequantized
    stationary[K x4, M].T @ dequantized moving[K x4, N]; see nkisim.mx."""
    p = _bind("nc_matmul_mx", args, kw, _NC_MATMUL_MX_ARGS, True)
    return _mx.nc_matmul_mx(p.get("dst"), p.get("stationary"), p.get("moving"),
                            p.get("stationary_scale"), p.get("moving_scale"),
                            p.get("accumulate"), p.get("tile_position"), p.get("tile_size"))


def quantize_mx(*args, **kw):
    """QuantizeMX on VectorE (NeuronCore-v4 / trn3 only): bf16/fp16 src [P, 4F] -> fp8 x4
    dst [P, F] and e8m0 dst_scale; see nkisim.mx."""
    p = _bind("quantize_mx", args, kw, _QUANTIZE_MX_ARGS, True)
    return _mx.quantize_mx(p.get("dst"), p.get("src"), p.get("dst_scale"))


_CORE_BARRIER_ARGS = ["data", "cores", "engine", "name"]


@_table.unmodelled
def core_barrier(*args, **kw):
    """Barrier between the two NeuronCores of an HBM stack (cores=(0, 1) only; trn2/trn3)
    for shared-HBM `data` both write. Not simulated (nkisim runs one NeuronCore): a call is
    a compile error.

    Never a silent no-op: the simulator runs the programs of a grid one after another, so
    it cannot honour a barrier between them. (The private path's barrier of a single
    program is a no-op: private.py.)"""
    p = _bind("core_barrier", args, kw, _CORE_BARRIER_ARGS, False)
    sim = runtime.CUR
    if sim is not None and sim.target.name == "trn1":
        raise compile_error("nisa.core_barrier is available only on NeuronCore-v3 or newer "
                            "(trn2, trn3), not on trn1")
    missing = [n for n in ("data", "cores") if p.get(n) is None]
    if missing:
        raise compile_error("nisa.core_barrier needs %s" % " and ".join(missing))
    data, cores = p["data"], p["cores"]
    if not isinstance(data, Tensor) or data.st.kind != "hbm":
        raise compile_error("nisa.core_barrier: data must be a tensor in shared HBM")
    try:
        cores = tuple(int(c) for c in cores)
    except (TypeError, ValueError):
        raise compile_error("nisa.core_barrier: cores must be a tuple of core ids, got %r"
                            % (cores,)) from None
    if cores != (0, 1):
        raise compile_error("nisa.core_barrier supports only cores=(0, 1), got %r" % (cores,))
    raise compile_error("nisa.core_barrier between NeuronCores is not simulated by nkisim (it "
                        "simulates one NeuronCore; the programs of a grid run one after "
                        "another)")


@_table.unmodelled
def register_alloc(*args, **kw):
    raise compile_error("nisa.register_alloc (device registers) is not supported by nkisim")


# old-API engine constants (`engine=nisa.vector_engine`)
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


from . import hwrules as _hw  # noqa: E402  (namespace rules)
_table.install_unmodelled(globals(), "nki.isa")  # every documented name exists (table.json)
