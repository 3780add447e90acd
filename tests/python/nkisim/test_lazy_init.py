"""Accumulators the kernel never initialises (MODEL.md, "Reductions into uninitialised
tensors"): a `nl.zeros(..., buffer=nl.psum, lazy_initialization=True)` tile accumulated with
`+=`, and `t[...] = nl.loop_reduce(x, op, ...)` into an `nl.ndarray` no instruction wrote,
whose first reduction starts from x. A destination the kernel did write (any value, NaN
included) is still combined with what it holds, as the API documentation says."""
import os
import tempfile
import textwrap
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
from nkisim import sandbox
from nkisim.sandbox import replay
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def scaled_rows_kernel(lhsT, rhs):
    """out = (lhsT.T @ rhs) / rowmax(lhsT.T @ rhs), also the row sums of the product: the
    product accumulates over 2 K tiles in a lazily zeroed PSUM block tensor, the row max
    and row sum over 4 column chunks go through loop_reduce into uninitialised SBUF."""
    k_tiles = lhsT.shape[0] // 128
    chunks = rhs.shape[1] // 128
    out = nl.ndarray((128, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    sums = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((chunks, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.psum,
                   lazy_initialization=True)
    prod = nl.ndarray((chunks, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.sbuf)
    peak = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)
    for c in nl.affine_range(chunks):
        for k in nl.affine_range(k_tiles):
            a = nl.load(lhsT[k * 128:(k + 1) * 128, :])
            b = nl.load(rhs[k * 128:(k + 1) * 128, c * 128:(c + 1) * 128])
            acc[c, :, :] += nisa.nc_matmul(a, b)
        prod[c, :, :] = nl.copy(acc[c, :, :])
        part_max = nisa.tensor_reduce(nl.max, data=prod[c, :, :], axis=[1])
        peak[:, :] = nl.loop_reduce(part_max, op=np.max, loop_indices=[c])
        part_sum = nisa.tensor_reduce(nl.add, data=prod[c, :, :], axis=[1])
        total[:, :] = nl.loop_reduce(part_sum, op=np.add, loop_indices=[c])
    inv = nisa.reciprocal(data=peak)
    for c in nl.affine_range(chunks):
        scaled = nisa.tensor_scalar(data=prod[c, :, :], op0=nl.multiply, operand0=inv)
        nl.store(out[:, c * 128:(c + 1) * 128], value=scaled)
    nl.store(sums, value=total)
    return out, sums


def _reduce_onto_kernel(x, start):
    """The column sums of x's 4 chunks reduced onto a destination the kernel initialised
    (`start`: a float value for nl.full, or 'nan' for a NaN an instruction computed)."""
    out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    dst = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    if start == "nan":
        zero = nl.zeros((128, 32), dtype=nl.float32, buffer=nl.sbuf)
        dst[...] = nl.divide(zero, zero)
    else:
        dst[...] = nl.full((128, 32), start, dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(4):
        t = nl.load(x[:, j * 32:(j + 1) * 32])
        dst[...] = nl.loop_reduce(t, op=np.add, loop_indices=[j])
    nl.store(out, dst)
    return out


reduce_onto_kernel = nki.jit(_reduce_onto_kernel)


@nki.jit
def half_initialised_kernel(x):
    """Column max of x's 4 chunks; the destination's left half was set to 10 first."""
    out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    dst = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    dst[:, 0:16] = nl.full((128, 16), 10.0, dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(4):
        t = nl.load(x[:, j * 32:(j + 1) * 32])
        dst[...] = nl.loop_reduce(t, op=np.maximum, loop_indices=[j])
    nl.store(out, dst)
    return out


@nki.jit
def column_max_kernel(x, init):
    """Column max of x's 4 chunks (all negative) into an uninitialised destination, or
    (init) into one filled with the smallest float32 first."""
    out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    if init:
        dst = nl.full((128, 32), -3.4028235e38, dtype=nl.float32, buffer=nl.sbuf)
    else:
        dst = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(4):
        t = nl.load(x[:, j * 32:(j + 1) * 32])
        dst[...] = nl.loop_reduce(t, op=np.maximum, loop_indices=[j])
    nl.store(out, dst)
    return out


def _reference(lhsT, rhs):
    p = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    return p / p.max(axis=1, keepdims=True), p.sum(axis=1, keepdims=True)


class LazyInitialisationTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(11)
        # shifted below zero: a zero-filled max would be wrong, only starting from the
        # first value gives the row max
        self.lhsT = rng.uniform(0.5, 1.5, (256, 128)).astype(np.float32)
        self.rhs = rng.uniform(-2.0, -0.5, (256, 512)).astype(np.float32)
        self.x = rng.uniform(-3.0, -1.0, (128, 128)).astype(np.float32)

    def test_uninitialised_accumulators_compute_the_result(self):
        res = nkisim.simulate(scaled_rows_kernel, {"lhsT": self.lhsT, "rhs": self.rhs})
        out, sums = res.outputs
        want_out, want_sums = _reference(self.lhsT, self.rhs)
        self.assertFalse(np.isnan(out).any())
        np.testing.assert_allclose(out, want_out, rtol=2e-5)
        np.testing.assert_allclose(sums, want_sums, rtol=2e-5)

    def test_a_lazy_zero_psum_tile_issues_no_fill(self):
        res = nkisim.simulate(scaled_rows_kernel, {"lhsT": self.lhsT, "rhs": self.rhs})
        effects = " ".join(res.compiler_effects)
        self.assertIn("fill instruction(s) not issued", effects)

    def test_an_initialised_destination_is_reduced_onto(self):
        chunks = [self.x[:, j * 32:(j + 1) * 32] for j in range(4)]
        (out,) = nkisim.simulate(reduce_onto_kernel, {"x": self.x, "start": 5.0}).outputs
        np.testing.assert_allclose(out, 5.0 + sum(chunks), rtol=1e-5, atol=1e-5)

    def test_a_computed_nan_is_not_taken_for_unwritten_memory(self):
        (out,) = nkisim.simulate(reduce_onto_kernel, {"x": self.x, "start": "nan"}).outputs
        self.assertTrue(np.isnan(out).all())

    def test_only_the_unwritten_elements_start_from_the_first_value(self):
        (out,) = nkisim.simulate(half_initialised_kernel, {"x": self.x}).outputs
        chunks = [self.x[:, j * 32:(j + 1) * 32] for j in range(4)]
        want = np.maximum.reduce(chunks)
        want[:, 0:16] = 10.0
        np.testing.assert_array_equal(out, want)

    def test_no_rewrite_prices_the_reduction_below_its_initialised_form(self):
        """Starting from the first value issues no instruction, so the uninitialised form
        costs at most the zero-initialised one, and the reduction itself is still paid."""
        lazy = nkisim.simulate(column_max_kernel, {"x": self.x, "init": False})
        init = nkisim.simulate(column_max_kernel, {"x": self.x, "init": True})
        np.testing.assert_array_equal(lazy.outputs[0], init.outputs[0])
        self.assertLessEqual(lazy.latency_us, init.latency_us)
        self.assertEqual(lazy.metrics["vector_engine_instruction_count"] + 1,
                         init.metrics["vector_engine_instruction_count"])


class LazyInitialisationReplayTest(unittest.TestCase):
    """The same through the harness's path (recorded in a child process, replayed here)."""

    BODY = '''
    import numpy as np


    @nki.jit
    def k(x):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        peak = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(4):
            t = nl.load(x[:, j * 32:(j + 1) * 32])
            part = nisa.tensor_reduce(nl.max, data=t, axis=[1])
            peak[:, :] = nl.loop_reduce(part, op=np.max, loop_indices=[j])
        nl.store(out, peak)
        return out
    '''

    def test_replayed_reduction_starts_from_the_first_value(self):
        x = np.random.default_rng(3).uniform(-4.0, -1.0, (128, 128)).astype(np.float32)
        with tempfile.TemporaryDirectory(prefix="lazyinit-") as td:
            path = os.path.join(td, "k.py")
            with open(path, "w") as f:
                f.write("import neuronxcc.nki as nki\nimport neuronxcc.nki.isa as nisa\n"
                        "import neuronxcc.nki.language as nl\n" + textwrap.dedent(self.BODY))
            trace = sandbox.record_trace({
                "kernel_path": path, "loader": _util.kernel_loader(), "target": "trn1",
                "input_names": ["x"], "kernel_name": None, "problem_kernel": None,
                "inputs": {"x": {"shape": [128, 128], "dtype": "float32"}},
                "input_dtypes": {}, "grid": None})
            self.assertTrue(trace["ok"], trace)
            res = replay.replay(trace, {"x": x}, target="trn1", kernel_path=path)
        np.testing.assert_array_equal(res.outputs[0], x.max(axis=1, keepdims=True))


if __name__ == "__main__":
    unittest.main()
