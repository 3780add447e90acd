"""Constraint checks: compiler-shaped errors carrying the kernel's source line."""
import unittest

import numpy as np

from . import _util
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl

THIS = __file__.replace(".pyc", ".py")


def line_of(marker):
    return _util.marker_line(THIS, marker)


def x128():
    return np.ones((128, 512), np.float32)


@nki.jit
def partition_alloc_kernel(x):
    t = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.sbuf)  # E:partition-alloc
    return t


@nki.jit
def partition_load_kernel(x):
    t = nl.load(x[0:256, :])  # E:partition-load
    return t


@nki.jit
def moving_fmax_kernel(x):
    a = nl.load(x[0:128, 0:128])
    b = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=b[:, 0:512], src=x[0:128, :])
    nisa.dma_copy(dst=b[:, 512:1024], src=x[128:256, :])
    r = nisa.nc_matmul(a, b)  # E:moving
    return r


@nki.jit
def stationary_fmax_kernel(x):
    a = nl.load(x[0:128, 0:256])
    b = nl.load(x[0:128, 0:512])
    r = nisa.nc_matmul(a, b)  # E:stationary
    return r


@nki.jit
def contraction_mismatch_kernel(x):
    a = nl.load(x[0:128, 0:128])
    b = nl.load(x[0:64, 0:512])
    r = nl.matmul(a, b, transpose_x=True)  # E:contraction
    return r


@nki.jit
def psum_banks_kernel(x):
    tiles = []
    for i in range(9):
        tiles.append(nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum))  # E:psum-banks
    return x


@nki.jit
def psum_bank_size_kernel(x):
    a = nl.load(x[0:128, 0:128])
    b = nl.load(x[0:128, 0:512])
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    wide = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=wide[:, 0:512], stationary=a, moving=b)
    nisa.nc_matmul(dst=wide, stationary=a, moving=b)  # E:psum-out
    return x


@nki.jit
def hbm_operand_kernel(x):
    y = nl.exp(x)  # E:hbm-operand
    return y


@nki.jit
def isa_hbm_operand_kernel(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=out, data=x, op0=nl.multiply, operand0=2.0)  # E:isa-hbm
    return out


@nki.jit
def sbuf_capacity_kernel(x):
    keep = []
    for i in range(4):
        keep.append(nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.sbuf))  # E:sbuf-cap
    return x


@nki.jit
def matmul_dtype_kernel(x):
    a = nl.ndarray((128, 128), dtype=nl.int32, buffer=nl.sbuf)
    b = nl.ndarray((128, 512), dtype=nl.int32, buffer=nl.sbuf)
    r = nisa.nc_matmul(a, b)  # E:matmul-dtype
    return r


@nki.jit
def matmul_mixed_kernel(x):
    a = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    r = nisa.nc_matmul(a, b)  # E:matmul-mixed
    return r


@nki.jit
def bitwise_float_kernel(x):
    t = nl.load(x[0:128, :])
    r = nl.bitwise_and(t, t)  # E:bitwise
    return r


@nki.jit
def oob_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        t = nl.load(x[i * 128 + 64:(i + 1) * 128 + 64, :])  # E:oob
        nl.store(out[0:128, :], value=t)
    return out


@nki.jit
def oob_arange_kernel(x):
    ip = nl.arange(128)[:, None]
    jf = nl.arange(512)[None, :]
    t = nl.load(x[ip + 200, jf])  # E:oob-arange
    return t


@nki.jit
def python_error_kernel(x):
    t = nl.load(x[0:128, :])
    y = undefined_name + t  # E:python  # noqa: F821
    return y


@nki.jit
def gpsimd_psum_kernel(x):
    a = nl.load(x[0:128, 0:128])
    b = nl.load(x[0:128, 0:512])
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=acc, engine=nisa.engine.gpsimd)  # E:gpsimd-psum
    return o


@nki.jit
def dma_count_kernel(x):
    t = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)  # E:dma-count
    return t


@nki.jit
def truth_value_kernel(x):
    t = nl.load(x[0:128, :])
    if t:  # E:truth
        pass
    return t


@nki.jit
def free_limit_kernel(x):
    big = nl.ndarray((128, 70000), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=big, src=big)  # E:free-limit
    out = big
    return out


@nki.jit
def hwdge_kernel(x):
    t = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[0:128, :], dge_mode=nisa.dge_mode.hwdge)  # E:hwdge
    return t


def helper_that_fails(t):
    return nl.ndarray((512, 4), dtype=nl.float32, buffer=nl.sbuf)  # E:helper


@nki.jit
def helper_kernel(x):
    return helper_that_fails(x)


CASES = [
    # kernel, marker, error class, message fragment, input rows
    (partition_alloc_kernel, "E:partition-alloc", nkisim.NkiCompileError,
     "Size of partition dimension 256 exceeds architecture limitation of 128"),
    (partition_load_kernel, "E:partition-load", nkisim.NkiCompileError,
     "Size of partition dimension 256 exceeds architecture limitation of 128"),
    (moving_fmax_kernel, "E:moving", nkisim.NkiCompileError, "moving free size 1024"),
    (stationary_fmax_kernel, "E:stationary", nkisim.NkiCompileError,
     "stationary free size 256"),
    (contraction_mismatch_kernel, "E:contraction", nkisim.NkiCompileError, "contraction"),
    (psum_banks_kernel, "E:psum-banks", nkisim.NkiCompileError, "Out of memory in psum"),
    (psum_bank_size_kernel, "E:psum-out", nkisim.NkiCompileError,
     "does not match [128, 512]"),
    (hbm_operand_kernel, "E:hbm-operand", nkisim.NkiCompileError, "err_unsupported_memory"),
    (isa_hbm_operand_kernel, "E:isa-hbm", nkisim.NkiCompileError, "HBM"),
    (sbuf_capacity_kernel, "E:sbuf-cap", nkisim.NkiCompileError, "Out of memory in sbuf"),
    (matmul_dtype_kernel, "E:matmul-dtype", nkisim.NkiCompileError, "invalid dtype int32"),
    (matmul_mixed_kernel, "E:matmul-mixed", nkisim.NkiCompileError, "fp32"),
    (bitwise_float_kernel, "E:bitwise", nkisim.NkiCompileError, "invalid dtype float32"),
    (oob_kernel, "E:oob", nkisim.NkiRuntimeError, "out_of_bound"),
    (oob_arange_kernel, "E:oob-arange", nkisim.NkiRuntimeError, "out_of_bound"),
    (python_error_kernel, "E:python", nkisim.NkiCompileError, "NameError"),
    (gpsimd_psum_kernel, "E:gpsimd-psum", nkisim.NkiCompileError, "GpSimd"),
    (dma_count_kernel, "E:dma-count", nkisim.NkiCompileError, "element count mismatch"),
    (truth_value_kernel, "E:truth", nkisim.NkiCompileError, "truth value"),
    (helper_kernel, "E:helper", nkisim.NkiCompileError, "partition dimension 512"),
    (free_limit_kernel, "E:free-limit", nkisim.NkiCompileError, "exceeds the engine limit"),
    (hwdge_kernel, "E:hwdge", nkisim.NkiCompileError, "cannot convert"),
]


class ErrorTest(unittest.TestCase):
    def test_errors_have_message_and_kernel_line(self):
        x = np.ones((256, 512), np.float32)
        for kernel, marker, cls, fragment in CASES:
            with self.subTest(kernel=kernel.__name__):
                with self.assertRaises(cls) as cm:
                    nkisim.simulate(kernel, {"x": x})
                e = cm.exception
                self.assertIn(fragment, e.message)
                self.assertEqual(e.line, line_of(marker), e.message)

    def test_sbuf_error_reports_peak_use(self):
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            nkisim.simulate(sbuf_capacity_kernel, {"x": x128()}, target="trn1")
        # 4 x 64 KiB per partition; the 4th allocation exceeds trn1's 192 KiB
        self.assertIn("262144 bytes per partition", cm.exception.message)
        self.assertIn("196608", cm.exception.message)

    def test_error_classes_are_distinct(self):
        self.assertTrue(issubclass(nkisim.NkiCompileError, Exception))
        self.assertFalse(issubclass(nkisim.NkiCompileError, nkisim.NkiRuntimeError))
        e = nkisim.NkiRuntimeError("boom", 7)
        self.assertEqual((e.message, e.line), ("boom", 7))

    def test_liveness_ends_at_last_use(self):
        @nki.jit
        def many_names(x):
            # 6 distinct names for 64 KiB tiles per iteration: with Python-reference liveness
            # the previous iteration's tiles would still be alive; the last use frees them
            out = nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.shared_hbm)
            for i in range(3):
                a = nl.load(x)
                b = nl.exp(a)
                c = nl.multiply(b, 2.0)
                d = nl.add(c, a)
                e = nl.negative(d)
                f = nl.abs(e)
                nl.store(out, value=f)
            return out
        x = np.ones((128, 16384), np.float32)
        res = nkisim.simulate(many_names, {"x": x}, numerics=False)
        self.assertLessEqual(res.metrics["peak_sbuf_bytes_per_partition"], 3 * 65536)

    def test_indirect_load_and_runtime_out_of_bounds(self):
        @nki.jit
        def gather(table, ids):
            out = nl.ndarray((128, table.shape[1]), dtype=table.dtype, buffer=nl.shared_hbm)
            idx = nl.load(ids)
            ix = nl.arange(table.shape[1])[None, :]
            rows = nl.load(table[idx, ix])  # E:gather
            nl.store(out, value=rows)
            return out
        rng = np.random.default_rng(5)
        table = rng.random((1000, 64)).astype(np.float32)
        ids = rng.integers(0, 1000, (128, 1)).astype(np.int32)
        res = nkisim.simulate(gather, {"table": table, "ids": ids})
        np.testing.assert_array_equal(res.outputs[0], table[ids[:, 0]])
        ids[7, 0] = 5000
        with self.assertRaises(nkisim.NkiRuntimeError) as cm:
            nkisim.simulate(gather, {"table": table, "ids": ids})
        self.assertEqual(cm.exception.line, line_of("E:gather"))

    def test_masked_out_of_bounds_is_allowed(self):
        @nki.jit
        def k(x):
            out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
            ip = nl.arange(128)[:, None]
            jf = nl.arange(8)[None, :]
            t = nl.load(x[ip + 100, jf], mask=(ip + 100 < 150))
            nl.store(out[ip, jf], value=t, mask=(ip + 100 < 150))
            return out
        x = np.arange(150 * 8, dtype=np.float32).reshape(150, 8)
        out = nkisim.simulate(k, {"x": x}).outputs[0]
        np.testing.assert_array_equal(out[:50], x[100:150])
        self.assertTrue(np.isnan(out[50:]).all())

    def test_state_is_clean_after_error(self):
        with self.assertRaises(nkisim.NkiCompileError):
            nkisim.simulate(partition_alloc_kernel, {"x": x128()})

        @nki.jit
        def ok(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            nl.store(out, value=nl.load(x))
            return out
        res = nkisim.simulate(ok, {"x": x128()})
        np.testing.assert_array_equal(res.outputs[0], x128())


if __name__ == "__main__":
    unittest.main()
