"""The compiler's grouping of narrow instructions, as the conv1d ladder shows it on trn1:
narrow VectorE instructions in an affine loop of at most 64 iterations become one wide
instruction per loop; in a longer loop they stay narrow; narrow reduces into PSUM go 4:1.
Each applied grouping is named in the result's compiler_effects."""
import unittest

import numpy as np

from . import _util  # noqa: F401
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl


def _columns(block):
    @nki.jit
    def kernel(x, w):
        """out[:, j] = sum_k x[:, j + k] * w[:, k] over 128 columns, the column loop split
        into blocks of `block` columns."""
        out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
        xt = nl.load(x)
        wt = nl.load(w)
        res = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
        ip = nl.arange(128)[:, None]
        ik = nl.arange(3)[None, :]
        for b in nl.affine_range(128 // block):
            for i in nl.affine_range(block):
                j = b * block + i
                prod = nisa.tensor_tensor(xt[ip, ik + j], wt, np.multiply)
                res[ip, j] = nisa.tensor_reduce(np.add, prod, axis=[1])
        nl.store(out, res)
        return out
    return kernel


@nki.jit
def psum_columns(x, w):
    out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    xt = nl.load(x)
    wt = nl.load(w)
    acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    ip = nl.arange(128)[:, None]
    ik = nl.arange(3)[None, :]
    for j in nl.affine_range(128):
        prod = nisa.tensor_tensor(xt[ip, ik + j], wt, np.multiply)
        acc[ip, j] = nisa.tensor_reduce(np.add, prod, axis=[1])
    nl.store(out, nisa.tensor_copy(acc))
    return out


def _ref(x, w):
    return sum(x[:, k:k + 128] * w[:, k:k + 1] for k in range(3))


class GroupingTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(5)
        self.x = rng.standard_normal((128, 130)).astype(np.float32)
        self.w = rng.standard_normal((128, 3)).astype(np.float32)

    def run_kernel(self, k):
        r = nkisim.simulate(k, {"x": self.x, "w": self.w}, target="trn1")
        np.testing.assert_allclose(r.outputs[0], _ref(self.x, self.w), rtol=1e-5, atol=1e-5)
        return r

    def test_narrow_instructions_in_a_loop_of_64_are_grouped_and_named(self):
        r = self.run_kernel(_columns(64))
        # 2 blocks: one multiply and one reduce per block
        self.assertEqual(r.metrics["vector_engine_instruction_count"], 4)
        self.assertEqual(len(r.compiler_effects), 2, r.compiler_effects)
        for e in r.compiler_effects:
            self.assertRegex(e, r"^line \d+: 128 instructions grouped into 2 \(")

    def test_a_long_loop_is_not_grouped_and_costs_more(self):
        grouped = self.run_kernel(_columns(64))
        narrow = self.run_kernel(_columns(128))
        self.assertEqual(narrow.metrics["vector_engine_instruction_count"], 256)
        self.assertEqual(narrow.compiler_effects, [])
        self.assertGreater(narrow.latency_us, 5 * grouped.latency_us)

    def test_narrow_reduces_into_psum_are_grouped_four_to_one(self):
        r = self.run_kernel(psum_columns)
        # 128 multiplies, 1 + 127 / 4 (rounded up) reduces (the first shows the PSUM
        # destination), one copy out of PSUM
        self.assertEqual(r.metrics["vector_engine_instruction_count"], 128 + 1 + 32 + 1)
        self.assertEqual(len(r.compiler_effects), 1)
        self.assertIn("into PSUM, 4:1", r.compiler_effects[0])


if __name__ == "__main__":
    unittest.main()


def _psum_acc(lazy):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum,
                       lazy_initialization=lazy)
        for k in nl.affine_range(2):
            acc += nl.matmul(nl.load(a[k * 128:(k + 1) * 128, :]),
                             nl.load(b[k * 128:(k + 1) * 128, :]), transpose_x=True)
        nl.store(out, nl.copy(acc))
        return out
    return kernel


class LazyPsumZeroTest(unittest.TestCase):
    def test_lazy_psum_zero_fill_is_left_to_the_matmul_and_named(self):
        rng = np.random.default_rng(2)
        a = rng.standard_normal((256, 128)).astype(np.float32)
        b = rng.standard_normal((256, 512)).astype(np.float32)
        lazy = nkisim.simulate(_psum_acc(True), {"a": a, "b": b}, target="trn1")
        eager = nkisim.simulate(_psum_acc(False), {"a": a, "b": b}, target="trn1")
        np.testing.assert_allclose(lazy.outputs[0], a.T @ b, rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(lazy.outputs[0], eager.outputs[0])
        self.assertEqual(eager.metrics["vector_engine_instruction_count"] -
                         lazy.metrics["vector_engine_instruction_count"], 1)
        self.assertTrue(any("lazy_initialization" in e for e in lazy.compiler_effects))
        self.assertEqual(eager.compiler_effects, [])
