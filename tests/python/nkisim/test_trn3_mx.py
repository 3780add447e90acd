"""trn3 (NeuronCore-v4) MX: nisa.quantize_mx and nisa.nc_matmul_mx against a numpy MX
reference written here (value tables, not the simulator's codecs), layout errors, and the
error on targets without MX."""
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl


# ---- numpy MX reference -------------------------------------------------------------------
def _fp8_table(ebits, mbits, fn):
    """Values of all 256 codes of an fp8 format (NaN/inf codes as NaN)."""
    bias = (1 << (ebits - 1)) - 1
    vals = []
    for code in range(256):
        e = (code >> mbits) & ((1 << ebits) - 1)
        m = code & ((1 << mbits) - 1)
        if e == 0:
            v = m / (1 << mbits) * 2.0 ** (1 - bias)
        else:
            v = (1 + m / (1 << mbits)) * 2.0 ** (e - bias)
        special = ((code & 0x7F) == 0x7F) if fn else (e == (1 << ebits) - 1)
        v = np.nan if special else v
        vals.append(-v if code & 0x80 else v)
    return np.array(vals)


FP4 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6])
FORMATS = {  # x4 dtype name -> (code values, bits per element, emax)
    "float8_e5m2_x4": (_fp8_table(5, 2, False), 8, 15),
    "float8_e4m3fn_x4": (_fp8_table(4, 3, True), 8, 8),
    "float4_e2m1fn_x4": (FP4, 4, 2),
}


def ref_round(x, name):
    """Nearest representable value (ties to the even code), saturating at the largest."""
    table = FORMATS[name][0]
    half = len(table) // 2
    finite = np.where(np.isfinite(table[:half]))[0]  # non-negative codes, ascending values
    pos = table[finite]
    a = np.minimum(np.abs(x), pos[-1])
    i = np.clip(np.searchsorted(pos, a), 1, len(pos) - 1)
    lo, hi = pos[i - 1], pos[i]
    tie_to_lo = finite[i - 1] % 2 == 0
    v = np.where(a - lo < hi - a, lo, np.where(a - lo > hi - a, hi, np.where(tie_to_lo, lo, hi)))
    return np.where(x < 0, -v, v)


def ref_quantize(x, name):
    """OCP MX of x [P, 4F] (groups: 8 partitions x 4 adjacent elements): (element values
    [P, 4F], scale exponents [P // 8, F] unbiased)."""
    emax = FORMATS[name][2]
    p, f4 = x.shape
    g = x.reshape(p // 8, 8, f4 // 4, 4)
    amax = np.abs(g).max(axis=(1, 3))
    exp = np.floor(np.log2(np.where(amax > 0, amax, 1.0))).astype(int) - emax
    exp = np.where(amax > 0, exp, -127)
    scale = 2.0 ** exp[:, None, :, None]
    return ref_round(g / scale, name).reshape(p, f4), exp


def ref_matmul(st_vals, st_exp, mv_vals, mv_exp):
    """sum_k,q deq(st)[k, m, q] deq(mv)[k, n, q] for [K, 4M] / [K, 4N] element values."""
    def deq(v, e):
        k, f4 = v.shape
        return (v * np.repeat(np.repeat(2.0 ** e, 8, axis=0), 4, axis=1)).reshape(k, f4 // 4, 4)
    return np.einsum("kmq,knq->mn", deq(st_vals, st_exp), deq(mv_vals, mv_exp))


def pack(vals, name):
    """Element values [P, 4F] -> little-endian bytes of x4 items (host-side packing)."""
    table, nbits, _ = FORMATS[name]
    half = len(table) // 2                      # codes 0..half-1 are the non-negative ones
    finite = np.where(np.isfinite(table[:half]))[0]
    idx = np.searchsorted(table[finite], np.abs(vals))
    assert (table[finite][idx] == np.abs(vals)).all(), "not representable"
    codes = finite[idx].astype(np.uint32) | (np.signbit(vals).astype(np.uint32) * half)
    p, f4 = vals.shape
    c = codes.reshape(p, f4 // 4, 4)
    items = sum(c[..., i] << (nbits * i) for i in range(4))
    dt = np.dtype("<u2") if nbits == 4 else np.dtype("<u4")
    return items.astype(dt).view(np.uint8).reshape(p, -1)


def bf16(x):
    b = x.astype(np.float32).view(np.uint32)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.view(np.float32)


def rand(*shape, seed=0, spread=3.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 2.0 ** rng.integers(-spread, spread + 1, shape)
            ).astype(np.float32)


# ---- kernels ------------------------------------------------------------------------------
@nki.jit
def quantize_matmul_kernel(st_in, mv_in, mx_dtype):
    """Quantize stationary [K, 4M] and moving [K, 4N] bf16 on chip, MX-matmul them into an
    fp32 PSUM tile; also returns the moving x4 data and scales."""
    k, m4 = st_in.shape
    n4 = mv_in.shape[1]
    st = nl.ndarray((k, m4), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=st, src=st_in)
    mv = nl.ndarray((k, n4), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv, src=mv_in)
    st_q = nl.ndarray((k, m4 // 4), dtype=mx_dtype, buffer=nl.sbuf)
    st_s = nl.ndarray((k, m4 // 4), dtype=nl.uint8, buffer=nl.sbuf)
    mv_q = nl.ndarray((k, n4 // 4), dtype=mx_dtype, buffer=nl.sbuf)
    mv_s = nl.ndarray((k, n4 // 4), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
    nisa.memset(dst=mv_s, value=0)
    nisa.quantize_mx(dst=st_q, src=st, dst_scale=st_s)
    nisa.quantize_mx(mv_q, mv, mv_s)
    ps = nl.ndarray((m4 // 4, n4 // 4), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=ps, stationary=st_q, moving=mv_q, stationary_scale=st_s,
                      moving_scale=mv_s)
    res = nl.ndarray(ps.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    out = nl.ndarray(ps.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    q_out = nl.ndarray(mv_q.shape, dtype=mx_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=q_out, src=mv_q)
    s_out = nl.ndarray(mv_s.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=s_out, src=mv_s.view(nl.uint8))
    return out, q_out, s_out


@nki.jit
def offline_kernel(st_bytes, st_scale, mv_bytes, mv_scale, mx_dtype, acc_twice):
    """Host-packed x4 bytes (viewed through .ap(dtype=)) and contiguous scales [K // 8, F]
    spread into the quadrant layout; bf16 PSUM result, accumulated twice when asked."""
    k = st_scale.shape[0] * 8
    m, n = st_scale.shape[1], mv_scale.shape[1]
    st_hbm = st_bytes.ap(dtype=mx_dtype, pattern=[[m, k], [1, m]], offset=0)
    mv_hbm = mv_bytes.ap(dtype=mx_dtype, pattern=[[n, k], [1, n]], offset=0)
    st = nl.ndarray((k, m), dtype=mx_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=st, src=st_hbm)
    mv = nl.ndarray((k, n), dtype=mx_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv, src=mv_hbm)
    st_s = nl.ndarray((k, m), dtype=nl.uint8, buffer=nl.sbuf)
    mv_s = nl.ndarray((k, n), dtype=nl.uint8, buffer=nl.sbuf)
    for q in range(k // 32):
        nisa.dma_copy(dst=st_s[32 * q:32 * q + 4, :], src=st_scale[4 * q:4 * q + 4, :])
        nisa.dma_copy(dst=mv_s[32 * q:32 * q + 4, :], src=mv_scale[4 * q:4 * q + 4, :])
    ps = nl.ndarray((m, n), dtype=nl.bfloat16, buffer=nl.psum)
    for _ in range(2 if acc_twice else 1):
        nisa.nc_matmul_mx(ps, st, mv, st_s, mv_s)
    res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def bad_quantize_kernel(x, p, dst_dtype, src_dtype, scale_rows):
    src = nl.ndarray((p, 64), dtype=src_dtype, buffer=nl.sbuf)
    nisa.memset(dst=src, value=1.0)
    dst = nl.ndarray((p, 16), dtype=dst_dtype, buffer=nl.sbuf)
    sc = nl.ndarray((scale_rows, 16), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(dst=dst, src=src, dst_scale=sc)
    return x


@nki.jit
def bad_matmul_kernel(x, k, m, n, scale_rows, mv_dtype, psum_dtype):
    st = nl.ndarray((k, m), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    mv = nl.ndarray((k, n), dtype=mv_dtype, buffer=nl.sbuf)
    st_s = nl.ndarray((scale_rows, m), dtype=nl.uint8, buffer=nl.sbuf)
    mv_s = nl.ndarray((scale_rows, n), dtype=nl.uint8, buffer=nl.sbuf)
    for t in (st, mv, st_s, mv_s):
        nisa.memset(dst=t, value=0)
    ps = nl.ndarray((m, n), dtype=psum_dtype, buffer=nl.psum)
    nisa.nc_matmul_mx(ps, st, mv, st_s, mv_s)
    return x


@nki.jit
def bf16_matmul_kernel(a, b):
    ta = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    tb = nl.ndarray(b.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=tb, src=b)
    ps = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
    for _ in range(8):
        nisa.nc_matmul(ps, ta, tb)
    return a


@nki.jit
def mx_matmul_repeat_kernel(a, b):
    ta = nl.ndarray((128, 128), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    tb = nl.ndarray((128, 512), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    sa = nl.ndarray((128, 128), dtype=nl.uint8, buffer=nl.sbuf)
    sb = nl.ndarray((128, 512), dtype=nl.uint8, buffer=nl.sbuf)
    for t in (ta, tb, sa, sb):
        nisa.memset(dst=t, value=0)
    ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for _ in range(8):
        nisa.nc_matmul_mx(ps, ta, tb, sa, sb)
    return a


def run(kernel, target="trn3", dtypes=None, **inputs):
    return nkisim.simulate(kernel, inputs, target=target, input_dtypes=dtypes or {})


class QuantizeMatmulTest(unittest.TestCase):
    def check_on_device(self, name, k, m, n, seed):
        st, mv = bf16(rand(k, 4 * m, seed=seed)), bf16(rand(k, 4 * n, seed=seed + 1))
        st[:8, :4] = 0.0                            # an all-zero scaling group
        res = run(quantize_matmul_kernel, st_in=st, mv_in=mv,
                  mx_dtype=getattr(nl, name), dtypes={"st_in": "bfloat16", "mv_in": "bfloat16"})
        out, q_bits, scales = res.outputs
        st_v, st_e = ref_quantize(st, name)
        mv_v, mv_e = ref_quantize(mv, name)
        # moving data: the x4 bytes of the reference element values
        np.testing.assert_array_equal(q_bits.view(np.uint8).reshape(k, -1), pack(mv_v, name))
        # moving scales: group g in row 32 * (g // 4) + g % 4, biased by 127
        rows = [32 * (g // 4) + g % 4 for g in range(k // 8)]
        np.testing.assert_array_equal(scales[rows].astype(int), mv_e + 127)
        others = np.setdiff1d(np.arange(k), rows)
        self.assertTrue((scales[others] == 0).all())
        np.testing.assert_allclose(out, ref_matmul(st_v, st_e, mv_v, mv_e), rtol=1e-5,
                                   atol=1e-30)

    def test_quantize_and_matmul_e4m3(self):
        self.check_on_device("float8_e4m3fn_x4", 128, 128, 512, seed=1)

    def test_quantize_and_matmul_e5m2_one_quadrant(self):
        self.check_on_device("float8_e5m2_x4", 32, 16, 64, seed=3)

    def test_offline_fp4_and_fp8_with_bf16_psum_accumulation(self):
        for name in ("float4_e2m1fn_x4", "float8_e5m2_x4"):
            k, m, n = 64, 32, 128
            st_v, st_e = ref_quantize(rand(k, 4 * m, seed=5), name)
            mv_v, mv_e = ref_quantize(rand(k, 4 * n, seed=6), name)
            for twice in (False, True):
                res = run(offline_kernel, st_bytes=pack(st_v, name),
                          st_scale=(st_e + 127).astype(np.uint8), mv_bytes=pack(mv_v, name),
                          mv_scale=(mv_e + 127).astype(np.uint8), mx_dtype=getattr(nl, name),
                          acc_twice=twice)
                want = ref_matmul(st_v, st_e, mv_v, mv_e)
                if twice:
                    want = bf16(bf16(want) + want)   # PSUM bf16: fp32 add, then rounded
                np.testing.assert_allclose(res.outputs[0], bf16(want), rtol=1e-6)


class LayoutErrorTest(unittest.TestCase):
    def assert_error(self, kernel, text, **kw):
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            run(kernel, x=np.zeros((1, 1), np.float32), **kw)
        self.assertIn(text, cm.exception.message)

    def test_quantize_layout(self):
        ok = dict(p=128, dst_dtype=nl.float8_e4m3fn_x4, src_dtype=nl.bfloat16, scale_rows=128)
        run(bad_quantize_kernel, x=np.zeros((1, 1), np.float32), **ok)
        self.assert_error(bad_quantize_kernel, "multiple of 32", **dict(ok, p=48, scale_rows=48))
        self.assert_error(bad_quantize_kernel, "no fp4 output",
                          **dict(ok, dst_dtype=nl.float4_e2m1fn_x4))
        self.assert_error(bad_quantize_kernel, "bfloat16 or float16",
                          **dict(ok, src_dtype=nl.float32))
        # 128 partitions need scale rows up to 99 (quadrant 3, rows 96..99)
        self.assert_error(bad_quantize_kernel, "at least 100 partitions",
                          **dict(ok, scale_rows=16))

    def test_matmul_layout(self):
        ok = dict(k=128, m=128, n=512, scale_rows=128, mv_dtype=nl.float8_e5m2_x4,
                  psum_dtype=nl.float32)
        run(bad_matmul_kernel, x=np.zeros((1, 1), np.float32), **ok)
        self.assert_error(bad_matmul_kernel, "exceeds", **dict(ok, n=1024))
        self.assert_error(bad_matmul_kernel, "multiple of 32", **dict(ok, k=40))
        self.assert_error(bad_matmul_kernel, "at least 100 partitions",
                          **dict(ok, scale_rows=16))
        self.assert_error(bad_matmul_kernel, "MX x4 dtype", **dict(ok, mv_dtype=nl.bfloat16))
        self.assert_error(bad_matmul_kernel, "float32 or bfloat16",
                          **dict(ok, psum_dtype=nl.int32))


class TargetTest(unittest.TestCase):
    def test_mx_needs_trn3(self):
        x = bf16(rand(32, 64))
        for target in ("trn1", "trn2"):
            with self.assertRaises(nkisim.NkiCompileError) as cm:
                run(quantize_matmul_kernel, target=target, st_in=x, mv_in=x,
                    mx_dtype=nl.float8_e4m3fn_x4)
            self.assertIn("trn3", cm.exception.message)

    def test_trn3_figures(self):
        from nkisim.machine import constants as C
        t = C.get_target("trn3")
        self.assertIs(C.get_target("gen4"), t)
        self.assertEqual(t.sbuf_bytes_per_partition, (256 - 16) * 1024)
        self.assertAlmostEqual(t.hbm_bytes_per_ns, 4700.0 / 8)
        self.assertAlmostEqual(t.peak_flops_mx / 1e12, 314.6, places=1)
        self.assertAlmostEqual(t.peak_flops_mx, C.MX_MATMUL_SPEEDUP * t.peak_flops_bf16)

    def test_mx_matmul_takes_a_bf16_pass_for_four_times_the_work(self):
        a, b = rand(128, 128), rand(128, 512)
        plain = run(bf16_matmul_kernel, a=a, b=b, dtypes={"a": "bfloat16", "b": "bfloat16"})
        mx = run(mx_matmul_repeat_kernel, a=a, b=b)
        t_plain = plain.metrics["tensor_engine_active_time"]
        t_mx = mx.metrics["tensor_engine_active_time"]
        self.assertAlmostEqual(t_mx / t_plain, 1.0, places=6)
        self.assertEqual(mx.metrics["matmul_instruction_count"], 8)


if __name__ == "__main__":
    unittest.main()
