"""Legal NKI is accepted: the idiom kernels in fixtures/legal verify; the static scan judges
only the code the selected kernel reaches; the proxy boundary carries the documented tensor
surface, numpy scalars, numpy reducers and kernel allocators, and nothing beyond them."""
import glob
import os
import unittest

import numpy as np

from tests.python.harness import util
from tests.python.harness.util import autocomp_harness, write

from harnesslib import scan  # noqa: E402  (util puts the harness folder on sys.path)

LEGAL = os.path.join(util.FIXTURES, "legal")
LEGAL_KERNELS = sorted(p for p in glob.glob(os.path.join(LEGAL, "*.py"))
                       if os.path.basename(p) != "problem.py")


class LegalFixturesPassTheScan(unittest.TestCase):
    def test_each_idiom_kernel_passes_as_the_harness_selects_it(self):
        self.assertGreaterEqual(len(LEGAL_KERNELS), 8)
        for path in LEGAL_KERNELS:
            with self.subTest(os.path.basename(path)):
                self.assertEqual(scan.scan_file(path, ("x",), None, ["x", "block"]), [])


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class LegalFixturesVerify(unittest.TestCase):
    def test_each_idiom_kernel_verifies(self):
        for path in LEGAL_KERNELS:
            with self.subTest(os.path.basename(path)):
                out = autocomp_harness.run(["verify", "--kernel", path, "--problem",
                                            os.path.join(LEGAL, "problem.py"), "--no-ref-cache"])
                self.assertEqual(out["status"], "ok", out.get("failure"))
                self.assertTrue(out["verify"]["correct"], out["verify"])


HEADER = '''
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
'''

KERNEL = '''
@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(a), nl.load(b)))
    return out
'''


def _scan(source, kernel_name=None, params=("a", "b")):
    return scan.scan_source(util.textwrap.dedent(source), tensor_names=("a", "b"),
                            kernel_name=kernel_name, params=list(params))


class ScanJudgesReachedCode(unittest.TestCase):
    def test_refused_code_the_kernel_never_reaches_is_not_judged(self):
        source = HEADER + '''
import gc

def sweep():
    return [o for o in gc.get_objects()]
''' + KERNEL
        self.assertEqual(_scan(source), [])
        # judged when nothing tells which kernel runs (the whole file counts)
        self.assertEqual([f.rule for f in scan.scan_source(source)], ["import"])

    def test_a_helper_the_kernel_calls_is_judged_with_its_import(self):
        source = HEADER + '''
import gc

def sweep():
    return len(gc.get_objects())

@nki.jit
def kernel(a, b):
    n = sweep()
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    return out
'''
        findings = _scan(source)
        self.assertEqual([(f.rule, f.line) for f in findings], [("import", 5)])

    def test_helpers_are_followed_transitively_and_through_module_code(self):
        source = HEADER + '''
import inspect

def deep():
    return inspect.stack()

def middle():
    return deep()

TABLE = {"f": middle}
''' + KERNEL.replace("    out =", "    TABLE['f']()\n    out =")
        self.assertEqual([f.rule for f in _scan(source)], ["import"])

    def test_module_level_code_is_always_judged(self):
        source = HEADER + "import gc\nOBJECTS = gc.get_objects()\n" + KERNEL
        self.assertEqual([(f.rule, f.line) for f in _scan(source)], [("import", 4)])

    def test_a_function_under_a_decorator_of_the_file_counts_as_reached(self):
        # the decorator runs at import and may call what it wraps
        source = HEADER + '''
def at_import(f):
    f()
    return f

@at_import
def hidden():
    return open("/etc/passwd").read()
''' + KERNEL
        self.assertEqual([f.rule for f in _scan(source)], ["builtin"])

    def test_several_matching_kernels_are_all_judged(self):
        source = HEADER + KERNEL + '''
@nki.jit
def other(a, b):
    return open("x")
'''
        self.assertEqual([f.rule for f in _scan(source)], ["builtin"])
        self.assertEqual(_scan(source, kernel_name="kernel"), [])
        self.assertEqual([f.rule for f in _scan(source, kernel_name="other")], ["builtin"])

    def test_getattr_by_computed_name_only_on_nki_and_numpy_modules(self):
        ok = HEADER + "import numpy as np\nfrom neuronxcc.nki import isa\nOPS = ['exp']\n" + \
            KERNEL.replace("    out =", "    f = getattr(nl, OPS[0])\n    g = getattr(np, "
                           "OPS[0])\n    h = getattr(isa, OPS[0])\n    out =")
        self.assertEqual(_scan(ok), [])
        bad = HEADER + "from neuronxcc.nki.language import affine_range\nN = '__globals__'\n" + \
            KERNEL.replace("    out =", "    g = getattr(affine_range, N)\n    out =")
        self.assertEqual([f.rule for f in _scan(bad)], ["builtin"])

    def test_operator_functions_that_read_attributes_by_name_are_refused(self):
        for line in ("from operator import attrgetter", "import operator\n"
                     "F = operator.methodcaller('mro')"):
            source = HEADER + line + "\n" + KERNEL
            with self.subTest(line):
                self.assertEqual([f.rule for f in _scan(source)], ["builtin"])
        self.assertEqual(_scan(HEADER + "import operator\nMUL = operator.mul\n" + KERNEL), [])

    def test_compiler_private_modules_import_but_private_names_stay_refused(self):
        ok = HEADER + "from neuronxcc.nki._private.private_api import core_barrier\n" + KERNEL
        self.assertEqual(_scan(ok), [])
        for bad in ("from neuronxcc.nki._private.private_api import _hidden",
                    "from nkisim._private import x\nY = x", "import numpy._core as c\nC = c.x"):
            with self.subTest(bad):
                self.assertTrue(_scan(HEADER + bad + "\n" + KERNEL))

    def test_numpy_in_a_helper_refused_only_where_a_tensor_is_passed(self):
        source = HEADER + '''
import numpy as np

def rows_of(n, t):
    k = int(np.ceil(n / 128))
    return nl.load(t[0:k * 128, :])

@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, rows_of(a.shape[0], a))
    return out
'''
        self.assertEqual(_scan(source), [])
        bad = source.replace("np.ceil(n / 128)", "np.sum(t)")
        self.assertEqual([(f.rule, f.line) for f in _scan(bad)], [("tensor-numpy", 14)])

    def test_underscore_methods_of_the_files_own_classes(self):
        source = HEADER + '''
class Tiles:
    def __init__(self, n):
        self._n = n

    @classmethod
    def make(cls, n):
        return cls._checked(n)

    @classmethod
    def _checked(cls, n):
        assert n > 0
        return cls(n)

    def count(self):
        return self._n
''' + KERNEL.replace("    out =", "    n = Tiles.make(2).count()\n    out =")
        self.assertEqual(_scan(source), [])
        # the file's own objects' private names are its own (`other._n`, `self._n._m`);
        # dunders and the private names of NKI modules, their aliases and results are not
        for ok in ("    def count(self):\n        return self._n._m",
                   "    def count(self, other=None):\n        return other._n"):
            with self.subTest(ok):
                text = source.replace("    def count(self):\n        return self._n", ok)
                self.assertEqual(_scan(text), [])
        for bad in ("    def count(self):\n        return self.__class__",
                    "    def count(self):\n        return nl._storage",
                    "    def count(self):\n        m = nl\n        return m._storage",
                    "    def count(self):\n        return self.nl._storage",
                    "    def count(self):\n        t = nl.ndarray((1, 1), nl.float32)\n"
                    "        return t._data"):
            with self.subTest(bad):
                text = source.replace("    def count(self):\n        return self._n", bad)
                self.assertEqual([f.rule for f in _scan(text)], ["private"])

    def test_numpy_on_the_selected_kernels_int_parameter_is_shape_math(self):
        source = HEADER + '''
import numpy as np

@nki.jit
def kernel(a, b, size):
    rows, cols = size
    n = int(np.ceil(cols / 128))
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    return out
'''
        self.assertEqual(_scan(source, params=("a", "b", "size")), [])
        # numpy on an array parameter is still refused
        bad = source.replace("np.ceil(cols / 128)", "np.sum(a)")
        self.assertEqual([f.rule for f in _scan(bad, params=("a", "b", "size"))],
                         ["tensor-numpy"])


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class BoundaryCarriesTheApi(unittest.TestCase):
    def setUp(self):
        from nkisim.sandbox import boundary
        self.B = boundary

    def test_numpy_scalars_cross_as_scalars(self):
        for v in (np.float32(0.9), np.int32(-3), np.float64(1e-5), np.bool_(True)):
            back = self.B.decode(self.B.encode(v, None), None)
            self.assertEqual(type(back), type(v))
            self.assertEqual(back, v)

    def test_nki_dtypes_numpy_lacks_cross_as_themselves(self):
        from nkisim.data import dtypes as D
        for name in ("bfloat16", "float8_e5m2_x4", "float4_e2m1fn_x4", "float8_e8m0fnu"):
            with self.subTest(name):
                tok = getattr(D, name)
                self.assertTrue(self.B.is_value(tok))
                self.assertIs(self.B.decode(self.B.encode(tok, None), None), tok)

    def test_numpy_reducers_cross_by_name_and_other_numpy_functions_do_not(self):
        for f in (np.max, np.amax, np.sum, np.min, np.mean, np.copy):
            with self.subTest(f.__name__):
                self.assertIs(self.B.decode(self.B.encode(f, None), None), f)
        for f in (np.save, np.load):  # Python functions: only their name crosses, inert
            with self.subTest(f.__name__):
                back = self.B.decode(self.B.encode(f, self._refuse), None)
                self.assertIsInstance(back, self.B.KernelCallable)
        with self.assertRaises(self.B.NkiForbiddenAccess):
            self.B.encode(np.frombuffer, self._refuse)
        with self.assertRaises(self.B.Divergence):
            self.B.decode({"$npf": "save"}, None)

    def test_kernel_functions_cross_by_name_only_and_are_never_called(self):
        import functools

        def allocator(idx, p, f, bank=0):
            return bank, 0, 0
        for f in (allocator, functools.partial(allocator, bank=3), lambda i, p, f: (0, 0, 0)):
            e = self.B.encode(f, self._refuse)
            self.assertEqual(list(e), ["$cb"])
            back = self.B.decode(e, None)
            self.assertIsInstance(back, self.B.KernelCallable)
            with self.assertRaises(Exception) as cm:
                back(0, 0, 0)
            self.assertIn("not called by the simulator", str(cm.exception))

    def test_the_tensor_surface_is_one_table_of_documented_names(self):
        surface = self.B.TENSOR_SURFACE
        for name in ("shape", "dtype", "broadcast_to", "reshape", "view", "T", "ap"):
            self.assertIn(name, surface)
        for internal in ("st", "arr", "read", "write", "mark_written", "root", "valid"):
            self.assertNotIn(internal, surface)

    @staticmethod
    def _refuse(v):
        from nkisim.sandbox.boundary import NkiForbiddenAccess
        raise NkiForbiddenAccess("refused %r" % (v,))


HOSTILE_SURFACE = {
    # a documented method, held, does not open its tensor
    "method_owner": "    f = t.reshape\n    s = f.obj\n",
    # simulator tensor methods that are no NKI API
    "read": "    s = t.read\n",
    "storage": "    s = getattr(t, 'mark_written')\n",
}


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class BoundaryRefusesTheRest(unittest.TestCase):
    def test_reaching_past_a_documented_method_is_forbidden(self):
        for name, body in HOSTILE_SURFACE.items():
            with self.subTest(name), util.TempDir() as d:
                # no static scan in front: the boundary alone answers
                from harnesslib.simdev import SimDevice
                dev = SimDevice("trn2")
                k = write(d, "k.py", HEADER + (
                    "\n@nki.jit\ndef kernel(a, b):\n"
                    "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
                    "    t = nl.load(a)\n" + body + "    nl.store(out, t)\n    return out\n"))
                with self.assertRaises(Exception) as cm:
                    h = dev.load_kernel(k, ["a", "b"])
                    rng = np.random.default_rng(0)
                    dev.run(h, {"a": rng.standard_normal((128, 64), dtype=np.float32),
                                "b": rng.standard_normal((128, 64), dtype=np.float32)})
                self.assertIn("forbidden", str(getattr(cm.exception, "kind", cm.exception))
                              + str(cm.exception))


if __name__ == "__main__":
    unittest.main()
