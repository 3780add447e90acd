"""Kernels that bring their own modules or import host libraries the machine lacks.

A kernel file may import modules beside it (`import common`, `from .utils import f`): the
sandbox shows those read-only, never the problem file even when it sits in the same folder.
A host library imported at the top of the file but never used by the selected kernel gets an
inert stand-in; a kernel that does use a missing library fails with compile_error naming it."""
import os
import unittest

from tests.python.harness import util
from tests.python.harness.util import TempDir, autocomp_harness, write

from harnesslib import hostlibs, scan  # noqa: E402  (util puts the harness folder on sys.path)

PROBLEM = '''
import numpy as np

SEEDS = (0,)


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, 512), dtype=np.float32)}


def reference(x):
    return 2.0 * x + 1.0
'''

HELPER = '''
import neuronxcc.nki.language as nl

OFFSET = 1.0


def scale_and_shift(tile):
    return nl.add(nl.multiply(tile, 2.0), OFFSET)
'''

SIBLING_KERNEL = '''
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import {module}
from {module} import scale_and_shift


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, scale_and_shift(nl.load(x)))
    return out
'''

RELATIVE_KERNEL = '''
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from .ops_util import scale_and_shift
from . import consts


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(scale_and_shift(nl.load(x)), consts.ZERO))
    return out
'''

# A missing host library imported at the top; the selected kernel never reaches `reference`.
HOST_LIB_UNUSED = '''
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import autocomp_absent_torch as torch
from autocomp_absent_scipy import special


def reference_with_torch(arr: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(arr) * 2 + special.erf(0.0) + 1


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.multiply(nl.load(x), 2.0), 1.0))
    return out


if __name__ == "__main__":
    print(torch.zeros(3))
'''

HOST_LIB_USED = '''
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import autocomp_absent_torch as torch


@nki.jit
def kernel(x):
    scale = torch.tensor(2.0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.multiply(nl.load(x), scale), 1.0))
    return out
'''

# Right only when the problem file beside it is out of the kernel's view.
PEEKING_KERNEL = '''
import os
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

HERE = os.path.dirname(os.path.abspath(__file__))
SEEN = os.path.exists(os.path.join(HERE, "problem.py"))
SHIFT = 100.0 if SEEN else 1.0


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.multiply(nl.load(x), 2.0), SHIFT))
    return out
'''

IMPORTING_PROBLEM = '''
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import problem

REFERENCE = problem.reference

@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.multiply(nl.load(x), 2.0), 1.0))
    return out
'''


def verify(kernel, problem):
    return autocomp_harness.run(["verify", "--kernel", kernel, "--problem", problem,
                                 "--no-ref-cache"])


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class KernelModulesVerify(unittest.TestCase):
    def assert_correct(self, out):
        self.assertEqual(out["status"], "ok", out.get("failure"))
        self.assertTrue(out["verify"]["correct"], out["verify"])

    def test_kernel_importing_a_sibling_module_verifies(self):
        with TempDir() as d:
            write(d, "common_ops.py", HELPER)
            kernel = write(d, "kernel.py", SIBLING_KERNEL.format(module="common_ops"))
            self.assert_correct(verify(kernel, write(d, "problem.py", PROBLEM)))

    def test_package_relative_imports_verify(self):
        with TempDir() as d:
            write(d, "__init__.py", "")
            write(d, "ops_util.py", HELPER)
            write(d, "consts.py", "ZERO = 0.0\n")
            kernel = write(d, "kernel.py", RELATIVE_KERNEL)
            self.assert_correct(verify(kernel, write(d, "problem.py", PROBLEM)))

    def test_imports_from_the_package_above_the_kernel_verify(self):
        with TempDir() as d:
            os.makedirs(os.path.join(d, "util"))
            os.makedirs(os.path.join(d, "kern"))
            write(d, "__init__.py", "")
            write(os.path.join(d, "util"), "ops_util.py", HELPER)
            write(os.path.join(d, "kern"), "consts.py", "ZERO = 0.0\n")
            kernel = write(os.path.join(d, "kern"), "kernel.py", RELATIVE_KERNEL.replace(
                "from .ops_util", "from ..util.ops_util"))
            self.assert_correct(verify(kernel, write(d, "problem.py", PROBLEM)))

    def test_relative_import_of_nothing_beside_the_kernel_is_refused(self):
        with TempDir() as d:
            kernel = write(d, "kernel.py", RELATIVE_KERNEL)
            out = verify(kernel, write(d, "problem.py", PROBLEM))
            self.assertEqual(out["status"], "failed")
            self.assertIn("ops_util", out["failure"]["message"])

    def test_unused_missing_host_library_gets_a_stand_in(self):
        with TempDir() as d:
            kernel = write(d, "kernel.py", HOST_LIB_UNUSED)
            self.assert_correct(verify(kernel, write(d, "problem.py", PROBLEM)))

    def test_kernel_that_uses_a_missing_library_fails_naming_it(self):
        with TempDir() as d:
            kernel = write(d, "kernel.py", HOST_LIB_USED)
            out = verify(kernel, write(d, "problem.py", PROBLEM))
            self.assertEqual(out["status"], "failed")
            self.assertEqual(out["failure"]["kind"], "compile_error", out["failure"])
            self.assertIn("'autocomp_absent_torch'", out["failure"]["message"])
            self.assertIn("not installed", out["failure"]["message"])

    def test_problem_file_beside_the_kernel_is_invisible(self):
        with TempDir() as d:
            write(d, "common_ops.py", HELPER)
            kernel = write(d, "kernel.py", PEEKING_KERNEL)
            self.assert_correct(verify(kernel, write(d, "problem.py", PROBLEM)))

    def test_importing_the_problem_file_fails(self):
        with TempDir() as d:
            kernel = write(d, "kernel.py", IMPORTING_PROBLEM)
            out = verify(kernel, write(d, "problem.py", PROBLEM))
            self.assertEqual(out["status"], "failed")
            self.assertEqual(out["failure"]["kind"], "compile_error", out["failure"])
            self.assertIn("'problem'", out["failure"]["message"])


class StandInsAndReach(unittest.TestCase):
    def test_only_unused_missing_modules_get_stand_ins(self):
        with TempDir() as d:
            unused = write(d, "a.py", HOST_LIB_UNUSED)
            self.assertEqual(hostlibs.unused_missing(unused, None, ["x"]),
                             {"autocomp_absent_torch", "autocomp_absent_scipy"})
            used = write(d, "b.py", HOST_LIB_USED)
            self.assertEqual(hostlibs.unused_missing(used, None, ["x"]), set())

    def test_a_touched_stand_in_raises_naming_the_module(self):
        value = hostlibs._Absent("torch.zeros")
        with self.assertRaises(hostlibs.HostLibraryMissing) as caught:
            value(3)
        self.assertIn("torch.zeros", str(caught.exception))
        with self.assertRaises(hostlibs.HostLibraryMissing):
            bool(value.float32)

    def test_shape_indices_in_a_helper_are_shape_math(self):
        with TempDir() as d:
            write(d, "shapes.py", """
                import numpy as np
                import neuronxcc.nki.language as nl


                def flat_shape(ref, dim):
                    return [int(np.prod(ref.shape[:dim])), int(np.prod(ref.shape[dim + 1:]))]


                def transposed(src, dim):
                    shape = flat_shape(src, dim)
                    return nl.ndarray(shape=(shape[1], shape[0]), dtype=src.dtype, buffer=nl.hbm)
                """)
            kernel = write(d, "kernel.py", SIBLING_KERNEL.format(module="shapes").replace(
                "scale_and_shift", "transposed"))
            self.assertEqual(scan.scan_file(kernel, ("x",), None, ["x"]), [])

    def test_scan_follows_relative_imports_into_helpers(self):
        with TempDir() as d:
            write(d, "ops_util.py", "import subprocess\n\ndef scale_and_shift(t):\n"
                                    "    return subprocess.run(t)\n")
            write(d, "consts.py", "ZERO = 0.0\n")
            kernel = write(d, "kernel.py", RELATIVE_KERNEL)
            findings = scan.scan_file(kernel, ("x",), None, ["x"])
            self.assertTrue(any("ops_util.py" in f.reason and "subprocess" in f.reason
                                for f in findings), findings)
