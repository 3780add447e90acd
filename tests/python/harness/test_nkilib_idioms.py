"""Kernels written as the NKI Library writes them (tests/nkilib/idioms/idiomlib: our own small
package) load, pass the static scan and verify: the package's private names are its own,
NKIObject configs, typing annotations, address=None and None comparisons work. Private names
of nki, numpy and the standard library stay refused inside a package too."""
import os
import shutil
import tempfile
import unittest

from tests.python.harness import util
from tests.python.harness.util import autocomp_harness, write

from harnesslib import scan  # noqa: E402

IDIOMS = os.path.join(util.REPO, "tests", "nkilib", "idioms")
LIB = os.path.join(IDIOMS, "idiomlib")
SCALE = os.path.join(LIB, "core", "scale", "scale.py")


def verify(kernel, problem, extra=()):
    return autocomp_harness.run(["verify", "--kernel", kernel, "--problem", problem,
                                 "--no-ref-cache", "--target", "trn2"] + list(extra))


class PackageKernels(unittest.TestCase):
    def test_package_kernel_with_private_helpers_and_configs_verifies(self):
        res = verify(SCALE, os.path.join(IDIOMS, "problem_scale.py"))
        self.assertTrue((res.get("verify") or {}).get("correct"), res.get("failure"))

    def test_scan_accepts_the_packages_private_names(self):
        self.assertEqual(scan.scan_file(SCALE, ("x",), kernel_name="scale"), [])

    def test_private_names_of_foreign_code_stay_refused_in_a_package(self):
        for bad, rule in (("import numpy as np\nCORE = np._core\n", "private"),
                          ("import os\nEXIT = os._exit\n", "private"),
                          ("import numpy as np\nm = np\nCORE = m._core\n", "private"),
                          ("from numpy import _core\n", "private"),
                          ("import nki.language as nl\nX = nl._private_thing\n", "private"),
                          ("X = __builtins__\n", "private")):
            with self.subTest(bad):
                d = tempfile.mkdtemp()
                self.addCleanup(shutil.rmtree, d)
                shutil.copytree(LIB, os.path.join(d, "idiomlib"))
                helper = os.path.join(d, "idiomlib", "core", "utils", "_tiles.py")
                with open(helper, "a") as f:
                    f.write("\n" + bad)
                kernel = os.path.join(d, "idiomlib", "core", "scale", "scale.py")
                findings = scan.scan_file(kernel, ("x",), kernel_name="scale")
                self.assertIn(rule, [f.rule for f in findings], findings)
                self.assertIn("_tiles.py", findings[0].reason)

    def test_a_package_module_that_does_not_parse_is_named_with_its_line(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        shutil.copytree(LIB, os.path.join(d, "idiomlib"))
        with open(os.path.join(d, "idiomlib", "core", "utils", "config.py"), "a") as f:
            f.write("\ndef broken(:\n    pass\n")
        res = verify(os.path.join(d, "idiomlib", "core", "scale", "scale.py"),
                     os.path.join(IDIOMS, "problem_scale.py"))
        failure = res.get("failure") or {}
        self.assertEqual(failure.get("kind"), "compile_error", res)
        self.assertIn("utils/config.py, line", failure.get("message", ""))

    def test_a_helper_reaching_above_the_kernels_folder_widens_the_package(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        write(d, "__init__.py", "")
        os.makedirs(os.path.join(d, "a", "b"))
        os.makedirs(os.path.join(d, "util"))
        write(os.path.join(d, "util"), "base.py", "FACTOR = 2.0\n")
        write(os.path.join(d, "a"), "mid.py", "from ..util.base import FACTOR as _F\n")
        kernel = write(os.path.join(d, "a", "b"), "k.py", '''
            import nki
            import nki.isa as nisa
            import nki.language as nl
            from ..mid import _F


            @nki.jit
            def kernel(x):
                out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
                t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=x)
                nisa.tensor_scalar(t, t, op0=nl.multiply, operand0=_F)
                nisa.dma_copy(dst=out, src=t)
                return out
            ''')
        res = verify(kernel, os.path.join(IDIOMS, "problem_scale.py"), ["--kernel-name",
                                                                       "kernel"])
        self.assertTrue((res.get("verify") or {}).get("correct"), res.get("failure"))


if __name__ == "__main__":
    unittest.main()


class Binding(unittest.TestCase):
    CFG = os.path.join(LIB, "core", "scale", "scale_cfg.py")
    PROBLEM = os.path.join(IDIOMS, "problem_scale_cfg.py")

    def test_call_kernel_builds_config_and_enum_and_launches_on_two_cores(self):
        res = verify(self.CFG, self.PROBLEM)
        self.assertTrue((res.get("verify") or {}).get("correct"), res.get("failure"))

    def _problem(self, d, hook):
        with open(self.PROBLEM) as f:
            text = f.read()
        head = text[:text.index("def call_kernel")]
        return write(d, "p.py", head + hook)

    def test_without_a_hook_the_config_parameter_is_named(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        res = verify(self.CFG, self._problem(d, ""))
        msg = (res.get("failure") or {}).get("message", "")
        self.assertIn("'cfg'", msg)
        self.assertIn("call_kernel(kernel, **inputs)", msg)

    def test_a_hook_call_that_does_not_bind_names_the_parameter(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        res = verify(self.CFG, self._problem(d, "def call_kernel(kernel, x):\n"
                                                "    return kernel[2](x)\n"))
        failure = res.get("failure") or {}
        self.assertEqual(failure.get("kind"), "compile_error", res)
        self.assertIn("parameter 'cfg'", failure.get("message", ""))
        self.assertIn("ScaleConfig", failure.get("message", ""))

    def test_hook_source_is_read_without_running_the_problem(self):
        from harnesslib import binding
        hook = binding.hook_source(self.PROBLEM)
        self.assertEqual(hook["name"], "call_kernel")
        self.assertIn("ScaleMode.HALVE", hook["source"])
        self.assertEqual(hook["source"].count("\n", 0, hook["source"].index("def ")),
                         hook["line"] - 1)  # lines keep their numbers for error messages


class LaunchGridFromTheHook(unittest.TestCase):
    """`kernel[2](...)` in a problem's call_kernel launches two programs, as on hardware."""

    KERNEL = """
        import nki
        import nki.language as nl


        @nki.jit
        def scaled(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            n = nl.num_programs(axes=0)
            p = nl.program_id(axis=0)
            rows = x.shape[0] // n
            t = nl.load(x[p * rows:(p + 1) * rows, :])
            nl.store(out[p * rows:(p + 1) * rows, :], value=nl.multiply(t, float(n)))
            return out
        """
    PROBLEM = """
        import numpy as np
        KERNEL = "scaled"


        def inputs(seed):
            return {"x": np.random.default_rng(seed).standard_normal((256, 64)).astype(np.float32)}


        def reference(x):
            return x * 2.0  # each of the two programs scales its half by the program count


        def call_kernel(kernel, x):
            return kernel[%s](x)
        """

    def _run(self, launch):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        kernel = write(d, "k.py", self.KERNEL)
        problem = write(d, "p.py", self.PROBLEM % launch)
        return verify(kernel, problem)

    def test_the_hooks_grid_runs_every_program(self):
        res = self._run("2")
        self.assertTrue((res.get("verify") or {}).get("correct"), res.get("failure"))
        self.assertEqual(res.get("lnc"), 2)

    def test_a_one_program_launch_is_not_taken_for_two(self):
        res = self._run("1")
        self.assertFalse((res.get("verify") or {}).get("correct"), res)


class BindingByPackageName(unittest.TestCase):
    def test_the_hook_may_import_a_named_package_by_its_name(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        with open(Binding.PROBLEM) as f:
            text = f.read().replace("from ..utils.config import",
                                    "from idiomlib.core.utils.config import")
        res = verify(Binding.CFG, write(d, "p.py", text))
        self.assertTrue((res.get("verify") or {}).get("correct"), res.get("failure"))
