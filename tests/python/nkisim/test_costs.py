"""The cost tables (nkisim/machine/costs.py, cost_tables.json): one per target, read by the simulator."""
import unittest

import numpy as np

from . import _util  # noqa: F401
import nkisim
from nkisim.machine import costs
import nki.language as nl


def _small_adds(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.load(a)
    tb = nl.load(b)
    for _ in nl.sequential_range(64):
        ta = nl.add(ta, tb)
    nl.store(out, ta)
    return out


class CostTableTest(unittest.TestCase):
    def tearDown(self):
        costs.reset()

    def test_every_target_has_a_complete_table(self):
        for name in ("trn1", "trn2", "trn3", "inf2", "gen3"):
            t = costs.table(name)
            for field in costs.FIELDS:
                self.assertTrue(hasattr(t, field), (name, field))

    def test_a_table_missing_a_field_is_refused(self):
        vals = costs.table("trn1").as_dict()
        del vals["dma_fixed_ns"]
        with self.assertRaisesRegex(ValueError, "lacks dma_fixed_ns"):
            costs.CostTable("trn1", vals)

    def test_the_simulator_prices_instructions_from_the_table(self):
        a = np.ones((128, 4), np.float32)
        base = nkisim.simulate(_small_adds, {"a": a, "b": a}, target="trn1").metrics["total_time"] * 1e9
        t = costs.table("trn1")
        costs.set_table(t.replace(vector_fixed_cycles=t.vector_fixed_cycles + 600))
        slower = nkisim.simulate(_small_adds, {"a": a, "b": a}, target="trn1").metrics["total_time"] * 1e9
        # 64 dependent adds, each 600 cycles (at 1.12 GHz) dearer
        self.assertAlmostEqual(slower - base, 64 * 600 / 1.12, delta=64 * 600 / 1.12 * 0.05)

    def test_dma_runs_shorter_than_the_minimum_cost_as_the_minimum(self):
        t = costs.table("trn1").replace(dma_min_run_bytes=64, dma_descriptor_bytes=0)
        self.assertEqual(t.dma_effective_bytes(4 * 1000, 1000), 64 * 1000)
        self.assertEqual(t.dma_effective_bytes(4096 * 10, 10), 4096 * 10)


if __name__ == "__main__":
    unittest.main()


class TransposingDmaTest(unittest.TestCase):
    """An HBM->HBM dma_copy through a transposing access pattern moves runs of one element:
    each is its own descriptor, not a contiguous row at full bandwidth."""

    def test_transposing_pattern_costs_far_more_than_a_contiguous_copy(self):
        import nki
        import nki.isa as nisa

        @nki.jit
        def transposing(x):
            A, B, C = x.shape
            out = nl.ndarray((A, C, B), dtype=x.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=x.ap([[B * C, A], [1, C], [C, B]]))
            return out

        @nki.jit
        def straight(x):
            A, B, C = x.shape
            out = nl.ndarray((A, B, C), dtype=x.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=x.ap([[B * C, A], [C, B], [1, C]]))
            return out

        x = np.random.default_rng(1).random((2, 256, 128), dtype=np.float32)
        t = nkisim.simulate(transposing, {"x": x}, target="trn1")
        c = nkisim.simulate(straight, {"x": x}, target="trn1")
        np.testing.assert_array_equal(t.outputs[0], x.transpose(0, 2, 1))
        np.testing.assert_array_equal(c.outputs[0], x)
        # 4-byte runs, each with the per-descriptor overhead of the cost table
        self.assertGreater(t.latency_us, 10 * c.latency_us)
