"""The JSON contract of autocomp_harness.py on the simulator: one failure kind per way a
kernel or problem can go wrong, kernel selection, tolerance overrides, stdout hygiene."""
import json
import os
import unittest

from tests.python.harness import util
from tests.python.harness.util import autocomp_harness, write

HEADER = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
"""

ADD_KERNEL = HEADER + """

@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a[0:128, :])
    y = nl.load(b[0:128, :])
    nl.store(out[0:128, :], value=nl.add(x, y))
    return out
"""

ADD_PROBLEM = """
import numpy as np

def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((128, 64), dtype=np.float32),
            "b": rng.standard_normal((128, 64), dtype=np.float32)}

def reference(a, b):
    return a + b
"""


class SimContract(unittest.TestCase):
    def setUp(self):
        self._td = util.TempDir()
        self.dir = self._td.__enter__()
        self.problem = write(self.dir, "problem.py", ADD_PROBLEM)

    def tearDown(self):
        self._td.__exit__(None, None, None)

    def run_h(self, kernel_text, command="verify", problem=None, extra=()):
        kernel = write(self.dir, "kernel_%d.py" % abs(hash(kernel_text)), kernel_text)
        argv = [command, "--kernel", kernel, "--problem", problem or self.problem,
                "--no-ref-cache"] + list(extra)
        out = autocomp_harness.run(argv)
        json.dumps(out, allow_nan=False)   # always serialisable
        return out

    def assertFailure(self, out, kind, stage=None, line=None):
        self.assertEqual(out["status"], "failed", out)
        self.assertEqual(out["failure"]["kind"], kind, out["failure"])
        if stage:
            self.assertEqual(out["failure"]["stage"], stage)
        if line is not None:
            self.assertEqual(out["failure"]["line"], line, out["failure"])

    # -- success paths
    def test_verify_ok_reports_every_seed(self):
        out = self.run_h(ADD_KERNEL, extra=["--seeds", "3,4,5"])
        self.assertEqual(out["status"], "ok", out)
        self.assertTrue(out["verify"]["correct"])
        self.assertEqual([s["seed"] for s in out["verify"]["seeds"]], [3, 4, 5])
        for s in out["verify"]["seeds"]:
            self.assertTrue(s["ok"])
            self.assertLessEqual(s["max_abs_err"], 1e-6)
            self.assertLessEqual(s["rel_l2_err"], 1e-6)
        self.assertEqual(out["schema"], "autocomp-harness/1")
        self.assertIn(".nkisim.", out["harness_version"])
        self.assertEqual(out["kernel"]["name"], "add_kernel")

    def test_default_seeds_are_five(self):
        out = self.run_h(ADD_KERNEL)
        self.assertEqual(len(out["verify"]["seeds"]), 5)

    def test_evaluate_has_all_sections(self):
        out = self.run_h(ADD_KERNEL, "evaluate", extra=["--iters", "4", "--warmup", "1"])
        self.assertEqual(out["status"], "ok", out)
        bench = out["benchmark"]
        self.assertEqual((bench["warmup"], bench["iters"]), (1, 4))
        lat = bench["latency_us"]
        self.assertEqual(len(lat["samples"]), 4)
        self.assertGreater(lat["median"], 0)
        self.assertEqual(lat["min"], lat["max"])
        self.assertEqual(bench["method"], "simulated")
        self.assertIn("total_time", out["profile"]["metrics"])
        self.assertAlmostEqual(out["profile"]["metrics"]["total_time"] * 1e6, lat["median"], 3)
        self.assertIsInstance(out["profile"]["bottleneck"], str)
        self.assertEqual(set(out["timings_ms"]), {"load", "verify", "benchmark", "profile"})

    def test_benchmark_and_profile_alone(self):
        b = self.run_h(ADD_KERNEL, "benchmark")
        self.assertEqual(b["status"], "ok", b)
        self.assertNotIn("verify", b)
        self.assertEqual(len(b["benchmark"]["latency_us"]["samples"]), 10)
        p = self.run_h(ADD_KERNEL, "profile", extra=["--target", "trn1"])
        self.assertEqual(p["status"], "ok", p)
        self.assertEqual(p["target"], "trn1")
        self.assertNotIn("benchmark", p)
        self.assertIn("metrics", p["profile"])

    # -- failure kinds
    def test_syntax_error_is_compile_error_with_line(self):
        text = ADD_KERNEL.replace("    return out", "    return out +* 1")
        out = self.run_h(text)
        line = text.lstrip("\n").splitlines().index("    return out +* 1") + 1
        self.assertFailure(out, "compile_error", "load", line)

    def test_nki_constraint_is_compile_error_with_line(self):
        text = HEADER + """

@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    big = nl.ndarray((256, 64), dtype=a.dtype, buffer=nl.sbuf)
    return out
"""
        out = self.run_h(text)
        self.assertFailure(out, "compile_error", "verify")
        self.assertEqual(out["failure"]["line"], 8)

    def test_python_exception_in_kernel_body_has_line(self):
        # The kernel body runs at trace (compile) time, so a Python exception there is
        # reported by the simulator as a compile error, with the kernel line.
        text = ADD_KERNEL.replace("    x = nl.load(a[0:128, :])",
                                  "    x = nl.load(a[0:128, :])\n    raise ValueError('boom')")
        out = self.run_h(text)
        self.assertIn(out["failure"]["kind"], ("compile_error", "runtime_error"))
        self.assertEqual(out["failure"]["line"], 9)
        self.assertIn("boom", out["failure"]["message"])

    def test_out_of_bounds_access_is_runtime_error(self):
        text = ADD_KERNEL.replace("    x = nl.load(a[0:128, :])",
                                  "    i = a.shape[1]\n    x = nl.load(a[0:128, i - 32:i + 32])")
        out = self.run_h(text)
        self.assertFailure(out, "runtime_error", "verify", 9)
        self.assertIn("out_of_bound", out["failure"]["message"])

    def test_exit_in_kernel_is_a_value(self):
        out = self.run_h(ADD_KERNEL.replace("    x = nl.load(a[0:128, :])",
                                            "    raise SystemExit(3)"))
        self.assertEqual(out["status"], "failed")
        self.assertIn(out["failure"]["kind"], ("runtime_error", "compile_error"))
        self.assertIn("exit", out["failure"]["message"])

    def test_wrong_values_are_mismatch(self):
        out = self.run_h(ADD_KERNEL.replace("nl.add(x, y)", "nl.subtract(x, y)"),
                         extra=["--seeds", "0,1"])
        self.assertFailure(out, "mismatch", "verify")
        self.assertFalse(out["verify"]["correct"])
        seed0 = out["verify"]["seeds"][0]
        self.assertFalse(seed0["ok"])
        self.assertGreater(seed0["max_abs_err"], 0.1)
        self.assertIn("outside rtol", seed0["message"])

    def test_unwritten_output_is_mismatch(self):
        text = ADD_KERNEL.replace("nl.store(out[0:128, :], value=nl.add(x, y))",
                                  "nl.store(out[0:64, :], value=nl.add(x, y)[0:64, :])")
        out = self.run_h(text)
        self.assertFailure(out, "mismatch", "verify")
        self.assertIn("output 0[64:128, :] never written", out["failure"]["message"])

    def test_wrong_shape_is_mismatch(self):
        text = ADD_KERNEL.replace("out = nl.ndarray(a.shape,", "out = nl.ndarray((128, 32),") \
                         .replace("nl.store(out[0:128, :], value=nl.add(x, y))",
                                  "nl.store(out[0:128, :], value=nl.add(x, y)[:, 0:32])")
        out = self.run_h(text)
        self.assertFailure(out, "mismatch")
        self.assertIn("shape", out["failure"]["message"])

    def test_wrong_dtype_is_mismatch(self):
        text = ADD_KERNEL.replace("dtype=a.dtype", "dtype=nl.float16")
        out = self.run_h(text)
        self.assertFailure(out, "mismatch")
        self.assertIn("dtype float16, expected float32", out["failure"]["message"])

    def test_problem_errors(self):
        no_ref = write(self.dir, "p_noref.py", "def inputs(seed):\n    return {}\n")
        self.assertFailure(self.run_h(ADD_KERNEL, problem=no_ref), "problem_error", "load")
        raising = write(self.dir, "p_raise.py", ADD_PROBLEM.replace(
            "def reference(a, b):\n    return a + b", "def reference(a, b):\n    return 1 / 0"))
        out = self.run_h(ADD_KERNEL, problem=raising)
        self.assertFailure(out, "problem_error", "verify")
        self.assertIn("ZeroDivisionError", out["failure"]["message"])
        broken = write(self.dir, "p_syntax.py", "def inputs(seed:\n")
        self.assertFailure(self.run_h(ADD_KERNEL, problem=broken), "problem_error", "load")
        not_dict = write(self.dir, "p_list.py", "def inputs(seed):\n    return [1]\n"
                                                "def reference(**kw):\n    return 0\n")
        self.assertFailure(self.run_h(ADD_KERNEL, problem=not_dict), "problem_error")

    def test_harness_errors(self):
        out = autocomp_harness.run(["verify", "--kernel", "/nonexistent.py", "--problem",
                                    self.problem])
        self.assertFailure(out, "harness_error", "load")
        out = autocomp_harness.run(["verify", "--problem", self.problem])
        self.assertFailure(out, "harness_error")
        out = autocomp_harness.run(["verify", "--kernel", "k.py", "--problem", "p.py",
                                    "--target", "trn9"])
        self.assertFailure(out, "harness_error")
        self.assertIn("trn9", out["failure"]["message"])

    def test_timeout(self):
        text = ADD_KERNEL.replace("    x = nl.load(a[0:128, :])",
                                  "    n = 0\n    while True:\n        n += 1\n    x = nl.load(a[0:128, :])")
        # The budget covers starting the kernel's own process (the load stage) on a busy machine.
        out = self.run_h(text, extra=["--timeout", "5"])
        self.assertFailure(out, "timeout", "verify")

    # -- tolerances
    def test_tolerance_override(self):
        text = ADD_KERNEL.replace("nl.add(x, y)", "nl.add(nl.add(x, y), 0.001)")
        self.assertFailure(self.run_h(text), "mismatch")
        loose = write(self.dir, "p_loose.py", ADD_PROBLEM + "\nRTOL = 0.0\nATOL = 2e-3\n")
        self.assertEqual(self.run_h(text, problem=loose)["status"], "ok")
        per_output = write(self.dir, "p_list_tol.py", ADD_PROBLEM + "\nATOL = [2e-3]\n")
        self.assertEqual(self.run_h(text, problem=per_output)["status"], "ok")
        tight = write(self.dir, "p_tight.py", ADD_PROBLEM + "\nRTOL = 0.0\nATOL = 5e-4\n")
        self.assertFailure(self.run_h(text, problem=tight), "mismatch")

    def test_problem_seeds_and_target(self):
        p = write(self.dir, "p_seeds.py", ADD_PROBLEM + "\nSEEDS = (7, 8)\nTARGET = 'trn1'\n")
        out = self.run_h(ADD_KERNEL, problem=p)
        self.assertEqual([s["seed"] for s in out["verify"]["seeds"]], [7, 8])
        self.assertEqual(out["target"], "trn1")

    def test_problem_grid_launches_spmd(self):
        problem = write(self.dir, "p_grid.py", """
import numpy as np
GRID = (2,)

def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((256, 64), dtype=np.float32),
            "b": rng.standard_normal((256, 64), dtype=np.float32)}

def reference(a, b):
    return a + b
""")
        text = HEADER + """

@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    x = nl.load(a[i * 128:(i + 1) * 128, :])
    y = nl.load(b[i * 128:(i + 1) * 128, :])
    nl.store(out[i * 128:(i + 1) * 128, :], value=nl.add(x, y))
    return out
"""
        self.assertEqual(self.run_h(text, problem=problem)["status"], "ok")
        # Without the grid only the first half is written: the written check names it.
        with open(problem) as f:
            no_grid = write(self.dir, "p_nogrid.py", f.read().replace("GRID = (2,)", ""))
        out = self.run_h(text, problem=no_grid)
        self.assertFailure(out, "mismatch")
        self.assertIn("output 0[128:256, :] never written", out["failure"]["message"])

    # -- kernel selection
    def test_kernel_selection(self):
        two = ADD_KERNEL + """

@nki.jit
def sub_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out[0:128, :], value=nl.subtract(nl.load(a[0:128, :]), nl.load(b[0:128, :])))
    return out


def helper(x):
    return x
"""
        out = self.run_h(two)
        self.assertFailure(out, "compile_error", "load")
        self.assertIn("add_kernel", out["failure"]["message"])
        self.assertIn("KERNEL", out["failure"]["message"])
        out = self.run_h(two, extra=["--kernel-name", "add_kernel"])
        self.assertEqual(out["status"], "ok", out)
        named = write(self.dir, "p_named.py", ADD_PROBLEM + "\nKERNEL = 'sub_kernel'\n")
        out = self.run_h(two, problem=named)
        self.assertFailure(out, "mismatch")
        self.assertEqual(out["kernel"]["name"], "sub_kernel")
        out = self.run_h(two, problem=named, extra=["--kernel-name", "add_kernel"])
        self.assertEqual(out["status"], "ok")
        out = self.run_h(two, extra=["--kernel-name", "missing_kernel"])
        self.assertFailure(out, "compile_error")
        self.assertIn("missing_kernel", out["failure"]["message"])

    def test_kernel_selected_by_parameters(self):
        text = ADD_KERNEL + """

@nki.jit
def other_kernel(a, c):
    return a
"""
        out = self.run_h(text)
        self.assertEqual(out["status"], "ok", out)
        self.assertEqual(out["kernel"]["name"], "add_kernel")
        out = self.run_h(ADD_KERNEL.replace("def add_kernel(a, b)", "def add_kernel(a, c)"))
        self.assertFailure(out, "compile_error")
        self.assertIn("no function", out["failure"]["message"])


class StdoutContract(unittest.TestCase):
    def test_only_json_on_stdout_even_when_kernel_prints(self):
        with util.TempDir() as d:
            problem = write(d, "problem.py", ADD_PROBLEM + "\nprint('problem says hi')\n")
            kernel = write(d, "kernel.py", ADD_KERNEL.replace(
                "    x = nl.load(a[0:128, :])",
                "    print('kernel says hi')\n"
                "    x = nl.load(a[0:128, :])"))
            lines, err, code = util.run_cli(["evaluate", "--kernel", kernel, "--problem", problem,
                                             "--seeds", "0", "--no-ref-cache"])
        self.assertEqual(code, 0)
        self.assertEqual(len(lines), 1, lines)
        out = json.loads(lines[0])
        self.assertEqual(out["status"], "ok", out)
        self.assertIn("kernel says hi", err)
        self.assertIn("problem says hi", err)

    def test_failure_still_prints_one_line(self):
        lines, _, code = util.run_cli(["verify", "--kernel", "nope.py", "--problem", "nope.py"])
        self.assertEqual(code, 0)
        self.assertEqual(len(lines), 1)
        self.assertEqual(json.loads(lines[0])["failure"]["kind"], "harness_error")

    def test_version_command(self):
        lines, _, code = util.run_cli(["version"])
        self.assertEqual(code, 0)
        out = json.loads(lines[-1])
        self.assertEqual(out["schema"], "autocomp-harness/1")
        self.assertTrue(out["harness_version"].startswith(autocomp_harness.HARNESS_BASE_VERSION))
        self.assertIn(".nkisim.", out["harness_version"])
        lines, _, _ = util.run_cli(["version", "--device", "fake"])
        fake = json.loads(lines[-1])["harness_version"]
        self.assertTrue(fake.startswith(autocomp_harness.HARNESS_BASE_VERSION + "+h."))
        self.assertNotIn("nkisim", fake)
        self.assertTrue(out["harness_version"].startswith(fake + ".nkisim."))


if __name__ == "__main__":
    unittest.main()
