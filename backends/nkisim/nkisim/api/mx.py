"""MX (OCP microscaling) numerics and instructions of NeuronCore-v4 (trn3).

Facts (sources named in constants.py, trn3 block):
* Data packs four contraction-axis elements into one x4 item along the free axis: an MX tile
  [K, F] of x4 items holds a [4K, F] operand; element q of item (k, f) is contracted with
  element q of the other operand's item (k, n). Which original contraction index each
  element is (the tutorial interleaves rows q*K + k) is the kernel's choice ([T3], [MXG]).
* A scaling group is 8 partitions x 1 x4 item (32 elements); its scale is one e8m0 byte
  (2**(byte - 127); 0xFF is NaN). Group g = partitions 8g..8g+7 has its scale in row
  32*(g // 4) + g % 4 of the scale tile, with the same free index as the data item
  ([T3] scale layout, [MXG] "Scale Tensor", [QMX]).
* quantize_mx: bf16/fp16 SBUF source [P, 4F] (P a multiple of 32, <= 128) -> fp8 x4 data
  [P, F] and scales; only the fp8 x4 outputs (no fp4) ([QMX], [MXG]).
* nc_matmul_mx: dequantize both operands with their scales, multiply, accumulate in fp32,
  write (or add to) an fp32 or bf16 PSUM tile; 4x the bf16 matmul throughput ([T3], [MMX]).

Scale rule of quantize_mx: the OCP MX conversion, shared exponent = floor(log2(max |x|)) -
emax(element type) (emax 15 for e5m2, 8 for e4m3fn), elements x / 2**exponent rounded to
nearest even and saturated to the element type's largest finite value. (A later [QMX]
revision states the hardware uses a scale twice as large to leave rounding headroom; that
variant is `QUANTIZE_SCALE_EXTRA_EXP = 1` here, not the default.)
"""
import numpy as np

from ..machine import constants as C
from ..machine import core
from ..data import dtypes as D
from ..machine import runtime
from ..data.buffers import Tensor
from ..errors import compile_error
from ..data.reinterpret import _fp8_decode, _fp8_encode, reinterpret
from ..machine.timing import TENSOR, VECTOR

QUANTIZE_SCALE_EXTRA_EXP = 0

# element format of each x4 dtype: (fp8 name or 'fp4', bits per element, emax)
_ELEM = {"float8_e5m2_x4": ("float8_e5m2", 8, 15), "float8_e4m3fn_x4": ("float8_e4m3fn", 8, 8),
         "float4_e2m1fn_x4": ("fp4", 4, 2)}
# e2m1 code (0..7) -> magnitude
_FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)
_SCALE_DTYPES = ("uint8", "float8_e8m0fnu")


# ---- element codecs -----------------------------------------------------------------------
def _fp4_decode(codes):
    codes = np.asarray(codes, dtype=np.uint8)
    v = _FP4_VALUES[codes & 7]
    return np.where(codes & 8, -v, v).astype(np.float32)


def _fp4_encode(v):
    """float32 -> e2m1 codes: round to nearest even, saturate at 6 (e2m1 has no inf/NaN)."""
    v = np.asarray(v, dtype=np.float32)
    a = np.minimum(np.abs(np.nan_to_num(v, nan=0.0)), 6.0)
    # steps: 0.5 below 2, 1 in [2, 4), 2 in [4, 6]; rint rounds halves to even units
    q = np.where(a < 2.0, np.rint(a * 2.0) / 2.0,
                 np.where(a < 4.0, np.rint(a), np.rint(a / 2.0) * 2.0))
    q = np.minimum(q, 6.0)
    code = np.searchsorted(_FP4_VALUES, q).astype(np.uint8)
    return code | (np.signbit(v).astype(np.uint8) << 3)


def unpack_x4(bits, x4_name):
    """x4 item bit patterns [..., F] -> element values [..., F, 4] (float32)."""
    elem, nbits, _ = _ELEM[x4_name]
    b = np.asarray(bits).astype(np.uint32)
    codes = np.stack([(b >> np.uint32(nbits * i)) & np.uint32((1 << nbits) - 1)
                      for i in range(4)], axis=-1).astype(np.uint8)
    if elem == "fp4":
        return _fp4_decode(codes)
    return _fp8_decode(codes, elem)


def pack_x4(values, x4_name):
    """Element values [..., F, 4] -> x4 item bit patterns [..., F] (rounded, saturated)."""
    elem, nbits, _ = _ELEM[x4_name]
    v = np.asarray(values, dtype=np.float32)
    codes = _fp4_encode(v) if elem == "fp4" else _fp8_encode(v, elem)
    out = np.zeros(v.shape[:-1], dtype=np.uint32)
    for i in range(4):
        out |= codes[..., i].astype(np.uint32) << np.uint32(nbits * i)
    return out.astype(np.uint16 if nbits == 4 else np.uint32)


def scale_values(scale_bytes):
    """e8m0 bytes -> float32 factors 2**(byte - 127); 0xFF is NaN."""
    e = np.asarray(scale_bytes).astype(np.int64)
    return np.where(e == 255, np.nan, np.ldexp(1.0, e - 127)).astype(np.float32)


def scale_row(group):
    """Scale-tile row of scaling group `group` (partitions 8g..8g+7)."""
    per_q = C.SBUF_QUADRANT_PARTITIONS // C.MX_GROUP_PARTITIONS
    return C.SBUF_QUADRANT_PARTITIONS * (group // per_q) + group % per_q


def scale_rows(p):
    """Scale-tile rows used by data with p partitions, in group order."""
    return [scale_row(g) for g in range(p // C.MX_GROUP_PARTITIONS)]


def quantize_values(src, x4_name):
    """OCP MX quantization of src [P, 4F] (P a multiple of 8): (x4 bits [P, F], scale
    bytes [P // 8, F]) with the scales in group order (not the SBUF quadrant layout)."""
    _, _, emax = _ELEM[x4_name]
    x = np.asarray(src, dtype=np.float32)
    p, f4 = x.shape
    g = x.reshape(p // 8, 8, f4 // 4, 4)
    amax = np.abs(g).max(axis=(1, 3))                          # [P/8, F]
    nan = np.isnan(g).any(axis=(1, 3))
    _, ex = np.frexp(np.where(amax > 0, amax, 1.0))             # amax = m * 2**ex, m in [.5, 1)
    shared = np.where(amax > 0, ex - 1 - emax + QUANTIZE_SCALE_EXTRA_EXP, -127)
    biased = np.clip(shared + 127, 0, 254)
    biased = np.where(nan, 255, biased).astype(np.uint8)
    factor = np.ldexp(1.0, biased.astype(np.int64) - 127)[:, None, :, None]
    q = (g / factor).reshape(p, f4 // 4, 4)
    return pack_x4(q, x4_name), biased


def dequantize_values(bits, scale_groups, x4_name):
    """x4 bits [K, F] and group-ordered scale bytes [K // 8, F] -> values [K, F, 4]."""
    v = unpack_x4(bits, x4_name)
    k = v.shape[0]
    s = scale_values(scale_groups)
    return v * np.repeat(s, C.MX_GROUP_PARTITIONS, axis=0)[:k, :, None]


# ---- instructions -------------------------------------------------------------------------
def _require_trn3(opname):
    s = runtime.CUR
    if not getattr(s.target, "mx", False):
        raise compile_error("nisa.%s is a NeuronCore-v4 (trn3) instruction (MX microscaling); "
                            "target %s does not have it (simulate with target='trn3')"
                            % (opname, s.target.name))
    return s


def _tile(opname, name, t, kinds=("sbuf",)):
    if not isinstance(t, Tensor):
        raise compile_error("nisa.%s: %s must be a tile" % (opname, name))
    if len(t.shape) != 2:
        raise compile_error("nisa.%s: %s must be a 2-D [partition, free] tile (got %s)"
                            % (opname, name, list(t.shape)))
    if t.st.kind not in kinds:
        raise compile_error("err_unsupported_memory: nisa.%s %s must be in %s (it is in %s)"
                            % (opname, name, "/".join(k.upper() for k in kinds),
                               t.st.kind.upper()))
    return t


def _scale_tile(opname, name, t, p, f):
    _tile(opname, name, t)
    if t.st.dt.name not in _SCALE_DTYPES:
        raise compile_error("nisa.%s: %s must be uint8 or float8_e8m0fnu (got %s)"
                            % (opname, name, t.st.dt.name))
    need = scale_rows(p)[-1] + 1
    if t.shape[0] < need or t.shape[1] != f:
        raise compile_error(
            "nisa.%s: %s must have at least %d partitions (the scales of %d data partitions: "
            "4 rows per 32-partition quadrant, at rows 32q..32q+3) and %d free elements "
            "(one per x4 item); got %s" % (opname, name, need, p, f, list(t.shape)))
    return [t[32 * q: 32 * q + min(4, p // 8 - 4 * q), :] for q in range(-(-p // 32))]


def _check_partitions(opname, name, p):
    if p % C.SBUF_QUADRANT_PARTITIONS or not 0 < p <= C.PMAX:
        raise compile_error("nisa.%s: %s partition size %d must be a multiple of 32 and at "
                            "most %d (MX scaling groups span 8 partitions, scales one "
                            "32-partition quadrant)" % (opname, name, p, C.PMAX))


def quantize_mx(dst, src, dst_scale):
    """VectorE QuantizeMX: src [P, 4F] bf16/fp16 -> dst [P, F] fp8 x4 + dst_scale (SBUF)."""
    opname = "quantize_mx"
    _require_trn3(opname)
    _tile(opname, "src", src)
    _tile(opname, "dst", dst)
    if src.st.dt.name not in ("bfloat16", "float16"):
        raise compile_error("nisa.quantize_mx: src must be bfloat16 or float16 (got %s)"
                            % src.st.dt.name)
    if dst.st.dt.name not in ("float8_e5m2_x4", "float8_e4m3fn_x4"):
        raise compile_error("nisa.quantize_mx: dst must be float8_e5m2_x4 or float8_e4m3fn_x4 "
                            "(got %s; QuantizeMX has no fp4 output)" % dst.st.dt.name)
    p, f4 = src.shape
    _check_partitions(opname, "src", p)
    if f4 % C.MX_GROUP_ELEMS:
        raise compile_error("nisa.quantize_mx: src free size %d must be a multiple of 4" % f4)
    if tuple(dst.shape) != (p, f4 // 4):
        raise compile_error("nisa.quantize_mx: dst must be [%d, %d] (src [%d, %d] packed four "
                            "elements per x4 item); got %s" % (p, f4 // 4, p, f4,
                                                                list(dst.shape)))
    quads = _scale_tile(opname, "dst_scale", dst_scale, p, f4 // 4)
    name = dst.st.dt.name

    def run():
        bits, scales = quantize_values(src.read(), name)
        for q, view in enumerate(quads):
            view.write(scales[4 * q: 4 * q + view.shape[0]])
        return bits

    # four input elements per partition per cycle ([T3]); the scales come out with the data
    cost = core.vector_cost(f4, None, C.QUANTIZE_MX_ELEMS_PER_CYCLE)
    core.compute(VECTOR, cost, [src], [dst] + quads, run, "nisa.quantize_mx")
    return None


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, accumulate=None,
                 tile_position=None, tile_size=None):
    """TensorE MX matmul: dst[M, N] (+)= sum over k, q of
    deq(stationary)[k, m, q] * deq(moving)[k, n, q], fp32 accumulation, PSUM fp32/bf16."""
    opname = "nc_matmul_mx"
    s = _require_trn3(opname)
    if tile_size is not None and tuple(tile_size) != () and (
            len(tile_size) != 2 or int(tile_size[1]) != 128 or
            int(tile_size[0]) not in (32, 64, 128)):
        raise compile_error("nisa.nc_matmul_mx: tile_size %r: only row tiling is supported "
                            "(row_size 32, 64 or 128; column_size 128)" % (tile_size,))
    st = _tile(opname, "stationary", stationary)
    mv = _tile(opname, "moving", moving)
    for nm, t in (("stationary", st), ("moving", mv)):
        if t.st.dt not in D.MX_X4:
            raise compile_error("nisa.nc_matmul_mx: %s must be an MX x4 dtype "
                                "(float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4); got %s"
                                % (nm, t.st.dt.name))
    k, m_size = st.shape
    n_size = mv.shape[1]
    if mv.shape[0] != k:
        raise compile_error("nisa.nc_matmul_mx: contraction (partition) sizes differ: "
                            "stationary %d vs moving %d" % (k, mv.shape[0]))
    _check_partitions(opname, "stationary/moving", k)
    if m_size > C.GEMM_STATIONARY_FMAX or n_size > C.GEMM_MOVING_FMAX:
        raise compile_error("nisa.nc_matmul_mx: tile [K=%d, M=%d, N=%d] x4 exceeds [%d, %d, %d]"
                            % (k, m_size, n_size, C.PMAX, C.GEMM_STATIONARY_FMAX,
                               C.GEMM_MOVING_FMAX))
    sq = _scale_tile(opname, "stationary_scale", stationary_scale, k, m_size)
    mq = _scale_tile(opname, "moving_scale", moving_scale, k, n_size)
    out = _tile(opname, "dst", dst, ("psum",))
    if out.st.dt.name not in ("float32", "bfloat16"):
        raise compile_error("nisa.nc_matmul_mx: dst must be float32 or bfloat16 (got %s)"
                            % out.st.dt.name)
    if tuple(out.shape) != (m_size, n_size):
        raise compile_error("nisa.nc_matmul_mx: dst must be [%d, %d] (got %s)"
                            % (m_size, n_size, list(out.shape)))
    if s.numerics:
        a = dequantize_values(st.read(), np.concatenate([v.read() for v in sq]), st.st.dt.name)
        b = dequantize_values(mv.read(), np.concatenate([v.read() for v in mq]), mv.st.dt.name)
        res = np.einsum("kmq,knq->mn", a.astype(np.float64), b.astype(np.float64))
        core.psum_accumulate(out, res.astype(np.float32), accumulate)
    # one pass over the moving tile like a bf16 matmul: the four x4 element pairs per PE are
    # the 4x throughput ([T3]); no init charge when TensorE streams back-to-back (core.py)
    cyc = max(min(64, m_size), n_size)
    flops = 2.0 * C.MX_GROUP_ELEMS * k * m_size * n_size
    s.flops += flops
    s.flops_peak_ns += flops / s.target.peak_flops_mx * 1e9
    s.matmul_count += 1
    ins = [st, mv] + sq + mq
    s.sbuf_read += sum(t.size * t.st.dt.itemsize for t in ins)
    s.psum_write += out.size * 4
    s.sched.issue(TENSOR, cyc * s.ns_tensor, [(t.st.dep, t.box) for t in ins],
                  [(out.st.dep, out.box)], s.costs.matmul_init_cycles * s.ns_tensor)
    s.last_st = out.st
    s.last_eng = TENSOR
    return None


# ---- access patterns with a dtype --------------------------------------------------------
def _ap_with_dtype(orig):
    def ap(self, pattern=None, offset=0, dtype=None, **kw):
        """`t.ap(pattern, offset, dtype=d)`: the pattern over t's bytes seen as dtype d
        (counts and strides in d's items), e.g. uint8 HBM data seen as float8_e5m2_x4."""
        if dtype is not None and D.lookup(dtype) is not self.st.dt:
            return orig(reinterpret(self, dtype), pattern, offset, **kw)
        return orig(self, pattern, offset, **kw)
    ap.nkisim_mx = True
    ap.__doc__ = orig.__doc__
    return ap


def install():
    if not getattr(Tensor.ap, "nkisim_mx", False):
        Tensor.ap = _ap_with_dtype(Tensor.ap)

