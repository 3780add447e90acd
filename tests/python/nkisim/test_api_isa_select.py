"""NKI 0.3+ pattern, predicated and selection instructions against numpy written here:
nisa.iota(pattern=), nisa.affine_select(pattern=), tensor_copy_predicated, range_select,
select_reduce, tensor_scalar_cumulative; each is timed on its engine and refuses what the hardware refuses."""
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl
from nkisim.errors import NkiCompileError

RNG = np.random.default_rng(7)


def run(kernel, target="trn2", **inputs):
    return nkisim.simulate(kernel, inputs, target=target)


def load(x, dtype=None):
    t = nl.ndarray(x.shape, dtype=dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def store(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def iota_kernel(x):
    a = nl.ndarray((128, 4, 8), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(a, [[8, 4], [1, 8]], offset=5, channel_multiplier=100)
    b = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.sbuf)
    nisa.iota(dst=b, pattern=[[0, 2], [-3, 8]], offset=-1, channel_multiplier=0)
    return store(a), store(b)


@nki.jit
def affine_select_kernel(x):
    t = load(x)
    d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    # causal mask: keep column j of row p where p - j >= 0
    nisa.affine_select(dst=d, pattern=[[-1, x.shape[1]]], channel_multiplier=1,
                       on_true_tile=t, on_false_value=-9999.0, cmp_op=nl.greater_equal)
    return store(d)


@nki.jit
def predicated_kernel(x, y, pred):
    d = load(x)
    nisa.tensor_copy_predicated(dst=d, src=load(y), predicate=load(pred))
    e = load(x)
    nisa.tensor_copy_predicated(e, 7.0, load(pred), reverse_pred=True)
    return store(d), store(e)


@nki.jit
def range_select_kernel(x, lo, hi):
    d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.range_select(dst=d, on_true_tile=load(x), comp_op0=nl.greater_equal,
                      comp_op1=nl.less, bound0=load(lo), bound1=load(hi),
                      reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_res=r,
                      reduce_op=nl.maximum, range_start=3)
    return store(d), store(r)


@nki.jit
def select_reduce_kernel(x, z, pred):
    d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=d, predicate=load(pred), on_true=load(x), on_false=-1.0,
                       reduce_cmd=nisa.reduce_cmd.reset_reduce)
    d2 = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    # continue the same accumulator: the row max over both instructions
    nisa.select_reduce(dst=d2, predicate=load(pred), on_true=load(z), on_false=load(z[:, 0:1]),
                       reduce_res=r, reduce_cmd=nisa.reduce_cmd.reduce, reverse_pred=True)
    return store(d), store(d2), store(r)


@nki.jit
def cumulative_kernel(x, start):
    d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=d, src=load(x), op0=nl.multiply, op1=nl.add, imm0=2.0)
    e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=e, src=load(x), op0=nl.add, op1=nl.maximum, imm0=0.0,
                                  imm1=load(start), reduce_cmd=nisa.reduce_cmd.load_reduce)
    f = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    # continues e's running maximum
    nisa.tensor_scalar_cumulative(dst=f, src=load(x), op0=nl.subtract, op1=nl.maximum,
                                  imm0=1.0, reduce_cmd=nisa.reduce_cmd.reduce)
    return store(d), store(e), store(f)


class PatternTest(unittest.TestCase):
    def test_iota_pattern_values(self):
        a, b = run(iota_kernel, x=np.zeros((1, 1), np.float32)).outputs
        p = np.arange(128)[:, None, None]
        ref = 5 + 100 * p + 8 * np.arange(4)[None, :, None] + np.arange(8)[None, None, :]
        np.testing.assert_array_equal(a, ref)
        ref_b = np.tile(-1 - 3 * np.arange(8), 2)[None, :].repeat(64, 0)
        np.testing.assert_array_equal(b, ref_b.astype(np.float32))

    def test_iota_needs_the_pattern_size_of_dst(self):
        @nki.jit
        def bad(x):
            a = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.sbuf)
            nisa.iota(a, [[1, 4]])
            return store(a)
        with self.assertRaisesRegex(NkiCompileError, "pattern has 4 elements"):
            run(bad, x=np.zeros((1, 1), np.float32))

    def test_iota_is_a_gpsimd_instruction(self):
        res = run(iota_kernel, x=np.zeros((1, 1), np.float32))
        self.assertGreater(res.metrics["gpsimd_engine_active_time_percent"], 0)

    def test_affine_select_causal_mask(self):
        x = RNG.standard_normal((128, 96)).astype(np.float32)
        (d,) = run(affine_select_kernel, x=x).outputs
        keep = np.arange(128)[:, None] - np.arange(96)[None, :] >= 0
        np.testing.assert_array_equal(d, np.where(keep, x, -9999.0))


class PredicatedTest(unittest.TestCase):
    def test_tensor_copy_predicated(self):
        x = RNG.standard_normal((64, 40)).astype(np.float32)
        y = RNG.standard_normal((64, 40)).astype(np.float32)
        pred = (RNG.random((64, 40)) > 0.5).astype(np.uint8)
        d, e = run(predicated_kernel, x=x, y=y, pred=pred).outputs
        np.testing.assert_array_equal(d, np.where(pred != 0, y, x))
        np.testing.assert_array_equal(e, np.where(pred == 0, 7.0, x))

    def test_tensor_copy_predicated_needs_an_integer_predicate(self):
        x = np.zeros((8, 8), np.float32)
        with self.assertRaisesRegex(NkiCompileError, "predicate must be an integer"):
            run(predicated_kernel, x=x, y=x, pred=x)

    def test_range_select_and_its_row_max(self):
        x = RNG.standard_normal((32, 50)).astype(np.float32)
        lo = RNG.integers(0, 30, (32, 1)).astype(np.float32)
        hi = lo + RNG.integers(1, 20, (32, 1)).astype(np.float32)
        d, r = run(range_select_kernel, x=x, lo=lo, hi=hi).outputs
        idx = 3 + np.arange(50)[None, :]
        ref = np.where((idx >= lo) & (idx < hi), x, np.float32(-3.4028235e+38))
        np.testing.assert_array_equal(d, ref)
        np.testing.assert_array_equal(r, ref.max(axis=1, keepdims=True))

    def test_range_select_is_trn2_and_later(self):
        x = np.zeros((4, 4), np.float32)
        with self.assertRaisesRegex(NkiCompileError, "NeuronCore-v3"):
            run(range_select_kernel, target="trn1", x=x, lo=x[:, :1], hi=x[:, :1])

    def test_select_reduce_accumulates_across_instructions(self):
        x = RNG.standard_normal((16, 24)).astype(np.float32)
        z = RNG.standard_normal((16, 24)).astype(np.float32)
        pred = (RNG.random((16, 24)) > 0.3).astype(np.uint8)
        d, d2, r = run(select_reduce_kernel, x=x, z=z, pred=pred).outputs
        ref1 = np.where(pred != 0, x, -1.0)
        ref2 = np.where(pred == 0, z, z[:, :1])
        np.testing.assert_array_equal(d, ref1)
        np.testing.assert_array_equal(d2, ref2)
        np.testing.assert_array_equal(
            r, np.maximum(ref1.max(axis=1), ref2.max(axis=1))[:, None])

    def test_tensor_scalar_cumulative(self):
        x = RNG.standard_normal((16, 30)).astype(np.float32)
        start = RNG.standard_normal((16, 1)).astype(np.float32)
        d, e, f = run(cumulative_kernel, x=x, start=start).outputs
        np.testing.assert_allclose(d, np.cumsum(2 * x, axis=1), rtol=1e-5, atol=1e-5)
        ref_e = np.maximum.accumulate(np.concatenate([start, x], axis=1), axis=1)[:, 1:]
        np.testing.assert_array_equal(e, ref_e)
        ref_f = np.maximum.accumulate(np.concatenate([ref_e[:, -1:], x - 1], axis=1),
                                      axis=1)[:, 1:]
        np.testing.assert_array_equal(f, ref_f)

    def test_selects_cost_their_cost_table_rate(self):
        x = RNG.standard_normal((128, 512)).astype(np.float32)
        pred = np.ones((128, 512), np.uint8)
        base = run(predicated_kernel, x=x, y=x, pred=pred).latency_us
        from nkisim.machine import costs as K
        table = K.table("trn2")
        slow = table.replace(tensor_copy_predicated_cycles_per_elem=8.0)
        original = K.table
        K.table = lambda t: slow if getattr(t, "name", t) == "trn2" else original(t)
        try:
            slower = run(predicated_kernel, x=x, y=x, pred=pred).latency_us
        finally:
            K.table = original
        self.assertGreater(slower, base)


if __name__ == "__main__":
    unittest.main()
