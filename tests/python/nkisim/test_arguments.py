"""Every argument is honoured or rejected: nothing is accepted and silently ignored."""
import unittest

import numpy as np

from . import _util  # noqa: F401
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl


def _stt_kernel(engine):
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        if engine is None:
            nisa.scalar_tensor_tensor(dst=r, data=t, op0=nl.multiply, operand0=2.0,
                                      op1=nl.add, operand1=t)
        else:
            nisa.scalar_tensor_tensor(dst=r, data=t, op0=nl.multiply, operand0=2.0,
                                      op1=nl.add, operand1=t, engine=engine)
        nisa.dma_copy(dst=out, src=r)
        return out
    return k


@nki.jit
def unknown_keyword(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=t, fast=True)
    return r


@nki.jit
def bn_aggr_mask(x):
    t = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[:, 0:6])
    r = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
    i = nl.arange(128)[:, None]
    nisa.bn_aggr(dst=r, data=t, mask=(i < 64))
    return r


@nki.jit
def dma_priority(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x, priority=3)
    return t


@nki.jit
def matmul_tile_position(x):
    a = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x[:, 0:128])
    acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a, moving=a, tile_position=(0, 0))
    return acc


@nki.jit
def load_unknown_keyword(x):
    return nl.exp(nl.load(x, mod_alloc=2))


@nki.jit
def exp_unknown_keyword(x):
    return nl.exp(nl.load(x), fast_math=True)


@nki.jit
def masked_memset(x):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    i = nl.arange(128)[:, None]
    nisa.memset(dst=t, value=2.0, mask=(i < 64))
    nisa.dma_copy(dst=out, src=t)
    return out


class ArgumentsTest(unittest.TestCase):
    def setUp(self):
        self.x = np.random.default_rng(3).standard_normal((128, 512)).astype(np.float32)

    def test_scalar_tensor_tensor_engine_is_honoured(self):
        v = nkisim.simulate(_stt_kernel(None), {"x": self.x})
        g = nkisim.simulate(_stt_kernel(nisa.gpsimd_engine), {"x": self.x})
        np.testing.assert_allclose(v.outputs[0], self.x * 2 + self.x, rtol=1e-6)
        np.testing.assert_allclose(g.outputs[0], v.outputs[0])
        self.assertEqual(v.metrics["vector_engine_instruction_count"], 1)
        self.assertEqual(v.metrics["gpsimd_engine_instruction_count"], 0)
        self.assertEqual(g.metrics["gpsimd_engine_instruction_count"], 1)
        self.assertEqual(g.metrics["vector_engine_instruction_count"], 0)
        with self.assertRaisesRegex(nkisim.NkiCompileError, "VectorE or GpSimdE"):
            nkisim.simulate(_stt_kernel(nisa.scalar_engine), {"x": self.x})

    def test_unmodelled_arguments_are_errors(self):
        cases = ((unknown_keyword, "unexpected keyword argument 'fast'"),
                 (bn_aggr_mask, "mask="),
                 (dma_priority, "priority=3"),
                 (matmul_tile_position, "tile_position and tile_size must both be set"),
                 (load_unknown_keyword, "nl.load: argument mod_alloc is not modelled"),
                 (exp_unknown_keyword, "nl.exp: argument fast_math is not modelled"))
        for kernel, msg in cases:
            with self.subTest(kernel=kernel.__name__):
                with self.assertRaisesRegex(nkisim.NkiCompileError, msg):
                    nkisim.simulate(kernel, {"x": self.x})

    def test_memset_mask_is_honoured(self):
        r = nkisim.simulate(masked_memset, {"x": self.x})
        self.assertTrue(np.all(r.outputs[0][:64] == 2.0))
        self.assertTrue(np.all(r.outputs[0][64:] == 1.0))


if __name__ == "__main__":
    unittest.main()
