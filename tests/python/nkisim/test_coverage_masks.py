"""More APIs public kernels use: ALU abs in tensor_scalar, tensor.view(dtype), masks on
nc_transpose / nc_matmul / nl.transpose / activation reductions, masked results assigned in
place, tile[predicate], indices past the end under a mask, FP8 double-row matmul, and the
trn3-only MX names."""
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl


def run(kernel, target="trn2", dtypes=None, **inputs):
    return nkisim.simulate(kernel, inputs, target=target, input_dtypes=dtypes or {}).outputs


def rand(*shape, seed=0, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


# ---- ALU abs ----------------------------------------------------------------------------
@nki.jit
def reciprocal_alu_kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nisa.tensor_scalar(data=nl.load(x), op0=nl.reciprocal, operand0=0.0))
    return out


@nki.jit
def abs_kernel(x):
    out = nl.ndarray((128, 65), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.ndarray((128, 65), dtype=nl.float32, buffer=nl.sbuf)
    r[:, 0:64] = nisa.tensor_scalar(data=t, op0=nl.abs, operand0=0.0, op1=nl.multiply,
                                    operand1=2.0)
    nisa.tensor_scalar_reduce(data=t, op0=nl.abs, operand0=0.0, reduce_op=nl.max,
                              reduce_res=r[:, 64:65])
    nl.store(out, r)
    return out


# ---- view(dtype) ------------------------------------------------------------------------
@nki.jit
def view_kernel(x):
    """fp32 [128, 2] -> its bytes as fp8 [128, 8]; and as int32 (a live alias)."""
    out8 = nl.ndarray((128, 8), dtype=nl.float8_e4m3, buffer=nl.shared_hbm)
    outi = nl.ndarray((128, 2), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
    v8 = t.view(nl.float8_e4m3)            # taken before t is written: read at use
    t[...] = nl.load(x)
    nl.store(out8, v8)
    nl.store(outi, t.view(nl.int32)[:, 0:2])
    return out8, outi


@nki.jit
def view_write_kernel(x):
    out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
    v = t.view(nl.bfloat16)
    v[...] = nl.load(x.view(nl.bfloat16))
    nl.store(out, t)
    return out


@nki.jit
def view_partial_kernel(x):
    t = nl.load(x)
    t[:, 0:1].view(nl.int32)
    return x


# ---- masked nc_transpose / nl.transpose ---------------------------------------------------
@nki.jit
def masked_transpose_kernel(x, rows, cols):
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.full((64, 128), -5.0, dtype=nl.float32, buffer=nl.sbuf)
    i = nl.arange(128)[:, None]
    j = nl.arange(64)[None, :]
    p = nl.arange(64)[:, None]
    q = nl.arange(128)[None, :]
    r[p, q] = nisa.nc_transpose(t[i, j], mask=(i < rows) & (j < cols))
    nl.store(out, r)
    return out


@nki.jit
def triangle_transpose_kernel(x):
    t = nl.load(x)
    i = nl.arange(128)[:, None]
    j = nl.arange(64)[None, :]
    nisa.nc_transpose(t[i, j], mask=(i < j))
    return x


@nki.jit
def language_transpose_kernel(x):
    """nl.transpose with a mask on the input's free axis, and of a reduced [P] tile."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    out_row = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.full((128, 64), 7.0, dtype=nl.float32, buffer=nl.sbuf)
    i_f = nl.arange(128)[None, :]
    r[...] = nl.transpose(t[nl.arange(64)[:, None], i_f], mask=(i_f < 96))
    nl.store(out, r)
    s = nisa.tensor_reduce(np.add, data=t, axis=-1)          # [64]
    nl.store(out_row, nl.copy(nl.transpose(s)))
    return out, out_row


# ---- tile[predicate] and indices past the end under a mask --------------------------------
@nki.jit
def predicate_kernel(x, limit):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    j = nl.arange(64)[None, :]
    nl.store(out, nl.copy(t[j < limit]))
    return out


@nki.jit
def masked_load_kernel(x, h):
    """`dst[...] = nl.load(src, mask=m)`: dst keeps its values where m is false; an
    integer index past the end is legal where the mask excludes it."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    t[i_p, i_f] = nl.load(x[h, i_p, i_f], mask=(i_p < 64) & (h < 2))
    nl.store(out, t)
    return out


@nki.jit
def masked_load_after_full_loads_kernel(x):
    """Unmasked loads write all of their new tile, so it skips the fill pattern; a masked
    load's new tile must still show it where the mask is false, even when it reuses the
    storage of those earlier tiles."""
    out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for _ in nl.affine_range(4):
        t = nl.load(x)
        nl.store(out[0], t)
    i_p = nl.arange(128)[:, None]
    nl.store(out[1], nl.load(x, mask=(i_p < 64)))
    return out


@nki.jit
def masked_slice_assign_kernel(x):
    """A slice past the end of the destination, legal because the mask excludes it."""
    out = nl.ndarray((128, 96), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.zeros((128, 96), dtype=nl.float32, buffer=nl.sbuf)
    i_f = nl.arange(64)[None, :]
    r[:, 64:128] = nl.where(t > 0, t, -1.0, mask=(i_f + 64 < 96))
    nl.store(out, r)
    return out


# ---- masked nc_matmul and activation reduce ---------------------------------------------
@nki.jit
def masked_matmul_kernel(a, b, ncols):
    out = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ta = nl.load(a)
    tb = nl.load(b)
    ps = nl.zeros((64, 512), dtype=nl.float32, buffer=nl.psum)
    i_f = nl.arange(512)[None, :]
    ps[...] += nisa.nc_matmul(ta, tb, mask=(i_f < ncols))
    ps[...] += nisa.nc_matmul(ta, tb, mask=(i_f < ncols))
    nl.store(out, nl.copy(ps))
    return out


@nki.jit
def masked_activation_reduce_kernel(x):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    i_f = nl.arange(256)[None, :]
    big = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    big[:, 0:100] = nl.load(x)
    nisa.activation_reduce(np.exp, big[nl.arange(128)[:, None], i_f], reduce_op=np.add,
                           reduce_res=s, mask=(i_f < 100))
    nl.store(out, s)
    return out


# ---- smaller pieces ---------------------------------------------------------------------
@nki.jit
def psum_partition_broadcast_kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nisa.tensor_reduce(np.add, data=nl.load(x), axis=-1)      # [64]
    nl.store(out, nl.copy(nl.transpose(s).broadcast_to((128, 64))))
    return out


@nki.jit
def scalar_load_kernel(v, e):
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.load(v[e], dtype=nl.int32)
    nl.store(out, t)
    return out


@nki.jit
def load_mode_kernel(x, mode):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, lazy_initialization=True)
    t[...] = nl.load(x, mode=mode)
    nl.store(out, t, mode=mode)
    return out


# ---- FP8 double-row matmul ---------------------------------------------------------------
@nki.jit
def double_row_kernel(a, b):
    """a [K, 2, M], b [K, 2, N] -> [M, N] contracted over K and the pair axis."""
    out = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    ta = nl.load(a)
    tb = nl.load(b)
    ps = nl.zeros((64, 256), dtype=nl.float32, buffer=nl.psum)
    ps[...] += nisa.nc_matmul(ta, tb, perf_mode="double_row_gen3")
    nl.store(out, nl.copy(ps))
    return out


@nki.jit
def mx_alloc_kernel(x):
    nl.ndarray((128, 128), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
    return x


@nki.jit
def mx_matmul_kernel(x):
    t = nl.load(x)
    nisa.nc_matmul_mx(t, t)
    return x


class CoverageMaskTest(unittest.TestCase):
    def test_tensor_scalar_abs(self):
        x = rand(128, 64)
        (out,) = run(abs_kernel, x=x)
        np.testing.assert_allclose(out[:, 0:64], 2 * np.abs(x), rtol=1e-6)
        np.testing.assert_allclose(out[:, 64], np.abs(x).max(axis=1), rtol=1e-6)
        y = rand(128, 64, low=0.5, high=2.0)
        (out,) = run(reciprocal_alu_kernel, x=y)
        np.testing.assert_allclose(out, 1.0 / y, rtol=1e-6)

    def test_fp8_codes_round_trip(self):
        from nkisim.data import reinterpret
        codes = np.arange(256, dtype=np.uint8)
        for name in ("float8_e4m3", "float8_e5m2", "float8_e4m3fn"):
            vals = reinterpret._fp8_decode(codes, name)
            ok = ~np.isnan(vals)
            back = reinterpret._fp8_encode(vals[ok], name)
            np.testing.assert_array_equal(back, codes[ok], err_msg=name)
        self.assertEqual(float(reinterpret._fp8_decode(np.uint8(0x77), "float8_e4m3")), 240.0)
        self.assertEqual(float(reinterpret._fp8_decode(np.uint8(0x7E), "float8_e4m3fn")),
                         448.0)

    def test_view_reinterprets_bytes(self):
        from nkisim.data import reinterpret
        # bytes that are finite fp8 values (fp8 infinities and NaN payloads are not kept:
        # storage holds values, see reinterpret.py)
        rng = np.random.default_rng(5)
        raw = rng.integers(0, 0x78, (128, 8)).astype(np.uint8)
        raw |= rng.integers(0, 2, (128, 8)).astype(np.uint8) << 7
        x = raw.view(np.float32)
        out8, outi = run(view_kernel, x=x)
        raw = x.view(np.uint8)
        np.testing.assert_array_equal(reinterpret._fp8_encode(out8, "float8_e4m3"), raw)
        np.testing.assert_array_equal(outi, x.view(np.int32))

    def test_view_write_and_partial_view_are_errors(self):
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            run(view_write_kernel, x=rand(128, 2))
        self.assertIn("writing through a view(dtype)", cm.exception.message)
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            run(view_partial_kernel, x=rand(128, 4))
        self.assertIn("whole tensor", cm.exception.message)

    def test_masked_nc_transpose_writes_the_rectangle(self):
        x = rand(128, 64)
        (out,) = run(masked_transpose_kernel, x=x, rows=100, cols=40)
        want = np.full((64, 128), -5.0, np.float32)
        want[:40, :100] = x[:100, :40].T
        np.testing.assert_array_equal(out, want)
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            run(triangle_transpose_kernel, x=x)
        self.assertIn("rectangle", cm.exception.message)

    def test_language_transpose_mask_and_reduced_tile(self):
        x = rand(64, 128)
        out, row = run(language_transpose_kernel, x=x)
        np.testing.assert_array_equal(out[:96], x[:, :96].T)
        np.testing.assert_array_equal(out[96:], np.full((32, 64), 7.0, np.float32))
        np.testing.assert_allclose(row[0], x.sum(axis=1), rtol=1e-5)

    def test_tile_predicate(self):
        x = rand(128, 64)
        (out,) = run(predicate_kernel, x=x, limit=64)
        np.testing.assert_array_equal(out, x)
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            run(predicate_kernel, x=x, limit=10)
        self.assertIn("predicate", cm.exception.message)

    def test_masked_load_assignment_keeps_the_destination(self):
        x = rand(2, 128, 64)
        (out,) = run(masked_load_kernel, x=x, h=1)
        want = np.zeros((128, 64), np.float32)
        want[:64] = x[1, :64]
        np.testing.assert_array_equal(out, want)
        (out,) = run(masked_load_kernel, x=x, h=2)           # index 2 of 2: all masked
        np.testing.assert_array_equal(out, np.zeros((128, 64), np.float32))

    def test_a_masked_load_leaves_the_fill_pattern_where_the_mask_is_false(self):
        x = rand(128, 64)
        (out,) = run(masked_load_after_full_loads_kernel, x=x)
        np.testing.assert_array_equal(out[0], x)
        np.testing.assert_array_equal(out[1, :64], x[:64])
        self.assertTrue(np.isnan(out[1, 64:]).all())

    def test_masked_assignment_past_the_end(self):
        x = rand(128, 64)
        (out,) = run(masked_slice_assign_kernel, x=x)
        np.testing.assert_array_equal(out[:, 64:], np.where(x > 0, x, -1.0)[:, :32])
        np.testing.assert_array_equal(out[:, :64], np.zeros((128, 64), np.float32))

    def test_masked_matmul_accumulates_only_its_columns(self):
        a, b = rand(128, 64), rand(128, 512, seed=1)
        (out,) = run(masked_matmul_kernel, a=a, b=b, ncols=200)
        want = np.zeros((64, 512), np.float32)
        want[:, :200] = 2 * (a.T @ b)[:, :200]
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
        (out,) = run(masked_matmul_kernel, a=a, b=b, ncols=0)
        np.testing.assert_array_equal(out, np.zeros((64, 512), np.float32))

    def test_masked_activation_reduce_skips_masked_elements(self):
        x = rand(128, 100)
        (out,) = run(masked_activation_reduce_kernel, x=x)
        np.testing.assert_allclose(out[:, 0], np.exp(x).sum(axis=1), rtol=1e-5)

    def test_partition_broadcast_of_a_psum_tile(self):
        x = rand(64, 32)
        (out,) = run(psum_partition_broadcast_kernel, x=x)
        np.testing.assert_allclose(out, np.broadcast_to(x.sum(axis=1), (128, 64)), rtol=1e-5)

    def test_one_element_load_is_a_1x1_tile(self):
        v = np.array([3, 9, 4], dtype=np.int32)
        (out,) = run(scalar_load_kernel, v=v, e=1)
        np.testing.assert_array_equal(out, [[9]])

    def test_oob_mode_error_only(self):
        x = rand(128, 64)
        (out,) = run(load_mode_kernel, x=x, mode=nisa.oob_mode.error)
        np.testing.assert_array_equal(out, x)
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            run(load_mode_kernel, x=x, mode=nisa.oob_mode.skip)
        self.assertIn("mode", cm.exception.message)
        nkisim.activate()  # (other suites deactivate the simulator)
        from nki.isa.constants import oob_mode
        from neuronxcc.nki.isa.constants import oob_mode as legacy_oob_mode
        import nki.typing as nt
        self.assertIs(oob_mode, legacy_oob_mode)
        self.assertIsNotNone(nt.tensor[nt.mutable])

    def test_double_row_matmul(self):
        rng = np.random.default_rng(3)
        a = rng.integers(-8, 8, (128, 2, 64)).astype(np.float32) / 4
        b = rng.integers(-8, 8, (128, 2, 256)).astype(np.float32) / 4
        dt = {"a": "float8_e4m3", "b": "float8_e4m3"}
        (out,) = run(double_row_kernel, a=a, b=b, dtypes=dt)
        want = np.einsum("krm,krn->mn", a, b)
        np.testing.assert_allclose(out, want, rtol=1e-6)
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            run(double_row_kernel, a=a, b=b, dtypes=dt, target="trn1")
        self.assertIn("trn1", cm.exception.message)
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            run(double_row_kernel, a=a, b=b)                 # fp32 operands
        self.assertIn("FP8", cm.exception.message)

    def test_mx_is_trn3_only(self):
        x = rand(128, 64)
        for k in (mx_alloc_kernel, mx_matmul_kernel):
            with self.assertRaises(nkisim.NkiCompileError) as cm:
                run(k, x=x)
            self.assertIn("trn3", cm.exception.message)
        self.assertEqual(np.dtype(nl.float8_e5m2_x4).itemsize, 4)


if __name__ == "__main__":
    unittest.main()
