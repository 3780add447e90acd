"""The harness's --cost-table option and the fake device `sim-perturbed` (PROTOCOL.md,
"Cost tables and the fake device")."""
import json
import os
import unittest

from tests.python.harness import util
from tests.python.harness.util import autocomp_harness, write

from harnesslib import simdev  # noqa: E402

simdev.import_nkisim()
try:
    from nkisim.machine import costs  # noqa: E402
except ImportError:
    from nkisim import costs  # noqa: E402

# Loads, a few VectorE and ScalarE instructions and a store: every engine family's costs
# show in the latency.
KERNEL = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        x = nl.load(a[i * 128:(i + 1) * 128, :])
        y = nl.load(b[i * 128:(i + 1) * 128, :])
        z = nl.add(x, y)
        w = nl.exp(z)
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.multiply(w, x))
    return out
"""

PROBLEM = """
import numpy as np

def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((256, 512), dtype=np.float32),
            "b": rng.standard_normal((256, 512), dtype=np.float32)}

def reference(a, b):
    return (np.exp(a.astype(np.float64) + b) * a).astype(np.float32)

RTOL = 1e-4
ATOL = 1e-5
"""


class CostTableOptions(unittest.TestCase):
    def setUp(self):
        self._td = util.TempDir()
        self.dir = self._td.__enter__()
        self.kernel = write(self.dir, "kernel.py", KERNEL)
        self.problem = write(self.dir, "problem.py", PROBLEM)

    def tearDown(self):
        self._td.__exit__(None, None, None)

    def run_h(self, *extra, command="benchmark"):
        out = autocomp_harness.run([command, "--kernel", self.kernel, "--problem", self.problem,
                                    "--target", "trn1", "--fixed-seeds", "--no-ref-cache",
                                    "--iters", "5"] + list(extra))
        json.dumps(out, allow_nan=False)
        return out

    def table_file(self, doc, name="table.json"):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        return path

    def median(self, out):
        self.assertEqual(out["status"], "ok", out.get("failure"))
        return out["benchmark"]["latency_us"]["median"]

    def assertBadArguments(self, out, *words):
        self.assertEqual(out["status"], "failed", out)
        self.assertEqual(out["failure"]["kind"], "harness_error", out["failure"])
        self.assertIn("bad arguments", out["failure"]["message"])
        for w in words:
            self.assertIn(w, out["failure"]["message"])

    def test_default_names_the_shipped_table(self):
        out = self.run_h()
        self.median(out)
        self.assertEqual(out["cost_table"], {"name": "shipped",
                                             "digest": costs.digest(costs.table("trn1"))})

    def test_override_prices_with_the_file_and_is_named(self):
        shipped = self.median(self.run_h())
        path = self.table_file({"target": "trn1", "name": "slow-dma",
                                "values": {"dma_fixed_ns": 5000.0}})
        out = self.run_h("--cost-table", path, command="evaluate")
        self.assertTrue(out["verify"]["correct"])
        self.assertGreater(self.median(out), shipped + 3.0)   # 3.7 us more per DMA wave
        expected = costs.table("trn1").replace(dma_fixed_ns=5000.0)
        self.assertEqual(out["cost_table"], {"name": "slow-dma",
                                             "digest": costs.digest(expected)})
        # the in-process caller gets the shipped table back
        self.assertEqual(costs.digest(costs.table("trn1")), costs.digest(costs.load()["trn1"]))
        self.assertAlmostEqual(self.median(self.run_h()), shipped, 6)

    def test_bad_files_are_bad_arguments(self):
        cases = [
            ("nope", "not valid JSON"),
            ({"target": "trn2", "values": {}}, "for target 'trn2'"),
            ({"target": "trn1", "values": {"bogus": 1}}, "unknown fields bogus"),
            ({"target": "trn1", "values": {"dma_fixed_ns": "x"}}, "dma_fixed_ns must be"),
            ({"target": "trn1", "values": {"dma_efficiency": 0}}, "dma_efficiency must be"),
            ({"target": "trn1", "values": {"dma_fixed_ns": float("inf")}}, "finite"),
            ({"target": "trn1", "values": [1]}, "values must be an object"),
            ({"target": "trn1", "values": {}, "extra": 1}, "unknown keys extra"),
        ]
        for i, (doc, words) in enumerate(cases):
            path = self.table_file(doc, "bad%d.json" % i)
            self.assertBadArguments(self.run_h("--cost-table", path), words)
        self.assertBadArguments(self.run_h("--cost-table", os.path.join(self.dir, "none.json")),
                                "cannot read")

    def test_perturbed_device_prices_with_the_hidden_table(self):
        out = self.run_h("--device", "sim-perturbed", "--device-seed", "2", command="evaluate")
        self.assertTrue(out["verify"]["correct"])
        self.assertEqual(out["device"], "sim-perturbed")
        self.assertEqual(out["receipt"]["device"], "sim-perturbed")
        self.assertEqual(out["cost_table"]["name"], "hidden")
        self.assertNotIn("factor", json.dumps(out))
        bench = out["benchmark"]
        self.assertEqual(bench["method"], "fake-device")
        lat = bench["latency_us"]
        self.assertGreater(lat["max"], lat["min"])            # a run-to-run spread
        self.assertLess(lat["max"] / lat["min"], 1.03)        # a small one
        # the same as the simulator priced with the hidden table given as an override
        hidden = costs.perturbed_table(2, "trn1")
        path = self.table_file({"target": "trn1", "name": "h", "values": costs.values_of(hidden)})
        sim = self.median(self.run_h("--cost-table", path))
        self.assertLess(abs(lat["median"] / sim - 1), 0.01)
        self.assertEqual(out["cost_table"]["digest"], costs.digest(hidden))
        shipped = self.median(self.run_h())
        self.assertGreater(abs(sim / shipped - 1), 0.02)

    def test_perturbed_device_is_deterministic_per_seed(self):
        a = self.run_h("--device", "sim-perturbed", "--device-seed", "1")
        b = self.run_h("--device", "sim-perturbed", "--device-seed", "1")
        c = self.run_h("--device", "sim-perturbed", "--device-seed", "3")
        self.assertEqual(a["benchmark"]["latency_us"], b["benchmark"]["latency_us"])
        self.assertNotEqual(a["cost_table"]["digest"], c["cost_table"]["digest"])
        self.assertGreater(abs(self.median(a) / self.median(c) - 1), 0.02)

    def test_perturbed_device_takes_an_override_as_its_base(self):
        path = self.table_file({"target": "trn1", "name": "base",
                                "values": {"dma_fixed_ns": 4000.0}})
        out = self.run_h("--device", "sim-perturbed", "--device-seed", "1", "--cost-table", path)
        base = costs.table("trn1").replace(dma_fixed_ns=4000.0)
        self.assertEqual(out["cost_table"], {"name": "hidden", "digest": costs.digest(
            costs.perturbed_table(1, "trn1", base=base))})

    def test_option_misuse_is_bad_arguments(self):
        self.assertBadArguments(self.run_h("--device", "sim-perturbed"), "--device-seed")
        self.assertBadArguments(self.run_h("--device-seed", "1"), "sim-perturbed only")
        self.assertBadArguments(self.run_h("--device", "sim-perturbed", "--device-seed", "-1"),
                                "--device-seed")
        path = self.table_file({"target": "trn1", "values": {}})
        self.assertBadArguments(self.run_h("--device", "fake", "--cost-table", path),
                                "simulator")

    def test_command_line_perturbed_device(self):
        lines, err, code = util.run_cli(["benchmark", "--kernel", self.kernel, "--problem",
                                         self.problem, "--target", "trn1", "--fixed-seeds",
                                         "--no-ref-cache", "--device", "sim-perturbed",
                                         "--device-seed", "3"])
        self.assertEqual(code, 0, err)
        out = util.last_json(lines)
        self.assertEqual(out["status"], "ok", out)
        self.assertEqual((out["device"], out["cost_table"]["name"]), ("sim-perturbed", "hidden"))
        self.assertIn(".nkisim.", out["harness_version"])


if __name__ == "__main__":
    unittest.main()
