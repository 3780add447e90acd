"""Problem contract extensions: scalar inputs bound as kernel arguments and output parameters the
harness allocates (`kernel(x, out)`)."""
import unittest

from tests.python.harness import util
from tests.python.harness.util import autocomp_harness, write

KERNEL = """
import nki
import nki.language as nl


@nki.jit
def scale_kernel(x, alpha, out):
    t = nl.load(x[0:128, :])
    nl.store(out[0:128, :], value=nl.multiply(t, alpha))
"""

PROBLEM = """
import numpy as np

def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, 64), dtype=np.float32), "alpha": 2.5 + seed}

def reference(x, alpha):
    return (x * np.float32(alpha)).astype(np.float32)
"""

RETURNING_KERNEL = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def scale_kernel(x, alpha):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[0:128, :])
    nl.store(out[0:128, :], value=nl.multiply(t, alpha))
    return out
"""


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class OutputParameters(unittest.TestCase):
    def run_h(self, kernel, problem, command="verify"):
        with util.TempDir() as d:
            return autocomp_harness.run([command, "--kernel", write(d, "k.py", kernel),
                                         "--problem", write(d, "p.py", problem),
                                         "--seeds", "0,1", "--fixed-seeds",
                                         "--no-ref-cache"])

    def test_declared_output_shape(self):
        out = self.run_h(KERNEL, PROBLEM + '\nOUTPUTS = {"out": ((128, 64), "float32")}\n',
                         "evaluate")
        self.assertEqual(out["status"], "ok", out)
        self.assertEqual(out["problem"]["outputs"], ["out"])
        self.assertEqual(out["problem"]["signature"], "alpha:float=2.5;x:float32[128,64]")
        self.assertEqual(out["benchmark"]["floor"]["hbm_bytes"], 2 * 128 * 64 * 4)

    def test_bf16_output_parameter_on_every_seed(self):
        # a bf16 output parameter lives in a rounded copy the simulator writes back to the
        # harness's array after the run, on every seed (later seeds are replayed untimed;
        # with one alpha for every seed they share one trace, so they replay it as checked)
        problem = PROBLEM.replace("return (x * np.float32(alpha)).astype(np.float32)",
                                  "return x * np.float32(alpha)")
        for alpha in ("2.5 + seed", "2.5"):
            with self.subTest(alpha=alpha), util.TempDir() as d:
                text = problem.replace('"alpha": 2.5 + seed', '"alpha": ' + alpha)
                out = autocomp_harness.run([
                    "evaluate", "--kernel", write(d, "k.py", KERNEL), "--problem",
                    write(d, "p.py", text + '\nOUTPUTS = {"out": ((128, 64), "bfloat16")}\n'
                    + 'OUTPUT_DTYPES = ("bfloat16",)\n'),
                    "--seeds", "0,1,2", "--no-ref-cache"])
                self.assertEqual(out["status"], "ok", out)
                self.assertEqual(len(out["verify"]["seeds"]), 3)

    def test_output_shape_from_the_reference(self):
        for spec in ('("out",)', '{"out": None}'):
            with self.subTest(spec):
                out = self.run_h(KERNEL, PROBLEM + "\nOUTPUTS = %s\n" % spec)
                self.assertEqual(out["status"], "ok", out)

    def test_output_shape_from_a_callable(self):
        out = self.run_h(KERNEL, PROBLEM + '\ndef OUTPUTS(x, alpha):\n'
                         '    return {"out": (x.shape, "float32")}\n', "evaluate")
        self.assertEqual(out["status"], "ok", out)

    def test_output_the_kernel_never_writes_fails(self):
        lazy = KERNEL.replace("    nl.store(out[0:128, :], value=nl.multiply(t, alpha))",
                              "    nl.store(out[0:64, :], value=nl.multiply(t[0:64, :], alpha))")
        out = self.run_h(lazy, PROBLEM + '\nOUTPUTS = ("out",)\n')
        self.assertEqual(out["failure"]["kind"], "mismatch", out["failure"])

    def test_wrong_scalar_use_fails(self):
        wrong = KERNEL.replace("nl.multiply(t, alpha)", "nl.multiply(t, 2.5)")
        out = self.run_h(wrong, PROBLEM + '\nOUTPUTS = ("out",)\n')
        self.assertEqual(out["failure"]["kind"], "mismatch", out["failure"])
        self.assertIn("seed 1", out["failure"]["message"])

    def test_returned_outputs_still_work_with_scalars(self):
        out = self.run_h(RETURNING_KERNEL, PROBLEM, "evaluate")
        self.assertEqual(out["status"], "ok", out)
        self.assertNotIn("outputs", out["problem"])

    def test_bad_outputs_declarations(self):
        for spec, text in (("42", "OUTPUTS must be"), ('{"x": None}', "also an input"),
                           ('{"out": (1, 2, 3)}', "(shape, dtype)"),
                           ('{"out": ((128, 64), "no_such_dtype")}', "OUTPUTS['out']")):
            with self.subTest(spec):
                out = self.run_h(KERNEL, PROBLEM + "\nOUTPUTS = %s\n" % spec)
                self.assertEqual(out["failure"]["kind"], "problem_error", out["failure"])
                self.assertIn(text, out["failure"]["message"])

    def test_a_tuple_constant_reaches_the_kernels_keyword_arguments(self):
        # a published kernel taking `**kwargs` with a nested tuple, as conv kernels take padding
        kernel = KERNEL.replace("def scale_kernel(x, alpha, out):",
                                "def scale_kernel(x, out, **kwargs):\n"
                                "    alpha = kwargs['window'][1][0]")
        problem = PROBLEM.replace('"alpha": 2.5 + seed', '"window": ((0, 1), (2.5 + seed, 3))')
        problem = problem.replace("def reference(x, alpha):\n    return (x * np.float32(alpha))",
                                  "def reference(x, window):\n"
                                  "    return (x * np.float32(window[1][0]))")
        out = self.run_h(kernel, problem + '\nOUTPUTS = ("out",)\n', "evaluate")
        self.assertEqual(out["status"], "ok", out)
        self.assertEqual(out["problem"]["signature"],
                         "window:tuple=((0, 1), (2.5, 3));x:float32[128,64]")

    def test_non_scalar_non_array_input_is_a_problem_error(self):
        out = self.run_h(RETURNING_KERNEL, PROBLEM.replace('"alpha": 2.5 + seed',
                                                           '"alpha": [2.5]'))
        self.assertEqual(out["failure"]["kind"], "problem_error")
        self.assertIn("'alpha'", out["failure"]["message"])


IDENTITY_KERNEL = """
import neuronxcc.nki as nki


@nki.jit
def same_kernel(x):
    return x
"""

IN_PLACE_REFERENCE = """
import numpy as np

def inputs(seed):
    return {"x": np.random.default_rng(seed).standard_normal((128, 64), dtype=np.float32)}

def reference(x):
    x *= 2
    return x
"""


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class ReferenceInputs(unittest.TestCase):
    """The harness lets the reference read the inputs in place when nothing uses them again,
    but never when a kernel output shares their memory: a reference that writes into its
    inputs must not rewrite the kernel's answer."""

    def test_reference_writing_its_inputs_cannot_change_the_kernels_output(self):
        with util.TempDir() as d:
            out = autocomp_harness.run(["evaluate", "--kernel", write(d, "k.py", IDENTITY_KERNEL),
                                        "--problem", write(d, "p.py", IN_PLACE_REFERENCE),
                                        "--seeds", "0,1", "--no-ref-cache"])
        self.assertEqual(out["status"], "failed", out)
        self.assertEqual(out["failure"]["kind"], "mismatch", out["failure"])

    def test_reference_writing_its_inputs_is_fine_otherwise(self):
        kernel = RETURNING_KERNEL.replace("nl.multiply(t, alpha)", "nl.multiply(t, 2.0)") \
            .replace("def scale_kernel(x, alpha)", "def scale_kernel(x)")
        with util.TempDir() as d:
            out = autocomp_harness.run(["evaluate", "--kernel", write(d, "k.py", kernel),
                                        "--problem", write(d, "p.py", IN_PLACE_REFERENCE),
                                        "--seeds", "0,1,2", "--no-ref-cache"])
        self.assertEqual(out["status"], "ok", out)
        self.assertTrue(out["verify"]["correct"])


if __name__ == "__main__":
    unittest.main()
