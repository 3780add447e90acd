"""trn3 instructions and NKI 0.3+ language names against numpy written here:
nisa.exponential (with VectorE's accumulator), nisa.activate2, nl.abs_max / nl.abs_min,
nl.gelu_apprx_sigmoid_dx, nl.gather_flattened, nl.expand_dims, nl.random_seed,
nisa.get_nc_sub_version."""
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl
from nkisim.errors import NkiCompileError

RNG = np.random.default_rng(3)


def run(kernel, target="trn3", **inputs):
    return nkisim.simulate(kernel, inputs, target=target)


def load(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def store(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def softmax_parts_kernel(x, m):
    """exp(x - m) of two halves, the row sum accumulated over both."""
    h = x.shape[1] // 2
    t, mt = load(x), load(m)
    e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(dst=e[:, 0:h], src=t[:, 0:h], max_value=mt,
                     reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.exponential(dst=e[:, h:], src=t[:, h:], max_value=mt, reduce_res=r,
                     reduce_cmd=nisa.reduce_cmd.reduce)
    return store(e), store(r)


@nki.jit
def activate2_kernel(x, b):
    d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activate2(dst=d, op=nl.prelu, data=load(x), imm0=2.0, imm1=load(b), op0=nl.multiply,
                   op1=nl.subtract, relu_param=0.1, reduce_op=nl.add, reduce_res=r,
                   reduce_cmd=nisa.reduce_cmd.reset_reduce)
    e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activate2(e, nl.exp, load(x), 3.0, 0.0, nl.add, nl.bypass, reverse0=True)
    return store(d), store(r), store(e)


@nki.jit
def language_kernel(x, y, idx):
    a, b = load(x), load(y)
    mx = nl.abs_max(a, b)
    mn = nl.abs_min(a, -0.5)
    g = nl.gelu_apprx_sigmoid_dx(a)
    gathered = nl.gather_flattened(a, load(idx))
    return store(mx), store(mn), store(g), store(gathered)


@nki.jit
def rand_kernel(x):
    seed = nl.full((1, 1), 42, dtype=nl.int32, buffer=nl.sbuf)
    nl.random_seed(seed)
    a = nl.rand((16, 32), dtype=nl.float32)
    nl.random_seed(seed)
    b = nl.rand((16, 32), dtype=nl.float32)
    nl.random_seed(7)
    c = nl.rand((16, 32), dtype=nl.float32)
    e = nl.expand_dims(a, 1)
    assert tuple(e.shape) == (16, 1, 32)
    return store(a), store(b), store(c)


class Trn3IsaTest(unittest.TestCase):
    def test_exponential_and_its_accumulated_row_sum(self):
        x = RNG.standard_normal((64, 40)).astype(np.float32)
        m = x.max(axis=1, keepdims=True)
        e, r = run(softmax_parts_kernel, x=x, m=m).outputs
        ref = np.exp(x - m)
        np.testing.assert_allclose(e, ref, rtol=1e-6)
        np.testing.assert_allclose(r, ref.sum(axis=1, keepdims=True), rtol=1e-5)

    def test_exponential_is_trn3_only(self):
        x = np.zeros((4, 4), np.float32)
        with self.assertRaisesRegex(NkiCompileError, "NeuronCore-v4"):
            run(softmax_parts_kernel, target="trn2", x=x, m=x[:, :1])

    def test_activate2(self):
        x = RNG.standard_normal((32, 24)).astype(np.float32)
        b = RNG.standard_normal((32, 1)).astype(np.float32)
        d, r, e = run(activate2_kernel, x=x, b=b).outputs
        v = x * 2.0 - b
        ref = np.where(v > 0, v, 0.1 * v)
        np.testing.assert_allclose(d, ref, rtol=1e-6)
        np.testing.assert_allclose(r, ref.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(e, np.exp(3.0 + x), rtol=1e-6)

    def test_activate2_refuses_an_unsupported_pair(self):
        @nki.jit
        def bad(x):
            d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
            nisa.activate2(d, nl.exp, load(x), 1.0, 1.0, nl.add, nl.multiply)
            return store(d)
        with self.assertRaisesRegex(NkiCompileError, "supported pairs"):
            run(bad, x=np.zeros((4, 4), np.float32))

    def test_sub_version(self):
        self.assertEqual(nisa.get_nc_sub_version(), 0)


class LanguageTest(unittest.TestCase):
    def test_magnitude_selects_gelu_sigmoid_dx_and_gather(self):
        x = RNG.standard_normal((32, 16)).astype(np.float32)
        y = RNG.standard_normal((32, 16)).astype(np.float32)
        idx = RNG.integers(0, 16, (32, 8)).astype(np.uint32)
        mx, mn, g, gathered = run(language_kernel, x=x, y=y, idx=idx).outputs
        np.testing.assert_array_equal(mx, np.where(np.abs(x) > np.abs(y), x, y))
        np.testing.assert_array_equal(mn, np.where(np.abs(x) < 0.5, x, -0.5))
        s = 1.0 / (1.0 + np.exp(-1.702 * x))
        np.testing.assert_allclose(g, s + 1.702 * x * s * (1 - s), rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(gathered, np.take_along_axis(x, idx.astype(int), 1))

    def test_abs_max_is_trn3_only(self):
        x = np.zeros((4, 4), np.float32)
        with self.assertRaisesRegex(NkiCompileError, "NeuronCore-v4"):
            run(language_kernel, target="trn2", x=x, y=x, idx=np.zeros((4, 1), np.uint32))

    def test_random_seed_repeats_the_sequence(self):
        a, b, c = run(rand_kernel, x=np.zeros((1, 1), np.float32)).outputs
        np.testing.assert_array_equal(a, b)
        self.assertFalse(np.array_equal(a, c))


if __name__ == "__main__":
    unittest.main()
