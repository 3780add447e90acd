"""Ops that run in a simulator but fail on hardware: rejected in the `nki` namespace (SDK
2.29+), still accepted in the legacy `neuronxcc.nki` namespace (what its compiler took)."""
import importlib.util
import os
import tempfile
import textwrap
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
from nkisim.api import hwrules
from nkisim.sandbox import replay
from nkisim import sandbox

HEADERS = {
    "nki": "import nki\nimport nki.isa as nisa\nimport nki.language as nl\n",
    "legacy": "import neuronxcc.nki as nki\nimport neuronxcc.nki.isa as nisa\n"
              "import neuronxcc.nki.language as nl\n",
}

# one kernel per refused form; each returns an HBM tensor
BODY = textwrap.dedent('''
    import numpy as np


    def _out(shape):
        return nl.ndarray(shape, dtype=nl.float32, buffer=nl.shared_hbm)


    @nki.jit
    def divide(x, y):
        out = _out(x.shape)
        nl.store(out, nl.divide(nl.load(x), nl.load(y)))
        return out


    @nki.jit
    def mod(x, y):
        out = _out(x.shape)
        nl.store(out, nl.mod(nl.load(x), nl.load(y)))
        return out


    @nki.jit
    def fmod(x, y):
        out = _out(x.shape)
        nl.store(out, nl.fmod(nl.load(x), nl.load(y)))
        return out


    @nki.jit
    def power_scalar(x, y):
        out = _out(x.shape)
        nl.store(out, nl.power(nl.load(x), 2.0))
        return out


    @nki.jit
    def power_tensor(x, y):
        out = _out(x.shape)
        nl.store(out, nl.power(nl.load(x), nl.load(y)))
        return out


    @nki.jit
    def broadcast_add(x, y):
        out = _out(x.shape)
        nl.store(out, nl.add(nl.load(x), nl.load(y[:, 0:1])))
        return out


    @nki.jit
    def equal_shape_add(x, y):
        out = _out(x.shape)
        nl.store(out, nl.add(nl.load(x), nl.load(y)))
        return out


    @nki.jit
    def scalar_add(x, y):
        out = _out(x.shape)
        nl.store(out, nl.add(nl.load(x), 1.5))
        return out


    @nki.jit
    def softmax(x, y):
        out = _out(x.shape)
        nl.store(out, nl.softmax(nl.load(x), axis=1))
        return out


    @nki.jit
    def rms_norm(x, y):
        out = _out(x.shape)
        nl.store(out, nl.rms_norm(nl.load(x), nl.load(y), axis=1))
        return out


    @nki.jit
    def matmul_plain(x, y):
        out = _out((128, 128))
        r = nl.matmul(nl.load(x[:, 0:128]), nl.load(y[:, 0:128]))
        nl.store(out, nl.copy(r))
        return out


    @nki.jit
    def matmul_transposed(x, y):
        out = _out((128, 128))
        r = nl.matmul(nl.load(x[:, 0:128]), nl.load(y[:, 0:128]), transpose_x=True)
        nl.store(out, nl.copy(r))
        return out


    @nki.jit
    def store_psum(x, y):
        out = _out((128, 128))
        r = nl.matmul(nl.load(x[:, 0:128]), nl.load(y[:, 0:128]), transpose_x=True)
        nl.store(out, r)
        return out


    @nki.jit
    def dma_copy_psum(x, y):
        out = _out((128, 128))
        r = nl.matmul(nl.load(x[:, 0:128]), nl.load(y[:, 0:128]), transpose_x=True)
        t = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=r)
        nl.store(out, t)
        return out
''')

BODY += textwrap.dedent('''

    @nki.jit
    def dynamic_loop(x, y):
        out = _out(x.shape)
        for i in nl.dynamic_range(1):
            nl.store(out, nl.load(x))
        return out
''')

BODY += textwrap.dedent('''

    @nki.jit
    def matmul_psum_operand(x, y):
        out = _out((128, 128))
        t = nisa.nc_transpose(nl.load(x[:, 0:128]))          # in PSUM
        r = nisa.nc_matmul(t, nl.load(y[:, 0:128]))
        nl.store(out, nl.copy(r))
        return out


    @nki.jit
    def matmul_true_mask(x, y):
        out = _out((128, 128))
        i_p, i_f = nl.mgrid[0:128, 0:128]
        r = nisa.nc_matmul(nl.load(x[:, 0:128]), nl.load(y[:, 0:128]), mask=(i_p < 128))
        nl.store(out, nl.copy(r))
        return out
''')

REFUSED = ["divide", "mod", "fmod", "power_scalar", "broadcast_add", "softmax", "rms_norm",
           "matmul_plain", "store_psum"]
ALLOWED = ["power_tensor", "equal_shape_add", "scalar_add", "matmul_transposed"]


def _load(ns, tmp):
    path = os.path.join(tmp, "hw_%s_kernels.py" % ns)
    with open(path, "w") as f:
        f.write(HEADERS[ns] + BODY)
    spec = importlib.util.spec_from_file_location("nkisim_test_hw_%s" % ns, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class HardwareRulesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        nkisim.activate()  # another suite may have deactivated the simulator's modules
        cls._tmp = tempfile.TemporaryDirectory()
        cls.mods = {ns: _load(ns, cls._tmp.name) for ns in HEADERS}
        rng = np.random.default_rng(3)
        cls.x = rng.uniform(0.5, 2.0, (128, 512)).astype(np.float32)
        cls.y = rng.uniform(0.5, 2.0, (128, 512)).astype(np.float32)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def run_kernel(self, ns, name):
        return nkisim.simulate(getattr(self.mods[ns], name), {"x": self.x, "y": self.y})

    def test_nki_namespace_refuses_with_the_reason(self):
        for name in REFUSED + ["dma_copy_psum"]:
            with self.subTest(name=name):
                with self.assertRaises(nkisim.NkiCompileError) as cm:
                    self.run_kernel("nki", name)
                self.assertIn(hwrules.REASON, cm.exception.message)
                self.assertIsNotNone(cm.exception.line)

    def test_nki_0_7_traced_front_end_has_no_dynamic_range(self):
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            self.run_kernel("nki", "dynamic_loop")
        self.assertIn("nl.fori_loop", cm.exception.message)
        self.assertEqual(len(self.run_kernel("legacy", "dynamic_loop").outputs), 1)

    def test_psum_matmul_operand_is_staged_by_the_legacy_compiler_only(self):
        (out,) = self.run_kernel("legacy", "matmul_psum_operand").outputs
        np.testing.assert_allclose(out, self.x[:, 0:128] @ self.y[:, 0:128], rtol=1e-4)
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            self.run_kernel("nki", "matmul_psum_operand")
        self.assertIn("SBUF", cm.exception.message)

    def test_a_mask_true_everywhere_masks_nothing(self):
        (out,) = self.run_kernel("nki", "matmul_true_mask").outputs
        np.testing.assert_allclose(out, self.x[:, 0:128].T @ self.y[:, 0:128], rtol=1e-4)

    def test_nki_namespace_accepts_the_supported_forms(self):
        for name in ALLOWED:
            with self.subTest(name=name):
                self.assertEqual(len(self.run_kernel("nki", name).outputs), 1)

    def test_legacy_namespace_keeps_what_its_compiler_accepted(self):
        for name in REFUSED + ALLOWED:
            with self.subTest(name=name):
                self.assertEqual(len(self.run_kernel("legacy", name).outputs), 1)

    def test_legacy_results_are_still_computed(self):
        (out,) = self.run_kernel("legacy", "divide").outputs
        np.testing.assert_allclose(out, self.x / self.y, rtol=1e-5)
        (out,) = self.run_kernel("legacy", "broadcast_add").outputs
        np.testing.assert_allclose(out, self.x + self.y[:, 0:1], rtol=1e-5)

    def test_namespace_of_a_file(self):
        self.assertEqual(hwrules.namespace_of(vars(self.mods["nki"])), "nki")
        self.assertEqual(hwrules.namespace_of(vars(self.mods["legacy"])), "legacy")
        self.assertIsNone(hwrules.namespace_of({"np": np}))


if __name__ == "__main__":
    unittest.main()


class SandboxNamespaceTest(unittest.TestCase):
    """The same rules and APIs through the harness's path: the kernel records its API calls in
    a child process, the trace is replayed here."""

    def setUp(self):
        self._td = tempfile.TemporaryDirectory(prefix="hwrules-")
        rng = np.random.default_rng(5)
        self.inputs = {"x": rng.uniform(0.5, 2.0, (128, 256)).astype(np.float32),
                       "y": rng.uniform(0.5, 2.0, (128, 256)).astype(np.float32)}

    def tearDown(self):
        self._td.cleanup()

    def record(self, ns, body):
        path = os.path.join(self._td.name, "k_%s.py" % ns)
        with open(path, "w") as f:
            f.write(HEADERS[ns] + textwrap.dedent(body))
        specs = {k: {"shape": list(v.shape), "dtype": v.dtype.name}
                 for k, v in self.inputs.items()}
        ans = sandbox.record_trace({
            "kernel_path": path, "loader": _util.kernel_loader(), "target": "trn2",
            "input_names": list(self.inputs), "kernel_name": None, "problem_kernel": None,
            "inputs": specs, "input_dtypes": {}, "grid": None})
        return path, ans

    DIVIDE = '''
        @nki.jit
        def k(x, y):
            out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
            nl.store(out, nl.divide(nl.load(x), nl.load(y)))
            return out
        '''

    def test_recording_refuses_in_the_nki_namespace(self):
        _, ans = self.record("nki", self.DIVIDE)
        self.assertFalse(ans["ok"], ans)
        self.assertEqual(ans["kind"], "compile_error")
        self.assertIn(hwrules.REASON, ans["message"])

    def test_legacy_records_and_replays(self):
        path, trace = self.record("legacy", self.DIVIDE)
        self.assertTrue(trace["ok"], trace)
        res = replay.replay(trace, self.inputs, target="trn2", kernel_path=path)
        np.testing.assert_allclose(res.outputs[0], self.inputs["x"] / self.inputs["y"],
                                   rtol=1e-6)

    def test_new_apis_record_and_replay(self):
        body = '''
        import numpy as np
        from nki.language.constants import sizeinbytes


        @nki.jit
        def k(x, y):
            out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
            acc = nl.full((128, 64), nl.finfo(nl.bfloat16).min, dtype=nl.float32,
                          buffer=nl.sbuf)
            v = x.reshape(shape=(128, 4, 64))
            for j in nl.affine_range(sizeinbytes(x.dtype)):
                t = nl.load(v[:, j, :])
                acc[...] = nl.loop_reduce(t, op=np.maximum, loop_indices=[j])
            nl.store(out, acc)
            return out
        '''
        path, trace = self.record("nki", body)
        self.assertTrue(trace["ok"], trace)
        res = replay.replay(trace, self.inputs, target="trn2", kernel_path=path)
        x = self.inputs["x"].reshape(128, 4, 64)
        np.testing.assert_array_equal(res.outputs[0], x.max(axis=1))
