"""Static scan: hostile kernels are refused before they run, honest kernels pass untouched."""
import glob
import os
import unittest

from tests.python.harness import util
from tests.python.harness.test_harness_sim import ADD_KERNEL, ADD_PROBLEM
from tests.python.harness.util import autocomp_harness, write

from harnesslib import scan  # noqa: E402  (util puts the harness folder on sys.path)

HOSTILE = os.path.join(util.FIXTURES, "hostile")

# fixture -> (a rule that must be among the findings, line of the first finding)
EXPECTED = {
    "private_attr.py": ("private", 8),
    "slots_getattr.py": ("private", 8),
    "gc_walk.py": ("import", 1),
    "inspect_stack.py": ("import", 1),
    "generator_frame.py": ("frame", 9),
    "sys_modules.py": ("import", 9),
    "numpy_view.py": ("tensor-numpy", 9),
    "tensor_data.py": ("tensor-numpy", 8),
    "forged_print.py": ("forged-result", 8),
    "json_patch.py": ("internals", 6),
    "sim_internals.py": ("internals", 8),
    "patch_api.py": ("internals", 6),
    "eval_import.py": ("builtin", 8),
    "builtins_dunder.py": ("private", 8),
    "format_string.py": ("private", 8),
    "object_setattr.py": ("private", 8),
    "file_write.py": ("builtin", 8),
    "leftover_thread.py": ("import", 1),
    "private_import.py": ("internals", 4),
    "storage_alias.py": ("tensor-numpy", 9),
    "storage_chain.py": ("internals", 8),
    "os_write.py": ("import", 13),
    "numpy_helper.py": ("tensor-numpy", 17),
    "annotated_scalars.py": ("tensor-numpy", 10),
}


class ScanRules(unittest.TestCase):
    def test_every_hostile_fixture_is_listed(self):
        self.assertEqual(sorted(os.listdir(HOSTILE)), sorted(EXPECTED))

    def test_hostile_kernels_are_refused_with_rule_and_line(self):
        for name, (rule, line) in EXPECTED.items():
            with self.subTest(name):
                findings = scan.scan_file(os.path.join(HOSTILE, name), ("a", "b"))
                self.assertTrue(findings, name)
                self.assertIn(rule, [f.rule for f in findings], findings)
                self.assertEqual(findings[0].line, line, findings)
                self.assertTrue(findings[0].reason)

    def test_every_seed_kernel_passes(self):
        kernels = [p for p in sorted(glob.glob(os.path.join(util.SEEDS_DIR, "*", "*.py")))
                   if os.path.basename(p) != "problem.py"]
        self.assertGreaterEqual(len(kernels), 20)
        for path in kernels:
            with self.subTest(path):
                self.assertEqual(scan.scan_file(path), [])

    def test_host_side_numpy_and_shape_math_pass(self):
        source = util.textwrap.dedent('''
            import math
            import numpy as np
            import nki
            import nki.language as nl
            from functools import partial

            EPS = np.float32(1e-5)

            def tiles(n: int, tile=128):
                return int(np.ceil(n / tile))

            @nki.jit
            def kernel(x, out):
                d = x.shape[1]
                scale = 1.0 / np.sqrt(d)
                n = int(np.prod(x.shape)) // math.prod(x.shape[1:])
                t = nl.load(x[0:128, 0:d])
                buf = nl.ndarray((128, d), dtype=x.dtype, buffer=nl.sbuf)
                buf[nl.arange(128)[:, None], nl.arange(d)[None, :]] = t
                alias = buf
                nl.store(out[0:128, 0:d], value=nl.multiply(alias, scale * EPS))

            if __name__ == "__main__":
                import os, sys
                print(os.getpid(), sys.argv, np.asarray(x))
            ''')
        self.assertEqual(scan.scan_source(source), [])

    def test_numpy_on_a_tensor_bound_from_nki_is_refused(self):
        source = util.textwrap.dedent('''
            import numpy as np
            import nki.language as nl

            def kernel(x):
                t = nl.load(x[0:128, 0:64])
                return np.exp(t)
            ''')
        findings = scan.scan_source(source)
        self.assertEqual([(f.rule, f.line) for f in findings], [("tensor-numpy", 7)])

    def test_helper_modules_next_to_the_kernel_are_scanned(self):
        with util.TempDir() as d:
            write(d, "sneaky_helper.py", "import gc\n\ndef objects():\n    return gc.get_objects()\n")
            write(d, "clean_helper.py", "TILE = 128\n")
            kernel = write(d, "k.py", ADD_KERNEL.replace(
                "import neuronxcc.nki as nki",
                "import neuronxcc.nki as nki\nimport clean_helper\nfrom sneaky_helper import objects"))
            findings = scan.scan_file(kernel)
        self.assertEqual(len(findings), 1, findings)
        self.assertEqual((findings[0].rule, findings[0].line), ("import", 3))
        self.assertIn("sneaky_helper.py (line 1)", findings[0].reason)

    def test_numpy_reference_functions_and_launchers_in_a_kernel_file_pass(self):
        source = util.textwrap.dedent('''
            import os
            import sys
            import argparse
            import numpy as np
            import neuronxcc.nki as nki
            import neuronxcc.nki.language as nl

            os.environ["NEURON_FRAMEWORK_DEBUG"] = "1"
            HERE = os.path.dirname(__file__)

            @nki.jit
            def kernel(x):
                out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
                nl.store(out, value=nl.exp(nl.load(x)))
                return out

            def np_reference(x):
                return np.exp(x)

            def check():
                x = np.ones((128, 4), np.float32)
                z = nki.baremetal()(kernel)(x)
                print(np.allclose(z, np_reference(x)), sys.argv)
            ''')
        self.assertEqual(scan.scan_source(source), [])

    def test_message_names_rule_and_line(self):
        findings = scan.scan_file(os.path.join(HOSTILE, "gc_walk.py"))
        text = scan.refusal_message(findings)
        self.assertIn("rule import, line 1", text)
        self.assertIn("'gc'", text)


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class HostileKernelsThroughTheHarness(unittest.TestCase):
    def test_refused_before_running_and_never_timed(self):
        with util.TempDir() as d:
            problem = write(d, "problem.py", ADD_PROBLEM)
            for name in sorted(EXPECTED):
                with self.subTest(name):
                    out = autocomp_harness.run(["evaluate", "--kernel",
                                                os.path.join(HOSTILE, name), "--problem", problem,
                                                "--seeds", "0", "--no-ref-cache"])
                    self.assertEqual(out["status"], "failed")
                    self.assertEqual(out["failure"]["kind"], "forbidden_access", out["failure"])
                    self.assertEqual(out["failure"]["stage"], "load")
                    self.assertEqual(out["failure"]["line"], EXPECTED[name][1])
                    self.assertIn("rule %s" % EXPECTED[name][0], out["failure"]["message"])
                    for section in ("verify", "benchmark", "profile", "kernel"):
                        self.assertNotIn(section, out)

    def test_honest_kernel_still_verifies(self):
        with util.TempDir() as d:
            out = autocomp_harness.run(["verify", "--kernel", write(d, "k.py", ADD_KERNEL),
                                        "--problem", write(d, "p.py", ADD_PROBLEM),
                                        "--seeds", "0", "--no-ref-cache"])
        self.assertEqual(out["status"], "ok", out)


if __name__ == "__main__":
    unittest.main()
