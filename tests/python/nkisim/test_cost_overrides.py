"""Override tables, digests and the fake device's hidden tables (nkisim/costs.py)."""
import json
import math
import os
import tempfile
import unittest

from . import _util  # noqa: F401
try:
    from nkisim.machine import costs
except ImportError:
    from nkisim import costs


class OverrideTest(unittest.TestCase):
    def test_subset_fills_in_from_the_shipped_table(self):
        t, name = costs.parse_override({"target": "trn1", "name": "n",
                                        "values": {"dma_fixed_ns": 900}}, "trn1")
        self.assertEqual(name, "n")
        self.assertEqual(t.dma_fixed_ns, 900)
        shipped = costs.table("trn1")
        for k in costs.FIELDS:
            if k != "dma_fixed_ns":
                self.assertEqual(getattr(t, k), getattr(shipped, k), k)
        self.assertNotEqual(costs.digest(t), costs.digest(shipped))

    def test_digest_covers_values_not_sources(self):
        t = costs.table("trn2")
        self.assertEqual(costs.digest(t), costs.digest(t.replace(sources={"x": "y"})))
        self.assertRegex(costs.digest(t), "^[0-9a-f]{16}$")
        self.assertNotEqual(costs.digest(t), costs.digest(t.replace(dma_efficiency=0.9)))

    def test_unreadable_file_is_a_cost_table_error(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.json")
            with self.assertRaisesRegex(costs.CostTableError, "cannot read"):
                costs.load_override(path, "trn1")
            with open(path, "w") as f:
                json.dump({"target": "trn1", "values": {"vector_fixed_overlaps_min_ii": 1}}, f)
            with self.assertRaisesRegex(costs.CostTableError, "true or false"):
                costs.load_override(path, "trn1")


class PerturbationTest(unittest.TestCase):
    def test_factors_are_seeded_and_in_range(self):
        for target in ("trn1", "trn2"):
            a = costs.perturbation_factors(1, target)
            self.assertEqual(a, costs.perturbation_factors(1, target))
            self.assertEqual(set(a), set(costs.calibratable(target)))
            for f in a.values():
                self.assertTrue(costs.PERTURB_RANGE[0] <= f <= costs.PERTURB_RANGE[1])
            self.assertNotEqual(a, costs.perturbation_factors(2, target))
        with self.assertRaises(ValueError):
            costs.perturbation_factors(-1, "trn1")

    def test_only_calibratable_fields_change_and_shares_stay_shares(self):
        for seed in range(20):
            for target in ("trn1", "trn2"):
                base = costs.table(target)
                t = costs.perturbed_table(seed, target)
                f = costs.perturbation_factors(seed, target)
                for k in costs.FIELDS:
                    v, b = getattr(t, k), getattr(base, k)
                    if k in costs.SHARES:
                        self.assertLessEqual(v, 1.0)
                    if k not in f:
                        self.assertEqual(v, b, k)
                    elif k not in costs.SHARES or b * f[k] <= 1.0:
                        self.assertTrue(math.isclose(v, b * f[k]), (k, v, b, f[k]))

    def test_factors_spread_over_the_range(self):
        fs = [f for s in range(30) for f in costs.perturbation_factors(s, "trn1").values()]
        self.assertLess(min(fs), 0.75)
        self.assertGreater(max(fs), 1.3)


if __name__ == "__main__":
    unittest.main()
