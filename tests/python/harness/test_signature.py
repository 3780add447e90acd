"""The input signature: canonical text, the `signature` command, and its presence in results."""
import os
import unittest

from tests.python.harness import util
from tests.python.harness.util import autocomp_harness, write

PROBLEM = """
import numpy as np

INPUT_DTYPES = {"b": "bfloat16"}

def inputs(seed):
    return {"b": np.zeros((4, 8), np.float32), "a": np.ones((2,), np.int32), "n": 3,
            "eps": np.float32(0.5), "flag": True}

def reference(a, b, n, eps, flag):
    raise RuntimeError("the signature command must not compute the reference")
"""


class Signature(unittest.TestCase):
    def test_canonical_text_sorted_with_dtypes_and_scalars(self):
        with util.TempDir() as d:
            out = autocomp_harness.run(["signature", "--problem", write(d, "p.py", PROBLEM)])
        self.assertEqual(out["status"], "ok", out)
        self.assertEqual(out["command"], "signature")
        self.assertEqual(out["problem"]["signature"],
                         "a:int32[2];b:bfloat16[4,8];eps:float=0.5;flag:bool=True;n:int=3")
        self.assertEqual(out["problem"]["inputs"]["b"], {"shape": [4, 8], "dtype": "bfloat16"})
        self.assertEqual(out["problem"]["inputs"]["n"], {"dtype": "int", "value": 3})
        self.assertEqual(sorted(out), ["command", "failure", "harness_version", "problem",
                                       "schema", "status"])

    def test_runs_no_kernel_and_reports_problem_errors(self):
        with util.TempDir() as d:
            bad = write(d, "bad.py", "def inputs(seed):\n    return {'x': 'text'}\n"
                        "def reference(x):\n    return x\n")
            out = autocomp_harness.run(["signature", "--problem", bad])
        self.assertEqual(out["failure"]["kind"], "problem_error")
        self.assertIn("'x'", out["failure"]["message"])
        out = autocomp_harness.run(["signature"])
        self.assertEqual(out["failure"]["kind"], "harness_error")

    def test_shape_change_changes_the_signature(self):
        problem = os.path.join(util.SEEDS_DIR, "rmsnorm", "problem.py")
        full, _, _ = util.run_cli(["signature", "--problem", problem], env={"AUTOCOMP_SMALL": ""})
        small, _, _ = util.run_cli(["signature", "--problem", problem],
                                   env={"AUTOCOMP_SMALL": "1"})
        a = util.last_json(full)["problem"]["signature"]
        b = util.last_json(small)["problem"]["signature"]
        self.assertTrue(a and b)
        self.assertNotEqual(a, b)

    @unittest.skipUnless(util.sim_available(), "nkisim not importable")
    def test_every_result_carries_the_signature(self):
        from tests.python.harness.test_harness_sim import ADD_KERNEL, ADD_PROBLEM
        with util.TempDir() as d:
            kernel = write(d, "k.py", ADD_KERNEL)
            problem = write(d, "p.py", ADD_PROBLEM)
            for command in ("verify", "benchmark", "profile", "evaluate"):
                out = autocomp_harness.run([command, "--kernel", kernel, "--problem", problem,
                                            "--seeds", "0", "--no-ref-cache"])
                self.assertEqual(out["status"], "ok", out)
                self.assertEqual(out["problem"]["signature"], "a:float32[128,64];b:float32[128,64]")


if __name__ == "__main__":
    unittest.main()
