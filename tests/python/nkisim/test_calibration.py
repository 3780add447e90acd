"""The calibration anchors (backends/nkisim/calibration/anchors.json): every public hardware
figure of the training set is there, and every anchor the repository's own kernels
reproduce stays within its bound, with the conv1d ladder in its published order.

Anchors reproduced by published kernels run too when their local checkouts are named
(never committed): NKISIM_CONV_DIR (nki-samples contributed/neuron-team-kernels at
0898a77: conv.py, common.py, transpose.py), NKISIM_NKIBENCH (AccelOpt's NKIBench/),
NKISIM_NKI_SAMPLES (aws-neuron/nki-samples). Each is skipped without its directory."""
import os
import sys
import unittest

from . import _util  # noqa: F401
import nkisim

HERE = os.path.dirname(os.path.abspath(__file__))
CAL = os.path.join(HERE, "..", "..", "..", "backends", "nkisim", "calibration")
sys.path.insert(0, CAL)

import calibrate  # noqa: E402

LADDER = ["conv1d-0", "conv1d-1", "conv1d-2", "conv1d-3", "conv1d-4", "conv1d-5", "conv1d-6"]


class AnchorFileTest(unittest.TestCase):
    def test_every_public_figure_is_an_anchor(self):
        ids = {a["id"] for a in calibrate.load_anchors()}
        expected = set(LADDER) | {"conv1d-0-vendor", "double-row-fp8", "opt-intro-block-mn",
                                  "opt-intro-block-mnk"}
        expected |= {"nkibench-" + k for k in ("adamw", "silu", "bmm", "matmul",
                                               "add_rmsnorm_matmul", "mamba",
                                               "transpose_matmul")}
        expected |= {"matmul-tiled", "matmul-hoist", "matmul-block-mn", "matmul-block-mnk"}
        self.assertEqual(expected - ids, set())
        for a in calibrate.load_anchors():
            for key in ("source", "target", "shape", "does"):
                self.assertIn(key, a, a["id"])


class Conv1dLadderTest(unittest.TestCase):
    """The conv1d ladder (trn1): own kernels for steps 0, 3, 4, 5 and 6 (steps 1 and 2
    change no instruction, so step 0's kernel stands for them)."""

    @classmethod
    def setUpClass(cls):
        nkisim.activate()  # another test module may have deactivated the nki modules
        rows = calibrate.run(calibrate.load_anchors(), {}, "trn1", set(LADDER))
        cls.sim = {a["id"]: ms for a, ms, _ in rows}
        cls.hw = {a["id"]: a["latency_ms"] for a, _, _ in rows}
        cls.bound = {a["id"]: a.get("bound", 1.6) for a, _, _ in rows}

    def test_each_step_within_its_bound(self):
        for i in LADDER:
            r = self.sim[i] / self.hw[i]
            self.assertLessEqual(max(r, 1 / r), self.bound[i], (i, self.sim[i], self.hw[i]))

    def test_published_order_and_step_ratios(self):
        for a, b in zip(LADDER, LADDER[1:]):
            self.assertGreaterEqual(self.sim[a], self.sim[b] * 0.999, (a, b))
            hw_step = self.hw[a] / self.hw[b]
            sim_step = self.sim[a] / self.sim[b]
            self.assertLessEqual(max(sim_step / hw_step, hw_step / sim_step), 1.5, (a, b))


class PublishedKernelsTest(unittest.TestCase):
    def check(self, dirs, prefix):
        nkisim.activate()
        rows = calibrate.run(calibrate.load_anchors(), dirs, "trn1")
        rows = [(a, ms, err) for a, ms, err in rows if a["id"].startswith(prefix)
                and (a.get("external") or "").split(":")[0] in ("nkibench", "nki-samples",
                                                                "nki-samples-0898a77")]
        self.assertTrue(rows)
        for a, ms, err in rows:
            self.assertIsNotNone(ms, (a["id"], err))
            r = ms / a["latency_ms"]
            self.assertLessEqual(max(r, 1 / r), a.get("bound", 1.6), (a["id"], ms))

    @unittest.skipUnless(os.environ.get("NKISIM_CONV_DIR"), "NKISIM_CONV_DIR not set")
    def test_vendor_conv1d(self):
        self.check({"conv": os.environ["NKISIM_CONV_DIR"]}, "conv1d-0-vendor")

    @unittest.skipUnless(os.environ.get("NKISIM_NKIBENCH"), "NKISIM_NKIBENCH not set")
    def test_nkibench(self):
        self.check({"nkibench": os.environ["NKISIM_NKIBENCH"]}, "nkibench-")

    @unittest.skipUnless(os.environ.get("NKISIM_NKI_SAMPLES"), "NKISIM_NKI_SAMPLES not set")
    def test_matmul_tutorial(self):
        self.check({"nki_samples": os.environ["NKISIM_NKI_SAMPLES"]}, "matmul-")


if __name__ == "__main__":
    unittest.main()
