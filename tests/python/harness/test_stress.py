"""Stress inputs (PROTOCOL.md "Stress inputs"): a problem's STRESS = {name: fn(inputs) ->
inputs} is checked after the drawn seeds on every verify; a kernel right only on the draw is
refused naming the stress input; a malformed STRESS is a problem_error. Gaming kernels:
tests/python/harness/fixtures/stress. The shipped seeds run at AUTOCOMP_SMALL=1 shapes."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

from tests.python.harness import util
from tests.python.harness.test_isolation import product_binary
from tests.python.harness.util import autocomp_harness, write

from harnesslib import stress  # noqa: E402
from harnesslib.failures import HarnessFailure  # noqa: E402

FIX = os.path.join(util.FIXTURES, "stress")
SEEDS = util.SEEDS_DIR

# (seed folder, gaming kernel, the stress input that must refuse it)
GAMING = (
    ("softmax", "softmax_no_max.py", "shifted_rows"),
    ("attention", "attention_no_max.py", "common_key"),
    ("layernorm", "layernorm_one_pass_var.py", "offset_rows"),
    ("rmsnorm", "rmsnorm_eps.py", "scaled_rows"),
)


class Small:
    """AUTOCOMP_SMALL=1 while the block runs (problem files read it when imported)."""

    def __enter__(self):
        self.old = os.environ.get("AUTOCOMP_SMALL")
        os.environ["AUTOCOMP_SMALL"] = "1"

    def __exit__(self, *exc):
        if self.old is None:
            os.environ.pop("AUTOCOMP_SMALL", None)
        else:
            os.environ["AUTOCOMP_SMALL"] = self.old


def verify(kernel, problem, *extra):
    with Small():
        return autocomp_harness.run(["verify", "--kernel", kernel, "--problem", problem,
                                     "--no-ref-cache"] + list(extra))


def seed_problem(name):
    return os.path.join(SEEDS, name, "problem.py")


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class GamingKernelsAreRefused(unittest.TestCase):
    def test_right_on_the_draw_wrong_on_the_stress_input(self):
        for seed, kernel, name in GAMING:
            with self.subTest(seed):
                out = verify(os.path.join(FIX, kernel), seed_problem(seed))
                self.assertEqual(out["status"], "failed", out)
                failure = out["failure"]
                self.assertEqual(failure["kind"], "mismatch", failure)
                self.assertTrue(failure["message"].startswith("stress input %r: output 0" % name),
                                failure["message"])
                # every drawn seed passed: only the stress input tells the kernel is wrong
                self.assertTrue(all(e["ok"] for e in out["verify"]["seeds"]), out["verify"])
                self.assertEqual(out["verify"]["stress"][-1]["name"], name)
                self.assertFalse(out["verify"]["stress"][-1]["ok"])
                self.assertFalse(out["verify"]["correct"])

    def test_overflow_is_not_blamed_on_unwritten_memory(self):
        out = verify(os.path.join(FIX, "softmax_no_max.py"), seed_problem("softmax"))
        self.assertIn("non-finite value(s)", out["failure"]["message"])
        self.assertNotIn("never wrote", out["failure"]["message"])


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class ShippedKernelsPass(unittest.TestCase):
    def test_every_seed_kernel_passes_its_stress_inputs(self):
        checked = 0
        for seed in sorted(os.listdir(SEEDS)):
            problem = seed_problem(seed)
            if not os.path.isfile(problem):
                continue
            with open(problem) as f:
                if "STRESS" not in f.read():
                    continue
            for kernel in sorted(os.listdir(os.path.join(SEEDS, seed))):
                if not kernel.endswith(".py") or kernel == "problem.py":
                    continue
                with self.subTest(seed=seed, kernel=kernel):
                    out = verify(os.path.join(SEEDS, seed, kernel), problem, "--seeds", "0")
                    self.assertEqual(out["status"], "ok", out.get("failure"))
                    entries = out["verify"]["stress"]
                    self.assertTrue(entries and all(e["ok"] for e in entries), entries)
                    checked += 1
        self.assertGreaterEqual(checked, 12)

    def test_the_seeds_that_need_them_declare_stress_inputs(self):
        for seed in ("softmax", "attention", "layernorm", "rmsnorm", "mamba"):
            with self.subTest(seed), Small():
                from harnesslib.problem import load_problem  # noqa: PLC0415
                self.assertTrue(load_problem(seed_problem(seed)).stress)


PROBLEM = """
import numpy as np

def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, 64), dtype=np.float32)}

def reference(x):
    return (x * np.float32(2.0)).astype(np.float32)
"""

KERNEL = """
import nki
import nki.language as nl


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out[0:128, :], value=nl.multiply(nl.load(x[0:128, :]), 2.0))
    return out
"""

# Right while 2x stays below 1e4 (every drawn input): the kernel clips its results there.
CLIPPING_KERNEL = KERNEL.replace("nl.multiply(nl.load(x[0:128, :]), 2.0)",
                                 "nl.minimum(nl.multiply(nl.load(x[0:128, :]), 2.0), 1e4)")


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class Declarations(unittest.TestCase):
    def run_h(self, stress_text, kernel=KERNEL, *extra):
        with util.TempDir() as d:
            return autocomp_harness.run([
                "verify", "--kernel", write(d, "k.py", kernel), "--problem",
                write(d, "p.py", PROBLEM + stress_text), "--seeds", "0,1",
                "--no-ref-cache"] + list(extra))

    def problem_error(self, stress_text, *fragments):
        out = self.run_h(stress_text)
        self.assertEqual(out["status"], "failed", out)
        self.assertEqual(out["failure"]["kind"], "problem_error", out["failure"])
        for fragment in fragments:
            self.assertIn(fragment, out["failure"]["message"])
        return out

    def test_a_good_declaration_runs_after_the_seeds(self):
        out = self.run_h('\nSTRESS = {"big": lambda i: {"x": i["x"] * np.float32(1e3)},\n'
                         '          "zeros": lambda i: {"x": np.zeros_like(i["x"])}}\n')
        self.assertEqual(out["status"], "ok", out.get("failure"))
        self.assertEqual([e["name"] for e in out["verify"]["stress"]], ["big", "zeros"])
        self.assertEqual(len(out["verify"]["seeds"]), 2)
        self.assertIn("stress_ms", out["verify"])

    def test_the_stress_input_refuses_a_kernel_the_draw_accepts(self):
        text = '\nSTRESS = {"big": lambda i: {"x": i["x"] * np.float32(1e5)}}\n'
        out = self.run_h("", CLIPPING_KERNEL)
        self.assertEqual(out["status"], "ok", out.get("failure"))
        out = self.run_h(text, CLIPPING_KERNEL)
        self.assertEqual(out["failure"]["kind"], "mismatch")
        self.assertTrue(out["failure"]["message"].startswith("stress input 'big': output 0: "),
                        out["failure"])

    def test_without_stress_the_result_is_as_before(self):
        out = self.run_h("")
        self.assertEqual(out["status"], "ok", out.get("failure"))
        self.assertNotIn("stress", out["verify"])

    def test_malformed_declarations_are_problem_errors(self):
        self.problem_error('\nSTRESS = [lambda i: i]\n', "STRESS must be a dict")
        self.problem_error('\nSTRESS = {"a": 3}\n', "STRESS['a'] must be a function")
        self.problem_error('\nSTRESS = {"a b": lambda i: i}\n', "STRESS name 'a b'")
        self.problem_error('\nSTRESS = {"boom": lambda i: 1 / 0}\n',
                           "STRESS['boom'](inputs) raised ZeroDivisionError")
        self.problem_error('\nSTRESS = {"n": lambda i: None}\n',
                           "STRESS['n'](inputs) must return a dict")
        self.problem_error('\nSTRESS = {"shape": lambda i: {"x": i["x"][:64]}}\n',
                           "STRESS['shape'](inputs)['x'] is float32 (64, 64)",
                           "float32 (128, 64)")
        self.problem_error('\nSTRESS = {"dtype": lambda i: {"x": i["x"].astype(np.float64)}}\n',
                           "STRESS['dtype'](inputs)['x'] is float64")
        self.problem_error('\nSTRESS = {"names": lambda i: {"y": i["x"]}}\n',
                           "same names", "missing x", "unexpected y")

    def test_a_stress_input_with_a_non_finite_reference_is_the_problems_fault(self):
        out = self.problem_error('\nSTRESS = {"huge": lambda i: {"x": i["x"] * np.float32(1e38)}}'
                                 '\n', "stress input 'huge': the reference's output 0 has")
        self.assertEqual(out["failure"]["stage"], "verify")

    def test_a_reference_that_fails_on_a_stress_input_names_it(self):
        text = ('\nSTRESS = {"neg": lambda i: {"x": -abs(i["x"])}}\n'
                'def reference(x):\n    assert (x >= 0).any()\n    return x * np.float32(2.0)\n')
        self.problem_error(text, "reference(...) for stress input 'neg' raised AssertionError")


class StressUnits(unittest.TestCase):
    """harnesslib/stress.py on its own (no simulator)."""

    def test_spec_order_and_absence(self):
        class M:
            STRESS = {"b": len, "a": len}
        self.assertEqual([n for n, _ in stress.check_spec(M)], ["b", "a"])
        self.assertEqual(stress.check_spec(object()), ())

    def test_too_many_is_refused(self):
        class M:
            STRESS = {"s%d" % i: len for i in range(stress.MAX_STRESS_INPUTS + 1)}
        with self.assertRaises(HarnessFailure) as c:
            stress.check_spec(M)
        self.assertEqual(c.exception.kind, "problem_error")

    def test_the_function_gets_copies_and_scalars_must_stay(self):
        base = {"x": np.ones(3, np.float32), "n": 4}

        def inplace(i):
            i["x"] *= 5
            return i
        made = stress.make("inplace", inplace, base, lambda v, what: v)
        self.assertEqual(base["x"].tolist(), [1.0, 1.0, 1.0])
        self.assertEqual(made["x"].tolist(), [5.0, 5.0, 5.0])
        with self.assertRaises(HarnessFailure) as c:
            stress.make("n", lambda i: dict(i, n=5), base, lambda v, what: v)
        self.assertIn("keeps scalar inputs", c.exception.message)


@unittest.skipUnless(util.sim_available() and product_binary(), "no autocomp-mcp build "
                     "(set AUTOCOMP_MCP_BINARY)")
class ThroughTheProduct(unittest.TestCase):
    """`autocomp-mcp call verify_kernel` with this checkout's harness."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stress-product-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def call(self, kernel, problem):
        env = dict(os.environ, AUTOCOMP_SMALL="1")
        p = subprocess.run([product_binary(), "call", "verify_kernel", "--harness-dir",
                            os.path.join(util.REPO, "backends"), "--db",
                            os.path.join(self.tmp, "store.db"), "--args",
                            json.dumps({"kernel": kernel, "problem": problem, "fresh": True})],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600,
                           check=False, env=env)
        return p.stdout.decode(), p.stderr.decode()

    def test_gaming_kernels_are_refused_naming_the_stress_input(self):
        for seed, kernel, name in GAMING[:2]:
            with self.subTest(seed):
                text, err = self.call(os.path.join(FIX, kernel), seed_problem(seed))
                answer = json.loads(text)
                self.assertFalse(answer["correct"], text)
                self.assertEqual(answer["failure"]["kind"], "mismatch", text)
                self.assertTrue(answer["failure"]["message"].startswith(
                    "stress input %r: " % name), text)
                # beside a seed count that alone reads as a pass, the input that refused it
                self.assertEqual(answer.get("stress_failed"), name, text)

    def test_a_shipped_kernel_passes_and_the_answer_stays_small(self):
        text, err = self.call(os.path.join(SEEDS, "softmax", "optimized.py"),
                              seed_problem("softmax"))
        answer = json.loads(text)
        self.assertTrue(answer["correct"], text + err[-2000:])
        self.assertLessEqual(len(json.dumps(answer)), 1200, text)


if __name__ == "__main__":
    unittest.main()
