"""Reference modules (get_inputs/forward, NKIBench's format) as problems, the relative-L2
tolerance mode, positional binding, percent of peak, and the binding / uninitialised
accumulator messages. Fixtures: tests/python/harness/fixtures/nkibench (own small kernels)."""
import os
import unittest

import numpy as np

from tests.python.harness import util
from tests.python.harness.util import autocomp_harness, write

FIX = os.path.join(util.FIXTURES, "nkibench")
SILU_REF = os.path.join(FIX, "reference", "silu_M256_N512.py")
SILU_KERNEL = os.path.join(FIX, "kernels", "silu_M256_N512.py")
ROWSUM_REF = os.path.join(FIX, "reference", "rowsum_M128.py")
ROWSUM_KERNEL = os.path.join(FIX, "kernels", "rowsum_uninitialised.py")


def read(path):
    with open(path) as f:
        return f.read()


def run(command, kernel, problem, *extra):
    return autocomp_harness.run([command, "--kernel", kernel, "--problem", problem,
                                 "--no-ref-cache"] + list(extra))


class LoadingFormats(unittest.TestCase):
    def test_reference_module_defaults(self):
        from harnesslib.problem import load_problem
        p = load_problem(SILU_REF)
        self.assertEqual(p.format, "reference-module")
        self.assertEqual(p.seeds, (0, 21, 42, 63, 84))
        self.assertEqual((p.bind, p.tolerance, p.rel_l2), ("position", "rel_l2", 2e-5))

    def test_inputs_seeded_like_numpy_global_generator(self):
        from harnesslib.problem import load_problem
        p = load_problem(SILU_REF)
        inputs = p.make_inputs(42)
        np.random.seed(42)
        expected = np.random.normal(size=(256, 512)).astype(np.float32).reshape(128, 2, 512)
        self.assertEqual(list(inputs), ["x"])  # forward's parameter name
        np.testing.assert_array_equal(inputs["x"], expected)
        ref = p.make_reference(inputs, 42)
        np.testing.assert_allclose(ref[0], expected.reshape(256, 512)
                                   / (1 + np.exp(-expected.reshape(256, 512))), rtol=1e-6)
        # the kernel's layout goes back through transform_nki_outputs
        self.assertEqual(p.transform_outputs([inputs["x"]], ref)[0].shape, (256, 512))

    def test_no_format_names_what_each_needs(self):
        from harnesslib.failures import HarnessFailure
        from harnesslib.problem import load_problem
        with util.TempDir() as d:
            path = write(d, "p.py", "def get_inputs():\n    return []\n")
            with self.assertRaises(HarnessFailure) as cm:
                load_problem(path)
        msg = cm.exception.message
        self.assertEqual(cm.exception.kind, "problem_error")
        for needed in ("inputs() and reference()", "get_inputs() and forward()",
                       "transform_nki_outputs()", "It defines get_inputs()"):
            self.assertIn(needed, msg)

    def test_scalars_pass_through_and_reach_forward(self):
        from harnesslib.problem import load_problem
        with util.TempDir() as d:
            path = write(d, "p.py", """
                import numpy as np
                def get_inputs():
                    return [np.random.normal(size=(4, 4)).astype(np.float32), 1e-5]
                def forward(x, eps):
                    return x + eps
                """)
            p = load_problem(path)
            inputs = p.make_inputs(0)
            self.assertEqual(inputs["eps"], 1e-5)
            self.assertEqual(p.make_reference(inputs, 0)[0].shape, (4, 4))


class RelativeL2(unittest.TestCase):
    def test_mode(self):
        from harnesslib.compare import compare_outputs
        ref = np.ones((64, 64), np.float32)
        near = ref.copy()
        near[0, 0] += 1e-4   # ||d|| / ||ref|| = 1e-4 / 64 ~ 1.6e-6: passes rel L2
        far = ref * (1 + 1e-4)  # 1e-4 everywhere: fails rel L2 at 2e-5
        self.assertTrue(compare_outputs([near], [ref], tolerance="rel_l2")[0])
        ok, _, rel, msg = compare_outputs([far], [ref], tolerance="rel_l2")
        self.assertFalse(ok)
        self.assertIn("relative L2 error", msg)
        # the element-wise rule judges the same outputs differently
        spike = ref.copy()
        spike[0, 0] = 1.01
        self.assertFalse(compare_outputs([spike], [ref])[0])
        self.assertTrue(compare_outputs([spike], [ref], tolerance="rel_l2",
                                        rel_l2_tol=1e-3)[0])


class Counting(unittest.TestCase):
    def test_counts_by_operation_kind(self):
        from harnesslib import peaks

        def reference(x, w, eps):
            s = np.sum(np.square(x), axis=1, keepdims=True)   # 2 per element of x
            y = x / np.sqrt(s / x.shape[1] + eps)               # sqrt on s, divide on x
            return np.maximum(y @ w, 0.0), np.dot(x, w)          # constant max is free
        x = np.ones((8, 16), np.float32)
        w = np.ones((16, 4), np.float32)
        vector, matmul, outs = peaks.count_reference(reference, {"x": x, "w": w, "eps": 1e-5})
        self.assertEqual(vector, 8 * 16 * 3 + 8)
        self.assertEqual(matmul, 2 * (2 * 8 * 4 * 16))
        self.assertEqual([type(o) for o in outs], [np.ndarray, np.ndarray])

    def test_rule_bound_and_precision(self):
        from harnesslib import peaks
        r = peaks.accelopt(200.0, 0, 23.75e12 * 1e-3, 0, "trn1")  # 1 ms of fp32 matmul
        self.assertEqual((r["bound"], round(r["theoretical_us"], 6)), ("matmul", 1000.0))
        self.assertAlmostEqual(r["percent"], 500.0)
        low = peaks.accelopt(None, 0, 23.75e12 * 1e-3, 0, "trn1",
                             peaks.matmul_precision(["bfloat16"]))
        self.assertAlmostEqual(low["theoretical_us"], 250.0)
        self.assertNotIn("percent", low)
        self.assertEqual(peaks.matmul_precision(["float32"]), "float32")
        self.assertIsNone(peaks.accelopt(1.0, 1, 1, 1, "trn3"))

    def test_a_launch_on_two_cores_has_twice_each_peak(self):
        # one physical core's peaks; LNC=2 spans two, so a kernel using both cannot pass 100%
        from harnesslib import peaks
        one = peaks.accelopt(100.0, 0, 0, 362 * peaks.GIB * 1e-4, "trn2")
        two = peaks.accelopt(100.0, 0, 0, 362 * peaks.GIB * 1e-4, "trn2", cores=2)
        self.assertAlmostEqual(one["theoretical_us"], 100.0)
        self.assertAlmostEqual(two["theoretical_us"], 50.0)
        self.assertAlmostEqual(two["percent"], 50.0)
        self.assertEqual((one["cores"], two["cores"]), (1, 2))
        self.assertAlmostEqual(two["peak_hbm_gibps"], 2 * one["peak_hbm_gibps"])


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class OnTheSimulator(unittest.TestCase):
    def test_reference_module_evaluates_with_percent_of_peak(self):
        out = run("evaluate", SILU_KERNEL, SILU_REF, "--target", "trn1")
        self.assertEqual(out["status"], "ok", out.get("failure"))
        self.assertEqual(out["problem"]["bind"], "position")
        self.assertEqual([s["seed"] for s in out["verify"]["seeds"]], [0, 21, 42, 63, 84])
        peak = out["profile"]["percent_of_peak"]
        acc = peak["rules"][0]
        self.assertEqual(acc["rule"], "accelopt")
        # silu counts three element-wise operations per element (the constant add is free)
        self.assertEqual(acc["vector_flops"], 3 * 256 * 512)
        self.assertEqual(acc["min_bytes"], 2 * 256 * 512 * 4)
        self.assertAlmostEqual(acc["peak_vector_gflops"], 286.72)
        self.assertAlmostEqual(acc["peak_matmul_tflops"], 23.75)
        self.assertAlmostEqual(acc["peak_hbm_gibps"], 410.0)
        latency = out["benchmark"]["latency_us"]["min"]
        self.assertAlmostEqual(acc["percent"], 100 * acc["theoretical_us"] / latency)
        roof = out["profile"]["roofline"]
        self.assertAlmostEqual(roof["pct_of_peak_accelopt"], acc["percent"])
        self.assertIn("pct_of_peak_roofline", roof)

    def test_counts_kept_with_a_cached_reference(self):
        # a slow reference is cached (with fixed seeds: drawn ones are never asked again); its
        # operation counts are kept with it, so a later
        # profile served from the cache does not run the reference again to count it
        with util.TempDir() as d:
            calls = os.path.join(d, "calls")
            problem = write(d, "p.py", """
                import time
                import numpy as np
                def get_inputs():
                    return [np.random.normal(size=(256, 512)).astype(np.float32)]
                def forward(x):
                    with open(%r, "a") as f:
                        f.write("x")
                    time.sleep(1.1)
                    return x / (1 + np.exp(-x))
                def transform_to_nki_inputs(inputs):
                    return [np.reshape(inputs[0], (128, 2, 512))]
                def transform_nki_outputs(k_res, ref):
                    return [np.reshape(k_res, ref.shape)]
                """ % calls)
            cache = os.path.join(d, "cache")
            args = ["--kernel", SILU_KERNEL, "--problem", problem, "--seeds", "0",
                    "--ref-cache", cache, "--target", "trn1", "--fixed-seeds"]
            first = autocomp_harness.run(["evaluate"] + args)
            second = autocomp_harness.run(["evaluate"] + args)
            with open(calls) as f:
                self.assertEqual(f.read(), "x")  # only the first run's reference
        for out in (first, second):
            self.assertEqual(out["status"], "ok", out.get("failure"))
            acc = out["profile"]["percent_of_peak"]["rules"][0]
            self.assertEqual(acc["vector_flops"], 3 * 256 * 512)

    def test_reference_that_cannot_be_counted_still_verifies(self):
        with util.TempDir() as d:
            problem = write(d, "p.py", read(SILU_REF).replace(
                "def forward(x):\n",
                "def forward(x):\n    if type(x) is not np.ndarray:\n"
                "        raise TypeError('plain arrays only')\n"))
            out = run("evaluate", SILU_KERNEL, problem, "--target", "trn1", "--seeds", "0")
        self.assertEqual(out["status"], "ok", out.get("failure"))
        peak = out["profile"]["percent_of_peak"]
        self.assertNotIn("accelopt", [r["rule"] for r in peak["rules"]])
        self.assertIn("plain arrays only", peak["notes"][0])
        self.assertIn("VECTOR_FLOPS", peak["notes"][0])

    def test_declared_counts_win(self):
        with util.TempDir() as d:
            problem = write(d, "p.py", read(SILU_REF) + "\nVECTOR_FLOPS = 1e9\n"
                            "MATMUL_FLOPS = 0\nMIN_BYTES = 4096\n")
            out = run("profile", SILU_KERNEL, problem, "--target", "trn1")
        acc = out["profile"]["percent_of_peak"]["rules"][0]
        self.assertEqual((acc["vector_flops"], acc["min_bytes"], acc["bound"]),
                         (1e9, 4096, "vector"))

    def test_signature_of_a_reference_module(self):
        out = autocomp_harness.run(["signature", "--problem", SILU_REF])
        self.assertEqual(out["status"], "ok", out.get("failure"))
        self.assertEqual(out["problem"]["signature"], "x:float32[128,2,512]")

    def test_trn2_peaks_differ(self):
        out = run("profile", SILU_KERNEL, SILU_REF, "--target", "trn2")
        acc = out["profile"]["percent_of_peak"]["rules"][0]
        self.assertAlmostEqual(acc["peak_vector_gflops"], 245.76)
        self.assertIn("derived", acc["source"])

    def test_wrong_kernel_output_fails_rel_l2(self):
        with util.TempDir() as d:
            kernel = read(SILU_KERNEL).replace("nl.add(e, 1.0)", "nl.add(e, 1.001)")
            out = run("verify", write(d, "k.py", kernel), SILU_REF, "--target", "trn1")
        self.assertEqual(out["failure"]["kind"], "mismatch")
        self.assertIn("relative L2 error", out["failure"]["message"])

    def test_uninitialised_loop_reduce_runs_as_on_hardware(self):
        """The first nl.loop_reduce into an nl.ndarray starts from its value (NKIBench's
        compiler-emitted kernels rely on it; backends/nkisim/MODEL.md)."""
        out = run("verify", ROWSUM_KERNEL, ROWSUM_REF, "--target", "trn2")
        self.assertEqual(out["status"], "ok", out.get("failure"))

    def test_uninitialised_accumulation_is_explained(self):
        with util.TempDir() as d:
            kernel = read(ROWSUM_KERNEL).replace(
                "acc[...] = nl.loop_reduce(s, op=np.add, loop_indices=[i])", "acc[...] += s")
            out = run("verify", write(d, "k.py", kernel), ROWSUM_REF, "--target", "trn2")
        failure = out["failure"]
        self.assertEqual(failure["kind"], "mismatch")
        self.assertIn("accumulates into acc with +=", failure["message"])
        self.assertIn("Initialise acc before the loop", failure["message"])
        self.assertEqual(failure["line"], 9)

    def test_initialised_loop_reduce_passes(self):
        with util.TempDir() as d:
            kernel = read(ROWSUM_KERNEL).replace(
                "acc = nl.ndarray((128, 1), dtype=np.float32, buffer=nl.sbuf)",
                "acc = nl.zeros((128, 1), dtype=np.float32, buffer=nl.sbuf)")
            out = run("verify", write(d, "k.py", kernel), ROWSUM_REF, "--target", "trn2")
        self.assertEqual(out["status"], "ok", out.get("failure"))

    def test_keyword_mismatch_is_explained(self):
        out = run("verify", os.path.join(FIX, "keyword_kernel.py"),
                  os.path.join(FIX, "keyword_problem.py"), "--target", "trn2")
        msg = out["failure"]["message"]
        self.assertIn("unexpected keyword argument 'a'", msg)
        self.assertIn("named like the problem's input (a)", msg)
        self.assertIn('BIND = "position"', msg)

    def test_unknown_keyword_of_an_nki_call_is_not_a_binding_problem(self):
        from harnesslib.failures import explain_binding
        text = "TypeError: exp() got an unexpected keyword argument 'fast' (at k.py:3 in kernel)"
        self.assertEqual(explain_binding(text, "kernel", ["x"]), text)
        missing = "TypeError: kernel() missing 1 required positional argument: 'y'"
        self.assertIn("needs 'y', which the problem's inputs (x)",
                      explain_binding(missing, "kernel", ["x"]))

    def test_bind_position_in_a_problem_file(self):
        with util.TempDir() as d:
            problem = read(os.path.join(FIX, "keyword_problem.py")) + \
                '\nBIND = "position"\n'
            out = run("verify", os.path.join(FIX, "keyword_kernel.py"),
                      write(d, "p.py", problem), "--target", "trn2", "--seeds", "0")
        self.assertEqual(out["status"], "ok", out.get("failure"))

    def test_positional_count_mismatch(self):
        with util.TempDir() as d:
            kernel = read(SILU_KERNEL).replace("def kernel(v1):", "def kernel(v1, v2):")
            out = run("verify", write(d, "k.py", kernel), SILU_REF, "--target", "trn1")
        self.assertEqual(out["failure"]["kind"], "compile_error")
        self.assertIn("passes 1 input(s) by position", out["failure"]["message"])


if __name__ == "__main__":
    unittest.main()
