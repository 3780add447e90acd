"""Physical floor: latencies below the problem's HBM traffic or FLOPS at peak are implausible."""
import json
import unittest

from tests.python.harness import util
from tests.python.harness.test_harness_sim import ADD_KERNEL, ADD_PROBLEM
from tests.python.harness.util import autocomp_harness, write

from harnesslib import floor  # noqa: E402


class FloorFigures(unittest.TestCase):
    def test_peaks_come_from_the_simulator_constants(self):
        p = floor.peaks("trn2")
        self.assertEqual(p["peak_hbm_gbps"], 362.0)
        self.assertAlmostEqual(p["peak_tflops"], 78.64, places=1)
        self.assertIn("constants.py", p["source"])
        self.assertIsNone(floor.peaks("trn9"))

    def test_hbm_and_compute_floor(self):
        f = floor.compute("trn2", "sim", 362e6, flops=78.6432e12 * 2e-3)
        self.assertAlmostEqual(f["hbm_floor_us"], 1000.0)
        self.assertAlmostEqual(f["compute_floor_us"], 2000.0)
        self.assertAlmostEqual(f["floor_us"], 2000.0)
        self.assertIsNone(floor.violation(2000.0, f, "trn2"))
        msg = floor.violation(10.0, f, "trn2")
        self.assertIn("10 us", msg)
        self.assertIn("2000 us", msg)
        self.assertIn("362 GB/s", msg)
        self.assertIn("TFLOPS", msg)

    def test_the_modelled_dma_floor_uses_the_sustained_dma_rate(self):
        # trn1: the cost table's long-row stream rate (300 B/ns) beats its short-row regime
        # (0.42 of the 272 B/ns DMA peak) and stays under HBM (410 B/ns)
        with open(floor.COST_TABLES_PATH) as fh:
            trn1 = json.load(fh)["trn1"]
        rate = max(0.42 * 272, trn1["dma_stream_bytes_per_ns"])
        self.assertEqual(trn1["dma_efficiency"], 0.42)
        f = floor.compute("trn1", "sim", rate * 1e6)
        self.assertAlmostEqual(f["dma_gbps"], rate)
        self.assertAlmostEqual(f["dma_floor_us"], 1000.0)
        self.assertLess(f["hbm_floor_us"], f["dma_floor_us"])
        # trn2: the DMA rate is capped by HBM
        self.assertAlmostEqual(floor.compute("trn2", "sim", 1e6)["dma_gbps"], 362.0)

    def test_the_modelled_floor_is_the_one_floor_and_the_physical_one_judges(self):
        f = floor.compute("trn1", "sim", 320e6)
        self.assertAlmostEqual(f["floor_us"], f["dma_floor_us"])
        self.assertAlmostEqual(f["physical_floor_us"], f["hbm_floor_us"])
        # a latency between the two floors is plausible (the physical floor judges)
        self.assertIsNone(floor.violation(0.5 * (f["floor_us"] + f["hbm_floor_us"]), f, "trn1"))
        self.assertIsNotNone(floor.violation(0.5 * f["hbm_floor_us"], f, "trn1"))

    @unittest.skipUnless(util.sim_available(), "nkisim not importable")
    def test_rates_per_row_length_are_the_simulators(self):
        from nkisim.machine import constants, costs  # noqa: PLC0415
        for name in ("trn1", "trn2"):
            target = constants.TARGETS[name]
            peak = costs.hbm_dma_peak(target)
            rates = floor.peaks(name)["dma_rates"]
            self.assertEqual(sorted(int(r) for r in rates), list(floor.ROW_BYTES))
            for row in floor.ROW_BYTES:
                want = costs.table(name).dma_rate(row, peak)
                self.assertAlmostEqual(floor.dma_rate(name, row), want, places=6)
                self.assertAlmostEqual(rates[str(row)], want, delta=0.05)
                # no row length beats the rate the floor assumes
                self.assertLessEqual(want, floor.peaks(name)["dma_gbps"] + 1e-9)
        self.assertIsNone(floor.dma_rate("trn9", 2048))

    def test_claude_md_states_the_same_rates(self):
        import os  # noqa: PLC0415
        root = os.path.dirname(os.path.dirname(floor.HARNESS_DIR))
        with open(os.path.join(root, "CLAUDE.md")) as fh:
            text = fh.read()
        for name in ("trn1", "trn2"):
            p = floor.peaks(name)
            row = "| %s GB/s | %s | %g |" % (
                name, " | ".join("%g" % p["dma_rates"][str(r)] for r in floor.ROW_BYTES),
                p["dma_gbps"])
            self.assertIn(row, text)

    def test_hardware_gets_slack(self):
        f = floor.compute("trn2", "neuron", 362e6)
        self.assertIsNone(floor.violation(600.0, f, "trn2"))
        self.assertIn("slack", floor.violation(400.0, f, "trn2"))

    def test_nki_dtype_sizes(self):
        self.assertEqual(floor.tensor_bytes((4, 8), "bfloat16", 4), 64)
        self.assertEqual(floor.tensor_bytes((4, 8), "float32"), 128)
        self.assertEqual(floor.tensor_bytes((10,), "float8_e4m3"), 10)


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class FloorInTheHarness(unittest.TestCase):
    def run_h(self, command, problem_text, target="trn2"):
        # trn3 takes kernels of the `nki` namespace only (harnesslib/sdkformats.py)
        kernel = ADD_KERNEL.replace("neuronxcc.nki", "nki") if target == "trn3" else ADD_KERNEL
        with util.TempDir() as d:
            return autocomp_harness.run([command, "--kernel", write(d, "k.py", kernel),
                                         "--problem", write(d, "p.py", problem_text),
                                         "--seeds", "0", "--no-ref-cache", "--target", target])

    def test_honest_kernel_is_above_its_floor(self):
        out = self.run_h("evaluate", ADD_PROBLEM)
        self.assertEqual(out["status"], "ok", out)
        fl = out["benchmark"]["floor"]
        self.assertEqual(fl["hbm_bytes"], 3 * 128 * 64 * 4)
        self.assertLess(fl["floor_us"], out["benchmark"]["latency_us"]["min"])

    def test_declared_flops_beyond_peak_is_implausible(self):
        for command in ("benchmark", "evaluate", "profile"):
            out = self.run_h(command, ADD_PROBLEM + "\nFLOPS = 1e15\n")
            self.assertEqual(out["status"], "failed")
            self.assertEqual(out["failure"]["kind"], "implausible", out["failure"])
            msg = out["failure"]["message"]
            self.assertIn("below the physical floor", msg)
            self.assertIn("1e+15 FLOPS", msg)

    def test_bad_flops_is_a_problem_error(self):
        # evaluate reads FLOPS before it releases the first seed's inputs, and still reports
        # a bad value where the floor is used (the benchmark), after a successful verify
        for command in ("benchmark", "evaluate"):
            out = self.run_h(command, ADD_PROBLEM + "\nFLOPS = 'many'\n")
            self.assertEqual(out["failure"]["kind"], "problem_error")
            self.assertEqual(out["failure"]["stage"], "benchmark")
        self.assertTrue(out["verify"]["seeds"][0]["ok"])

    def test_sim_refuses_targets_it_does_not_model(self):
        from harnesslib import floor
        self.assertEqual(self.run_h("verify", ADD_PROBLEM, target="trn3")["status"], "ok")
        orig = floor.peaks
        floor.peaks = lambda target: None   # a target without simulator constants
        try:
            out = self.run_h("verify", ADD_PROBLEM, target="trn3")
        finally:
            floor.peaks = orig
        self.assertEqual(out["failure"]["kind"], "unavailable")
        self.assertIn("trn3", out["failure"]["message"])


if __name__ == "__main__":
    unittest.main()
