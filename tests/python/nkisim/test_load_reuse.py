"""Duplicate-load elimination (loop-invariant loads hoisted): an nl.load whose result stays a
fresh tile and reads exactly the HBM region an earlier such load read is not issued while
the earlier tile can be kept (no write to that tensor, at most one SBUF of allocations in
between); a load assigned into a declared tensor is always issued. Named in
compiler_effects. Evidence: MODEL.md (NKIBench add_rmsnorm_matmul against the matmul
tutorial's tiled step)."""
import unittest

import numpy as np

from . import _util  # noqa: F401
import nkisim
import nki
import nki.language as nl


def _row_loop(declared, rows=4, blocks=4):
    @nki.jit
    def kernel(xT, w):
        """out[r] = x[r] @ w per 128-row tile (x given transposed); w's blocks are loaded
        in the row loop."""
        out = nl.ndarray((rows * 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        for r in nl.affine_range(rows):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(blocks):
                xt = nl.load(xT[k * 128:(k + 1) * 128, r * 128:(r + 1) * 128])
                if declared:
                    wt = nl.ndarray((128, 512), dtype=w.dtype, buffer=nl.sbuf)
                    wt[...] = nl.load(w[k * 128:(k + 1) * 128, :])
                else:
                    wt = nl.load(w[k * 128:(k + 1) * 128, :])
                acc += nl.matmul(xt, wt, transpose_x=True)
            nl.store(out[r * 128:(r + 1) * 128, :], nl.copy(acc))
        return out
    return kernel


@nki.jit
def reload_after_store(x):
    """Loads x, doubles it into x, loads x again: the second load sees the new values."""
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    nl.store(x, nl.multiply(a, 2.0))
    b = nl.load(x)
    nl.store(out, nl.add(a, b))
    return out


def _far_apart(tiles):
    @nki.jit
    def kernel(x):
        """Two passes over `tiles` row tiles of 2 KiB per partition each: the second pass
        repeats every load of the first, `tiles` x 2 KiB (+ results) later."""
        out = nl.ndarray((2, tiles * 128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        for p in nl.affine_range(2):
            for t in nl.affine_range(tiles):
                v = nl.load(x[t * 128:(t + 1) * 128, :])
                nl.store(out[p, t * 128:(t + 1) * 128, :], nl.exp(v))
        return out
    return kernel


class LoadReuseTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(3)
        self.x = rng.standard_normal((512, 512)).astype(np.float32)
        self.w = rng.standard_normal((512, 512)).astype(np.float32)

    def test_invariant_fresh_tile_loads_are_issued_once_and_named(self):
        res = nkisim.simulate(_row_loop(False), {"xT": self.x.T.copy(), "w": self.w}, target="trn1")
        np.testing.assert_allclose(res.outputs[0], self.x @ self.w, rtol=2e-4, atol=2e-3)
        # x once (1 MiB) and w once (1 MiB), not w once per row tile
        self.assertEqual(res.metrics["hbm_read_bytes"], 2 * 512 * 512 * 4)
        named = [e for e in res.compiler_effects if "nl.load transfers not issued" in e]
        self.assertEqual(len(named), 1, res.compiler_effects)
        self.assertIn("12 of 16", named[0])

    def test_loads_into_declared_tensors_are_issued_as_written(self):
        ins = {"xT": self.x.T.copy(), "w": self.w}
        kept = nkisim.simulate(_row_loop(False), ins, target="trn1")
        res = nkisim.simulate(_row_loop(True), ins, target="trn1")
        np.testing.assert_allclose(res.outputs[0], self.x @ self.w, rtol=2e-4, atol=2e-3)
        self.assertEqual(res.metrics["hbm_read_bytes"], (512 * 512 + 4 * 512 * 512) * 4)
        self.assertFalse([e for e in res.compiler_effects if "nl.load" in e])
        self.assertGreater(res.latency_us, kept.latency_us)

    def test_a_store_to_the_tensor_makes_the_next_load_real(self):
        x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
        res = nkisim.simulate(reload_after_store, {"x": x.copy()}, target="trn1")
        np.testing.assert_allclose(res.outputs[0], 3 * x)
        self.assertEqual(res.metrics["hbm_read_bytes"], 2 * x.nbytes)
        self.assertFalse([e for e in res.compiler_effects if "nl.load" in e])

    def test_loads_more_than_one_sbuf_apart_are_reissued(self):
        near = nkisim.simulate(_far_apart(16), {"x": nkisim.TensorSpec((16 * 128, 512),
                                                                       "float32")},
                               target="trn1", numerics=False)
        # 16 tiles x (2 KiB load + 2 KiB result) = 64 KiB between repeats: kept
        self.assertEqual(near.metrics["hbm_read_bytes"], 16 * 128 * 512 * 4)
        far = nkisim.simulate(_far_apart(64), {"x": nkisim.TensorSpec((64 * 128, 512),
                                                                      "float32")},
                              target="trn1", numerics=False)
        # 64 x 4 KiB = 256 KiB > 192 KiB of trn1 SBUF between repeats: loaded twice
        self.assertEqual(far.metrics["hbm_read_bytes"], 2 * 64 * 128 * 512 * 4)
        self.assertFalse([e for e in far.compiler_effects if "nl.load" in e])


if __name__ == "__main__":
    unittest.main()
