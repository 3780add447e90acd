"""`nki.isa` on TensorE: nc_matmul (plain, masked, transpose and FP8 double-row forms),
nc_transpose, and the trn3 MX instructions (implemented in nkisim.mx).
"""

from ..machine import constants as C
from ..machine import core
from . import masks as M
from ..data import dtypes as D
from ..data import ops as O
from ..machine import runtime
from ..data.buffers import Tensor, psum, sbuf
from ..machine.core import (check_onchip, free_size, matmul_core, transpose_core, copy_op)
from ..errors import compile_error
from ..machine.timing import TENSOR, VECTOR
from . import mx as _mx
from .isa_base import (engine, matmul_perf_mode, _bind, _reject, _is_new, _f32, _engine)


# ---- TensorE ------------------------------------------------------------------------------
def nc_matmul(*args, **kw):
    """dst = stationary.T @ moving (TensorE, PSUM fp32). Accumulates when `accumulate` is True,
    or (None) when the destination was already written."""
    new = _is_new(args, kw, 2)
    p = _bind("nc_matmul", args, kw, ["stationary", "moving", "is_stationary_onezero",
                                      "is_moving_onezero", "is_transpose", "accumulate",
                                      "tile_position", "tile_size", "perf_mode", "mask",
                                      "name", "dtype", "psum_accumulate_flag"], new)
    _reject("nc_matmul", p, "psum_accumulate_flag")
    dst = p.get("dst")
    tiled = _pe_tiling(p)
    if _is_double_row(p.get("perf_mode")):
        if tiled:
            raise compile_error("nisa.nc_matmul: perf_mode double_row cannot be combined with "
                                "PE tiling (tile_position / tile_size)")
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


def _pe_tiling(p):
    """Check `tile_position=(start_row, start_column)` and `tile_size=(row_size,
    column_size)` (PE-array tiling: row and column tiles of 128 or 64, or 32 on trn2 and later;
    starts multiples of the size inside the 128 x 128 array; the contraction K fits the row
    size and the stationary free size the column size). True when tiling is on. The result
    is the untiled one; the time is charged as a full-array matmul (tiles running side by side
    are not modelled)."""
    pos, size = p.get("tile_position"), p.get("tile_size")
    pos = () if pos is None else pos
    size = () if size is None else size
    if not pos and not size:
        return False
    try:
        pos, size = tuple(int(v) for v in pos), tuple(int(v) for v in size)
    except (TypeError, ValueError):
        raise compile_error("nisa.nc_matmul: tile_position and tile_size must be pairs of "
                            "integers, got %r and %r" % (p.get("tile_position"),
                                                          p.get("tile_size"))) from None
    if len(pos) != 2 or len(size) != 2:
        raise compile_error("nisa.nc_matmul: tile_position and tile_size must both be set, "
                            "as (row, column) pairs (got %r and %r)" % (pos, size))
    sizes = (64, 128) if runtime.CUR.target.name == "trn1" else (32, 64, 128)
    for what, start, n in (("row", pos[0], size[0]), ("column", pos[1], size[1])):
        if n not in sizes:
            raise compile_error("nisa.nc_matmul: the %s tile size must be one of %s on %s, "
                                "got %d" % (what, sizes, runtime.CUR.target.name, n))
        if start % n or not 0 <= start <= C.PMAX - n:
            raise compile_error("nisa.nc_matmul: the starting %s %d must be a multiple of the "
                                "%s tile size %d inside the 128 x 128 PE array"
                                % (what, start, what, n))
    st = p.get("stationary")
    if isinstance(st, Tensor):
        if st.shape[0] > size[0]:
            raise compile_error("nisa.nc_matmul: contraction size %d exceeds the row tile "
                                "size %d" % (st.shape[0], size[0]))
        if free_size(st) > size[1]:
            raise compile_error("nisa.nc_matmul: stationary free size %d exceeds the column "
                                "tile size %d" % (free_size(st), size[1]))
    return True


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


from . import hwrules as _hw  # noqa: E402  (namespace rules)
