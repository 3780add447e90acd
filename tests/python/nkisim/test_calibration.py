"""The calibration anchors (backends/nkisim/calibration/anchors.json): every public hardware
figure of the training set is there, and every anchor the repository's own kernels
reproduce (conv1d ladder, NKIBench) stays within its bound, with the conv1d ladder in its
published order.

Anchors reproduced by published kernels run too when their local checkouts are named
(never committed): NKISIM_CONV_DIR (nki-samples contributed/neuron-team-kernels at
0898a77: conv.py, common.py, transpose.py), NKISIM_NKIBENCH (AccelOpt's NKIBench/),
NKISIM_NKI_SAMPLES (aws-neuron/nki-samples). Each is skipped without its directory."""
import os
import sys
import unittest

import numpy as np

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


NKIBENCH = ["nkibench-" + k for k in ("adamw", "silu", "bmm", "matmul", "add_rmsnorm_matmul",
                                       "mamba", "transpose_matmul")]


class OwnNkibenchKernelsTest(unittest.TestCase):
    """The NKIBench training anchors run from this repository's own kernels (no checkout):
    each within its bound, and the HBM traffic the trn1 profile reports where the model
    claims to reproduce it (add_rmsnorm_matmul: the compiler keeps w's tiles)."""

    @classmethod
    def setUpClass(cls):
        nkisim.activate()
        rows = calibrate.run(calibrate.load_anchors(), {}, "trn1", set(NKIBENCH))
        cls.rows = {a["id"]: (a, ms, err) for a, ms, err in rows}

    def test_every_nkibench_anchor_runs_within_its_bound(self):
        self.assertEqual(set(self.rows), set(NKIBENCH))
        for i, (a, ms, err) in self.rows.items():
            self.assertIsNotNone(ms, (i, err))
            r = ms / a["latency_ms"]
            self.assertLessEqual(max(r, 1 / r), a.get("bound", 1.6), (i, ms))

    def test_add_rmsnorm_matmul_reads_what_trn1_read(self):
        import nkibench_kernels as K
        a = self.rows["nkibench-add_rmsnorm_matmul"][0]
        ins = {k: nkisim.TensorSpec(*v) if isinstance(v, tuple) else v
               for k, v in K.SHAPES["add_rmsnorm_matmul"].items()}
        res = nkisim.simulate(K.add_rmsnorm_matmul, ins, target="trn1", numerics=False)
        read_mb = res.metrics["hbm_read_bytes"] / 1e6
        self.assertLess(abs(read_mb / a["hbm_read_mb"] - 1), 0.05, read_mb)


class OwnNkibenchKernelsMatchNumpyTest(unittest.TestCase):
    """The own NKIBench kernels compute what their anchors describe (reduced shapes)."""

    def setUp(self):
        nkisim.activate()
        import nkibench_kernels
        self.k = nkibench_kernels
        self.rng = np.random.default_rng(11)

    def rand(self, *shape):
        return self.rng.standard_normal(shape).astype(np.float32)

    def run_kernel(self, fn, **inputs):
        return nkisim.simulate(fn, inputs, target="trn1").outputs[0]

    def test_adamw(self):
        th, g, m = self.rand(200, 1024), self.rand(200, 1024), self.rand(200, 1024)
        v = np.abs(self.rand(200, 1024))
        m2 = 0.9 * m + 0.1 * g
        v2 = 0.999 * v + 0.001 * g * g
        ref = th - 1e-5 * th - 0.01 * m2 / (np.sqrt(1000 * v2) + 1e-8)
        got = self.run_kernel(self.k.adamw, theta=th, grad=g, m=m, v=v)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)

    def test_silu(self):
        x = self.rand(128, 2, 1024)
        got = self.run_kernel(self.k.silu, x=x)
        np.testing.assert_allclose(got, x / (1 + np.exp(-x)), rtol=1e-4, atol=1e-5)

    def test_bmm(self):
        a, b = self.rand(2, 1024, 64), self.rand(2, 64, 1024)
        got = self.run_kernel(self.k.bmm, a=a, b=b)
        np.testing.assert_allclose(got.reshape(2, 1024, 1024), a @ b, rtol=1e-3, atol=1e-3)

    def test_matmul(self):
        a, b = self.rand(2, 128, 8, 128), self.rand(8, 128, 1024)
        A = a.reshape(256, 1024)
        got = self.run_kernel(self.k.matmul, a=a, b=b)
        np.testing.assert_allclose(got.reshape(256, 1024), A @ b.reshape(1024, 1024),
                                   rtol=1e-3, atol=1e-2)

    def test_add_rmsnorm_matmul(self):
        x, z, w, g = self.rand(256, 256), self.rand(256, 256), self.rand(256, 512), \
            self.rand(256)
        s = x + z
        ref = (s / np.sqrt((s * s).mean(axis=1, keepdims=True) + 1e-5) * g) @ w
        got = self.run_kernel(self.k.add_rmsnorm_matmul, x=x, w=w, eps=1e-5, z=z, g=g)
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-2)

    def test_mamba(self):
        ch, seq, st = 128, 32, 2
        delta, u = np.abs(self.rand(ch, seq)) * 0.1, self.rand(ch, seq)
        a, b, c = -np.abs(self.rand(ch, st)), self.rand(st, seq), self.rand(st, seq)
        ref = np.zeros((ch, seq), np.float32)
        for s in range(st):
            h = np.zeros(ch, np.float32)
            for t in range(seq):
                h = np.exp(delta[:, t] * a[:, s]) * h + delta[:, t] * u[:, t] * b[s, t]
                ref[:, t] += c[s, t] * h
        got = self.run_kernel(self.k.mamba, delta=delta, u=u, a=a, b=b, c=c)
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)

    def test_transpose_matmul(self):
        lhs, rhs = self.rand(128, 2, 1024), self.rand(128, 2, 1536)
        ref = lhs.reshape(256, 1024).T @ rhs.reshape(256, 1536)
        got = self.run_kernel(self.k.transpose_matmul, lhs=lhs, rhs=rhs)
        np.testing.assert_allclose(got.reshape(1024, 1536), ref, rtol=1e-3, atol=1e-2)


class Trn2DoubleRowTest(unittest.TestCase):
    """The trn2 double-row fp8 matmul anchor (a published P99 bound of 320 us) runs from
    the own kernel within its bound, and the kernel computes A @ B."""

    def test_within_the_published_bound(self):
        nkisim.activate()
        rows = calibrate.run(calibrate.load_anchors(), {}, "trn2", {"double-row-fp8"})
        (a, ms, err), = rows
        self.assertIsNotNone(ms, err)
        self.assertLessEqual(ms, a["latency_ms_max"] * a.get("bound", 1.6), ms)

    def test_matches_numpy(self):
        nkisim.activate()
        import trn2_kernels
        rng = np.random.default_rng(1)
        m, k, n = 256, 4096, 512
        a, b = rng.random((m, k)).astype(np.float32), rng.random((k, n)).astype(np.float32)
        scale = np.abs(b).max(axis=0, keepdims=True) / 240.0
        bq = b / scale
        pairs = np.zeros((k // 2, 2 * n), np.float32)  # two K tiles side by side per 512
        for t in range(0, k // 128, 2):
            for c in range(n // 512):
                r = slice(t // 2 * 128, (t // 2 + 1) * 128)
                cols = slice(c * 512, (c + 1) * 512)
                pairs[r, c * 1024:c * 1024 + 512] = bq[t * 128:(t + 1) * 128, cols]
                pairs[r, c * 1024 + 512:(c + 1) * 1024] = bq[(t + 1) * 128:(t + 2) * 128, cols]
        res = nkisim.simulate(trn2_kernels.double_row_fp8,
                              {"a": a, "b_q": pairs,
                               "b_scale": np.broadcast_to(scale, (128, n)).copy()},
                              target="trn2", input_dtypes={"a": "bfloat16",
                                                           "b_q": "float8_e4m3",
                                                           "b_scale": "bfloat16"})
        ref = a @ b
        err = np.abs(np.asarray(res.outputs[0], np.float32) - ref).max() / np.abs(ref).max()
        self.assertLess(err, 0.03)  # fp8 operands


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
