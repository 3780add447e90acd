"""A kernel must not be able to change what verification compares it with by writing into
its inputs: the reference (computed after the kernel when it is not cached) must see the
inputs as inputs(seed) made them."""
import unittest
from unittest import mock

import numpy as np

from tests.python.harness import util
from tests.python.harness.util import autocomp_harness, write

HEADER = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
"""

TRANSPOSE_PROBLEM = """
import numpy as np

def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, 128), dtype=np.float32)}

def reference(x):
    return x.T.copy()
"""

# zeroes x, then returns the transpose of what x now holds: zeros
HOSTILE = HEADER + """

@nki.jit
def transpose_kernel(x):
    out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(x[0:128, 0:128], value=nl.zeros((128, 128), dtype=x.dtype))
    t = nl.load_transpose2d(x[0:128, 0:128])
    nl.store(out[0:128, 0:128], value=t)
    return out
"""

HONEST = HEADER + """

@nki.jit
def transpose_kernel(x):
    out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load_transpose2d(x[0:128, 0:128])
    nl.store(out[0:128, 0:128], value=t)
    return out
"""

# the problem's OUTPUTS parameter is the one array the kernel may write
OUT_PARAM = HEADER + """

@nki.jit
def transpose_kernel(x, out):
    t = nl.load_transpose2d(x[0:128, 0:128])
    nl.store(out[0:128, 0:128], value=t)
"""


class InputWritesOnSim(unittest.TestCase):
    def setUp(self):
        if not util.sim_available():
            self.skipTest("nkisim not importable")
        self._td = util.TempDir()
        self.dir = self._td.__enter__()
        self.problem = write(self.dir, "problem.py", TRANSPOSE_PROBLEM)

    def tearDown(self):
        self._td.__exit__(None, None, None)

    def run_h(self, kernel_text, extra=("--no-ref-cache",), problem=None, command="verify"):
        kernel = write(self.dir, "kernel.py", kernel_text)
        return autocomp_harness.run([command, "--kernel", kernel, "--problem",
                                     problem or self.problem, "--seeds", "0,1"] + list(extra))

    def assertInputWrite(self, out):
        self.assertEqual(out["status"], "failed", out)
        self.assertEqual(out["failure"]["kind"], "mismatch", out["failure"])
        self.assertEqual(out["failure"]["stage"], "verify")
        self.assertIn("writes into its input 'x'", out["failure"]["message"])
        self.assertEqual(out["failure"]["line"], 8)

    def test_hostile_kernel_fails_without_reference_cache(self):
        self.assertInputWrite(self.run_h(HOSTILE))

    def test_hostile_kernel_fails_with_a_cached_reference(self):
        cache = self.dir + "/refcache"
        # every reference is stored (a real one is stored when it takes a second or more)
        with mock.patch("harnesslib.refcache.MIN_SECONDS", 0.0):
            self.assertEqual(self.run_h(HONEST, ("--ref-cache", cache))["status"], "ok")
            self.assertInputWrite(self.run_h(HOSTILE, ("--ref-cache", cache)))

    def test_hostile_kernel_fails_evaluate(self):
        self.assertInputWrite(self.run_h(HOSTILE, command="evaluate"))

    def test_honest_kernel_passes(self):
        out = self.run_h(HONEST, command="evaluate")
        self.assertEqual(out["status"], "ok", out.get("failure"))
        self.assertTrue(out["verify"]["correct"])

    def test_outputs_parameter_may_be_written(self):
        problem = write(self.dir, "p_out.py",
                        TRANSPOSE_PROBLEM + '\nOUTPUTS = {"out": ((128, 128), "float32")}\n')
        out = self.run_h(OUT_PARAM, problem=problem)
        self.assertEqual(out["status"], "ok", out.get("failure"))


class _WritingDevice:
    """What a Trainium device does with a kernel that writes its input (no device here)."""

    name = "stand-in"

    def __init__(self, write):
        self.write = write

    def run(self, kernel, inputs, grid=None, numerics=True, input_dtypes=None):
        if self.write:
            inputs["x"][...] = 0
        return [np.zeros((4, 4), np.float32)], None


class InputWritesOnDevices(unittest.TestCase):
    def make_run(self, write_inputs):
        problem = mock.Mock(outputs_spec=None, input_dtypes={}, grid=None)
        return autocomp_harness._DeviceRun(None, problem, _WritingDevice(write_inputs), None,
                                           [0], None, None, "trn2")

    def test_a_write_into_an_input_is_a_mismatch(self):
        inputs = {"x": np.ones((4, 4), np.float32), "n": 3}
        with self.assertRaises(autocomp_harness.HarnessFailure) as cm:
            self.make_run(True).call(inputs, True)
        self.assertEqual(cm.exception.kind, "mismatch")
        self.assertIn("'x'", cm.exception.message)

    def test_a_kernel_that_leaves_inputs_alone_passes(self):
        inputs = {"x": np.ones((4, 4), np.float32)}
        _, outs, _ = self.make_run(False).call(inputs, True)
        self.assertEqual(outs[0].shape, (4, 4))


if __name__ == "__main__":
    unittest.main()
