"""Device calibration against the fake device `sim-perturbed` (backends/nkisim/calibration/
device): the probes isolate every calibratable field, the fit recovers the hidden table, and
kernels that are no probes then match the fake device."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from . import _util  # noqa: F401

DEVICE_DIR = os.path.join(_util.SIM_DIR, "calibration", "device")
if DEVICE_DIR not in sys.path:
    sys.path.insert(0, DEVICE_DIR)

from costtables import costs  # noqa: E402
import fake_device_check as check  # noqa: E402
import fit_device  # noqa: E402

FIT = os.path.join(DEVICE_DIR, "fit_device.py")
HIDDEN = os.path.join(DEVICE_DIR, "hidden_factors.py")
# Seed kernels that are no probes, at AUTOCOMP_SMALL shapes: the cheapest with the largest
# error on the shipped table under the device seeds tested.
SUITE = ("cumsum", "transpose", "attention")
KERNELS = {}  # recorded probes, shared by the tests (fit_device.load_kernels cache)


class small_shapes:
    def __enter__(self):
        self.old = os.environ.get("AUTOCOMP_SMALL")
        os.environ["AUTOCOMP_SMALL"] = "1"

    def __exit__(self, *exc):
        if self.old is None:
            del os.environ["AUTOCOMP_SMALL"]
        else:
            os.environ["AUTOCOMP_SMALL"] = self.old


def measured_probes(target, seed):
    device = ["--device", "sim-perturbed", "--device-seed", str(seed)]
    return [dict(p, latency_us=check.measure(p["kernel"], p["problem"], target, device))
            for p in check.probes(target)]


class ProbeSuiteTest(unittest.TestCase):
    def test_manifest_covers_every_calibratable_field(self):
        with open(os.path.join(DEVICE_DIR, "probes.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["version"], 1)
        ids = [p["id"] for p in doc["probes"]]
        self.assertEqual(len(ids), len(set(ids)))
        self.assertTrue(8 <= len(ids) <= 18, len(ids))
        for p in doc["probes"]:
            for key in ("kernel", "problem"):
                self.assertTrue(os.path.isfile(os.path.join(DEVICE_DIR, p[key])), p)
            self.assertTrue(set(p["informs"]) <= set(costs.FIELDS), p["id"])
            self.assertTrue(p["what"])
        for target in ("trn1", "trn2"):
            informed = {f for p in doc["probes"] if target in p["targets"] for f in p["informs"]}
            self.assertEqual(set(costs.calibratable(target)) - informed, set(), target)

    def test_probes_are_correct_kernels(self):
        for p in check.probes("trn1"):
            out = check.autocomp_harness.run(["verify", "--kernel", p["kernel"], "--problem",
                                              p["problem"], "--target", "trn1", "--seeds", "0",
                                              "--fixed-seeds", "--no-ref-cache"])
            self.assertEqual(out["status"], "ok", (p["id"], out.get("failure")))
            self.assertTrue(out["verify"]["correct"], p["id"])


class FakeDeviceCalibrationTest(unittest.TestCase):
    def recover(self, target, seed):
        entries = measured_probes(target, seed)
        fit = fit_device.calibrate(entries, target, cache=KERNELS)
        hidden = costs.perturbed_table(seed, target)
        fields = costs.calibratable(target)
        self.assertEqual([p["name"] for p in fit["parameters"]], list(fields))
        for p in fit["parameters"]:
            self.assertTrue(p["identified"], (seed, p))
            err = p["fitted"] / getattr(hidden, p["name"]) - 1
            self.assertLess(abs(err), 0.05, (seed, p["name"], p["fitted"],
                                             getattr(hidden, p["name"])))
        for r in fit["residuals"]:
            self.assertLess(abs(r["error_pct_after"]), 1.0, r)
        # the shipped table is off on the probes: the test can fail
        self.assertGreater(max(abs(r["error_pct_before"]) for r in fit["residuals"]), 10.0)
        self.assertEqual(set(fit["values"]), set(costs.FIELDS))
        return fit

    def test_recovers_the_hidden_table_and_matches_the_device_on_seed_kernels(self):
        fit = self.recover("trn1", 1)
        with tempfile.TemporaryDirectory() as d:
            table = os.path.join(d, "fitted.json")
            with open(table, "w") as f:
                json.dump({"target": "trn1", "name": "fitted", "values": fit["values"]}, f)
            worst_before = 0.0
            with small_shapes():
                for name in SUITE:
                    k = os.path.join(_util.REPO, "seeds", name, "optimized.py")
                    pr = os.path.join(_util.REPO, "seeds", name, "problem.py")
                    dev = check.measure(k, pr, "trn1", ["--device", "sim-perturbed",
                                                        "--device-seed", "1"])
                    before = check.measure(k, pr, "trn1", [])
                    after = check.measure(k, pr, "trn1", ["--cost-table", table])
                    self.assertLess(abs(after / dev - 1), 0.05, (name, dev, after))
                    worst_before = max(worst_before, abs(before / dev - 1))
            self.assertGreater(worst_before, 0.05)

    def test_recovers_other_seeds(self):
        for seed in (2, 3):
            self.recover("trn1", seed)

    def test_recovers_on_trn2(self):
        self.recover("trn2", 2)


class FitCommandLineTest(unittest.TestCase):
    def run_fit(self, doc, target="trn1", extra=()):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.json")
            with open(path, "w") as f:
                f.write(doc if isinstance(doc, str) else json.dumps(doc))
            p = subprocess.run([sys.executable, FIT, "--measurements", path, "--target", target]
                               + list(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               check=False, timeout=300)
        return p.returncode, json.loads(p.stdout.decode().strip().splitlines()[-1])

    def probe(self, pid, latency):
        p = next(x for x in check.probes("trn1") if x["id"] == pid)
        return dict(p, latency_us=latency)

    def test_reduced_set_fits_what_it_sees_and_says_what_it_does_not(self):
        base = costs.table("trn1")
        slow = base.replace(dma_fixed_ns=base.dma_fixed_ns * 1.25)
        ms = []
        # four DMA probes pin the four short-row DMA fields, nothing else
        for pid in ("dma_chain", "dma_rows_64b", "dma_rows_512b", "dma_transpose"):
            p = self.probe(pid, 1.0)
            k = fit_device.load_kernels([p], "trn1", KERNELS)[0]
            ms.append(dict(p, latency_us=k.latency_us(slow)))
        code, out = self.run_fit({"target": "trn1", "measurements": ms})
        self.assertEqual(code, 0, out)
        params = {p["name"]: p for p in out["parameters"]}
        for name in ("dma_fixed_ns", "dma_efficiency", "dma_descriptor_bytes",
                     "dma_transpose_efficiency"):
            self.assertTrue(params[name]["identified"], name)
        self.assertAlmostEqual(params["dma_fixed_ns"]["change_pct"], 25.0, delta=1.0)
        self.assertLess(abs(params["dma_efficiency"]["change_pct"]), 1.0)
        for name in ("vector_tt_cycles_per_elem", "gpsimd_elems_per_cycle_32",
                     "scalar_fixed_cycles", "dma_stream_bytes_per_ns"):
            self.assertFalse(params[name]["identified"], name)
            self.assertAlmostEqual(params[name]["fitted"], params[name]["shipped"],
                                   delta=1e-3 * params[name]["shipped"])
        self.assertEqual({r["id"] for r in out["residuals"]},
                         {"dma_chain", "dma_rows_64b", "dma_rows_512b", "dma_transpose"})
        r = next(r for r in out["residuals"] if r["id"] == "dma_chain")
        self.assertLess(r["error_pct_before"], -15)
        self.assertLess(abs(r["error_pct_after"]), 0.5)
        self.assertGreater(out["cpu_s"], 0)
        self.assertEqual(out["target"], "trn1")

    def test_base_table_is_the_starting_point(self):
        base = costs.table("trn1")
        slow = base.replace(dma_fixed_ns=base.dma_fixed_ns * 1.25)
        p = self.probe("dma_chain", 1.0)
        k = fit_device.load_kernels([p], "trn1", KERNELS)[0]
        with tempfile.TemporaryDirectory() as d:
            table = os.path.join(d, "base.json")
            with open(table, "w") as f:
                json.dump({"target": "trn1", "name": "b",
                           "values": {"dma_fixed_ns": slow.dma_fixed_ns}}, f)
            code, out = self.run_fit({"target": "trn1",
                                      "measurements": [dict(p, latency_us=k.latency_us(slow))]},
                                     extra=["--base-table", table])
            self.assertEqual(code, 0, out)
            params = {x["name"]: x for x in out["parameters"]}
            self.assertEqual(params["dma_fixed_ns"]["shipped"], slow.dma_fixed_ns)
            self.assertLess(abs(out["residuals"][0]["error_pct_before"]), 0.01)
            with open(table, "w") as f:
                json.dump({"target": "trn1", "values": {"dma_fixed_ns": "slow"}}, f)
            code, out = self.run_fit({"target": "trn1", "measurements": [p]},
                                     extra=["--base-table", table])
            self.assertEqual(code, 2)
            self.assertIn("dma_fixed_ns must be", out["error"])

    def test_bad_input_is_exit_2_with_a_message(self):
        p = self.probe("dma_chain", 10.0)
        cases = [
            ("not json", "not valid JSON"),
            ({"target": "trn2", "measurements": [p]}, "for target 'trn2'"),
            ({"target": "trn1", "measurements": []}, "no measurements"),
            ({"target": "trn1", "measurements": [dict(p, latency_us=-1)]}, "positive number"),
            ({"target": "trn1", "measurements": [dict(p, kernel="/nonexistent.py")]},
             "not found"),
            ({"target": "trn1", "measurements": [p, p]}, "twice"),
        ]
        for doc, words in cases:
            code, out = self.run_fit(doc)
            self.assertEqual(code, 2, (doc, out))
            self.assertIn(words, out["error"])
        code, out = self.run_fit({"target": "trn1", "measurements": [p]}, target="trn9")
        self.assertEqual(code, 2)
        self.assertIn("target must be", out["error"])
        with tempfile.TemporaryDirectory() as d:
            broken = os.path.join(d, "broken.py")
            with open(broken, "w") as f:
                f.write("def kernel(x, reps):\n    return x +* 1\n")
            code, out = self.run_fit({"target": "trn1",
                                      "measurements": [dict(p, kernel=broken)]})
        self.assertEqual(code, 2, out)
        self.assertIn("cannot run on the simulator", out["error"])
        self.assertIn("compile_error", out["error"])

    def test_hidden_factors_prints_the_hidden_table(self):
        p = subprocess.run([sys.executable, HIDDEN, "--seed", "3", "--target", "trn1"],
                           stdout=subprocess.PIPE, check=True)
        out = json.loads(p.stdout.decode())
        hidden = costs.perturbed_table(3, "trn1")
        self.assertEqual(out["values"], costs.values_of(hidden))
        self.assertEqual(out["digest"], costs.digest(hidden))
        self.assertEqual(set(out["factors"]), set(costs.calibratable("trn1")))


if __name__ == "__main__":
    unittest.main()
