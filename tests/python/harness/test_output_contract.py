"""The output contract (PROTOCOL.md "Output contract"): results are HBM tensors, every output
element is written by an instruction, non-finite values match the reference by position and
kind, and a harness run always ends with an encodable result line whatever the kernel says.
Kernels: tests/python/harness/fixtures/contract."""
import json
import os
import unittest

import numpy as np

from tests.python.harness import util

from harnesslib import compare, emit  # noqa: E402

FIX = os.path.join(util.FIXTURES, "contract")
PADDED = os.path.join(FIX, "padded_rmsnorm_problem.py")
PLAIN = os.path.join(FIX, "plain_rmsnorm_problem.py")


def verify(kernel, problem, *extra):
    lines, err, code = util.run_cli(["verify", "--kernel", os.path.join(FIX, kernel),
                                     "--problem", problem] + list(extra))
    assert code == 0, err
    return json.loads(lines[-1])


class NonFiniteValues(unittest.TestCase):
    def check(self, out, ref):
        return compare.compare_outputs([np.array(out, np.float32)], [np.array(ref, np.float32)])

    def test_same_kind_same_place_passes(self):
        ok, _, _, msg = self.check([1.0, np.nan, np.inf, -np.inf], [1.0, np.nan, np.inf, -np.inf])
        self.assertTrue(ok, msg)

    def test_finite_where_reference_is_nan_fails(self):
        ok, _, _, msg = self.check([1.0, 0.0], [1.0, np.nan])
        self.assertFalse(ok)
        self.assertIn("index (1,): got 0.0, want NaN", msg)

    def test_other_kind_fails(self):
        for got, want in ((np.inf, -np.inf), (np.nan, np.inf), (-np.inf, np.nan)):
            ok, _, _, msg = self.check([got], [want])
            self.assertFalse(ok, (got, want))
            self.assertIn("not the same NaN/+inf/-inf", msg)

    def test_reference_scan_names_the_first(self):
        self.assertIsNone(compare.nonfinite_reference([np.ones(4, np.float32),
                                                       np.arange(3)]))
        ref = np.zeros((2, 3), np.float32)
        ref[1, 2] = -np.inf
        ref[0, 1] = np.nan
        self.assertEqual(compare.nonfinite_reference([ref]), (0, 2, (0, 1), "NaN"))

    def test_region_text(self):
        m = np.zeros((256, 8), bool)
        m[128:256, :] = True
        self.assertEqual(compare.region_text(m), ("[128:256, :]", 1024))
        m = np.zeros((4, 6), bool)
        m[2, 1:3] = True
        self.assertEqual(compare.region_text(m), ("[2, 1:3]", 2))


class Encoding(unittest.TestCase):
    def test_lone_surrogates_are_escaped(self):
        text = emit.encode({"m": "a\ud800b\udfff\U0001F600"})
        text.encode("utf-8")  # no surrogate left
        self.assertEqual(json.loads(text), {"m": "a\\ud800b\\udfff\U0001F600"})


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class SimulatorContract(unittest.TestCase):
    def test_honest_kernel_passes_with_nan_rows(self):
        out = verify("rmsnorm_honest.py", PADDED)
        self.assertEqual(out["status"], "ok", out["failure"])

    def test_half_written_output_is_refused_naming_the_region(self):
        out = verify("rmsnorm_half.py", PADDED)
        self.assertEqual(out["failure"]["kind"], "mismatch")
        self.assertIn("output 0[128:256, :] never written (65536 of 131072 elements)",
                      out["failure"]["message"])

    def test_sbuf_result_is_refused(self):
        out = verify("rmsnorm_sbuf_out.py", PLAIN)
        self.assertEqual(out["failure"]["kind"], "compile_error")
        self.assertIn("a tensor in SBUF: kernel results must be HBM tensors",
                      out["failure"]["message"])

    def test_undeclared_nonfinite_reference_is_a_problem_error(self):
        with util.TempDir() as d:
            with open(PADDED) as f:
                text = f.read().replace("EXPECT_NONFINITE = True", "")
            problem = util.write(d, "p.py", text)
            out = verify("rmsnorm_honest.py", problem)
        self.assertEqual(out["failure"]["kind"], "problem_error")
        self.assertIn("EXPECT_NONFINITE = True", out["failure"]["message"])

    def test_surrogate_message_still_gives_a_result_line(self):
        out = verify("surrogate_message.py", PLAIN)
        self.assertEqual(out["status"], "failed")
        self.assertNotEqual(out["failure"]["kind"], "harness_error")
        self.assertIn("no answer \\ud800 here", out["failure"]["message"])


if __name__ == "__main__":
    unittest.main()
