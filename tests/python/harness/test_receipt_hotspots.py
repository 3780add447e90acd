"""Receipts in every result, and profile hotspots with the kernel's source text."""
import unittest

from tests.python.harness import util
from tests.python.harness.test_harness_sim import ADD_KERNEL, ADD_PROBLEM
from tests.python.harness.util import autocomp_harness, write

RECEIPT_FIELDS = ("device", "target", "harness_version", "seeds", "warmup", "iters",
                  "input_signature")


class HotspotRows(unittest.TestCase):
    def test_text_share_order_and_limit(self):
        with util.TempDir() as d:
            path = write(d, "k.py", "line one\n    line two   \n" + "x = 1  # " + "y" * 100 + "\n")
            rows = [{"line": 1, "engine": "vector", "instructions": 4, "time_us": 2.0},
                    {"line": 2, "engine": "dma", "instructions": 1, "time_us": 5.0},
                    {"line": 3, "engine": "scalar", "instructions": 1, "time_us": 1.0},
                    {"line": 99, "engine": "tensor", "instructions": 1, "time_us": 0.5},
                    "not a row", {"line": 1, "time_us": "n/a"}]
            rows += [{"line": 1, "engine": "gpsimd", "instructions": 1, "time_us": 0.1}] * 10
            out = autocomp_harness.hotspot_rows(rows, 10.0, path)
        self.assertEqual(len(out), autocomp_harness.HOTSPOT_ROWS)
        self.assertEqual([r["line"] for r in out[:4]], [2, 1, 3, 99])
        self.assertEqual(out[0]["text"], "line two")
        self.assertAlmostEqual(out[0]["share_pct"], 50.0)
        self.assertEqual(len(out[2]["text"]), autocomp_harness.HOTSPOT_TEXT_CHARS)
        self.assertTrue(out[2]["text"].endswith("..."))
        self.assertEqual(out[3]["text"], "")

    def test_waits_pass_through_from_any_result_object(self):
        class Result:
            hotspots = [{"line": 1, "engine": "dma", "instructions": 2, "time_us": 3.0}]
            waits = [{"engine": "vector", "waiting_on": "dma", "idle_pct": 40.0, "line": 1}]

        class Device:
            @staticmethod
            def profile(result):
                return {"metrics": {}, "roofline": {}, "bottleneck": "unknown"}

            @staticmethod
            def latency_us(result):
                return 6.0

        with util.TempDir() as d:
            prof = autocomp_harness.sim_profile(Device(), Result(), write(d, "k.py", "a = 1\n"))
        self.assertEqual(prof["waits"], Result.waits)
        self.assertEqual(prof["hotspots"][0]["text"], "a = 1")
        self.assertAlmostEqual(prof["hotspots"][0]["share_pct"], 50.0)


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class Receipts(unittest.TestCase):
    def run_h(self, command, kernel=ADD_KERNEL, extra=()):
        with util.TempDir() as d:
            return autocomp_harness.run([command, "--kernel", write(d, "k.py", kernel),
                                         "--problem", write(d, "p.py", ADD_PROBLEM),
                                         "--seeds", "0,1", "--no-ref-cache"] + list(extra))

    def test_evaluate_receipt_and_hotspots(self):
        out = self.run_h("evaluate", extra=["--warmup", "1", "--iters", "3"])
        self.assertEqual(out["status"], "ok", out)
        r = out["receipt"]
        for field in RECEIPT_FIELDS + ("simulator_version", "profile_format", "profile_schema"):
            self.assertIn(field, r)
        self.assertEqual(r["input_signature"], out["problem"]["signature"])
        self.assertEqual(r["harness_version"], out["harness_version"])
        self.assertEqual((r["seeds"], r["warmup"], r["iters"]), ([0, 1], 1, 3))
        self.assertEqual(r["profile_format"], "nkisim")
        hot = out["profile"]["hotspots"]
        self.assertTrue(hot)
        self.assertLessEqual(len(hot), 8)
        lines = ADD_KERNEL.lstrip("\n").splitlines()
        for row in hot:
            self.assertEqual(row["text"], lines[row["line"] - 1].strip()[:80])
            self.assertGreater(row["share_pct"], 0)

    def test_failed_results_carry_a_receipt(self):
        out = self.run_h("verify", kernel=ADD_KERNEL.replace("nl.add", "nl.subtract"))
        self.assertEqual(out["failure"]["kind"], "mismatch")
        self.assertEqual(out["receipt"]["device"], "sim")
        self.assertIn("input_signature", out["receipt"])

    def test_fake_device_receipt(self):
        out = autocomp_harness.run(["benchmark", "--device", "fake", "--fake-ms", "0",
                                    "--iters", "2"])
        self.assertEqual(out["receipt"]["device"], "fake")
        self.assertEqual(out["receipt"]["iters"], 2)


if __name__ == "__main__":
    unittest.main()
