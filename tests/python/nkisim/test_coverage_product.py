"""coverage_product.py turns a sample kernel and its binding into a problem the harness
verifies: arrays and scalars through `inputs`, other arguments through a generated entry,
helper modules beside the sample inlined on request, the simulator's outputs as reference."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

from . import _util  # noqa: F401  (activates the simulator)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "backends", "nkisim"))
import coverage_product as cp  # noqa: E402
import coverage_samples as cs  # noqa: E402

HARNESS = os.path.join(REPO, "backends", "harness", "autocomp_harness.py")

HELPER = '''
def scale_of(shape):
    return float(len(shape))
'''

SAMPLE = '''
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from tiling import scale_of


@nki.jit
def scaled(x, window, repeat):
    rows, cols = window
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[0:rows, 0:cols])
    nl.store(out[0:rows, 0:cols], nl.multiply(t, scale_of(x.shape) * repeat))
    return out
'''


class CoverageProduct(unittest.TestCase):
    def setUp(self):
        self._td = tempfile.TemporaryDirectory(prefix="coverage-product-test-")
        self.dir = self._td.name
        self.src = os.path.join(self.dir, "sample")
        os.makedirs(self.src)
        for name, text in (("tiling.py", HELPER), ("kern.py", SAMPLE)):
            with open(os.path.join(self.src, name), "w") as f:
                f.write(textwrap.dedent(text).lstrip())
        self.binding = {"x": cs.T(128, 64), "window": (128, 64), "repeat": 3}

    def tearDown(self):
        self._td.cleanup()

    def _harness(self, problem, kernel):
        p = subprocess.run([sys.executable, HARNESS, "verify", "--kernel", kernel,
                            "--problem", problem, "--no-ref-cache"],
                           capture_output=True, text=True, timeout=300)
        import json
        return json.loads(p.stdout.splitlines()[-1])

    def test_generated_problem_verifies_with_helpers_inlined(self):
        out_dir = os.path.join(self.dir, "gen")
        os.makedirs(out_dir)
        problem, kernel, changed = cp.prepare(os.path.join(self.src, "kern.py"), "scaled",
                                              self.binding, out_dir, inline=True)
        self.assertEqual(changed, "helpers inlined")
        with open(kernel) as f:
            text = f.read()
        self.assertNotIn("from tiling import", text)
        self.assertIn("def coverage_entry(x, repeat):", text)  # the tuple goes in the entry
        os.remove(os.path.join(out_dir, "tiling.py"))  # the copy must stand alone
        res = self._harness(problem, kernel)
        self.assertEqual(res["status"], "ok", res.get("failure"))
        self.assertTrue(res["verify"]["correct"])

    def test_without_inlining_a_lone_copy_misses_its_helper(self):
        out_dir = os.path.join(self.dir, "gen")
        os.makedirs(out_dir)
        problem, kernel, changed = cp.prepare(os.path.join(self.src, "kern.py"), "scaled",
                                              self.binding, out_dir)
        self.assertEqual(changed, "")
        os.remove(os.path.join(out_dir, "tiling.py"))
        res = self._harness(problem, kernel)
        self.assertEqual(res["status"], "failed")
        self.assertEqual(cp._one_file(res["failure"]["message"]), "one-file")

    def test_missing_host_libraries_become_inert_stand_ins(self):
        with open(os.path.join(self.src, "kern.py")) as f:
            text = f.read()
        text = text.replace("from tiling import scale_of",
                            "from tiling import scale_of\nimport torch_xla.core.xla_model as xm\n"
                            "from torch_xla.core import functions as xf\n\n\n"
                            "def host_side(t: xm.Tensor) -> xf.Thing:\n"
                            "    return xm.mark_step(t)")
        with open(os.path.join(self.src, "kern.py"), "w") as f:
            f.write(text)
        out_dir = os.path.join(self.dir, "gen")
        os.makedirs(out_dir)
        finder = cs._HostStubFinder()  # the direct run stubs host libraries (as main() does)
        sys.meta_path.append(finder)
        try:
            problem, kernel, changed = cp.prepare(os.path.join(self.src, "kern.py"), "scaled",
                                                  self.binding, out_dir, inline=True,
                                                  stub_hosts=True)
        finally:
            sys.meta_path.remove(finder)
        self.assertEqual(changed, "helpers inlined; host libraries stubbed (torch_xla)")
        res = self._harness(problem, kernel)
        self.assertEqual(res["status"], "ok", res.get("failure"))

    def test_failure_classes(self):
        self.assertEqual(cp._one_file("import failed: No module named 'torch'"), "host-lib")
        self.assertEqual(cp._one_file("import failed: No module named 'common'"), "one-file")
        self.assertIsNone(cp._one_file("mismatch on seed 0"))


if __name__ == "__main__":
    unittest.main()
