"""NkiTensor view methods (slice, select, vector_select, permute, broadcast, expand_dim, squeeze_dim,
reshape_dim, flatten_dims, get_pattern, is_contiguous) against numpy written here, on HBM
inputs and on-chip tiles, as DMA sources and destinations."""
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl
from nkisim.errors import NkiCompileError

RNG = np.random.default_rng(9)


def run(kernel, **inputs):
    return nkisim.simulate(kernel, inputs, target="trn2")


def copy_out(view):
    t = nl.ndarray(tuple(view.shape), dtype=view.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=view)
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def views_kernel(x, k):
    a = copy_out(x.slice(1, 2, 14, 3))                 # [8, 4, 6]
    b = copy_out(x.select(0, 5))                       # [16, 6]
    c = copy_out(x.permute((1, 0, 2)))                 # [16, 8, 6]
    d = copy_out(x.select(2, 1).expand_dim(2).broadcast(2, 4))   # [8, 16, 4]
    e = copy_out(x.reshape_dim(1, (4, -1)).flatten_dims(2, 3))   # [8, 4, 24]
    f = copy_out(x.slice(2, 0, 1, 1).squeeze_dim(2))   # [8, 16]
    idx = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=k)
    g = copy_out(x.select(0, idx))                     # [16, 6], row from data
    rows = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(rows, [[1, 1]], offset=7, channel_multiplier=-2)   # rows 7, 5, 3, 1
    h = copy_out(x.vector_select(0, rows))             # [4, 16, 6]
    return a, b, c, d, e, f, g, h


@nki.jit
def onchip_kernel(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray((x.shape[0], x.shape[1] // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t.slice(1, 1, x.shape[1], 2))
    half = nl.ndarray((x.shape[0], x.shape[1] // 2), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=half, value=0.0)
    nisa.tensor_copy(dst=t.slice(1, 0, x.shape[1], 2), src=half)   # a view as destination
    back = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=back, src=t)
    assert t.is_contiguous() and not t.slice(1, 0, 4, 2).is_contiguous()
    assert t.slice(1, 2, 6, 2).get_pattern() == [[x.shape[1], x.shape[0]], [2, 2]]
    assert not t.is_indirect()
    return out, back


class ViewTest(unittest.TestCase):
    def test_views_of_an_hbm_tensor(self):
        x = RNG.standard_normal((8, 16, 6)).astype(np.float32)
        outs = run(views_kernel, x=x, k=np.array([[3]], np.int32)).outputs
        a, b, c, d, e, f, g, h = outs
        np.testing.assert_array_equal(a, x[:, 2:14:3])
        np.testing.assert_array_equal(b, x[5])
        np.testing.assert_array_equal(c, x.transpose(1, 0, 2))
        np.testing.assert_array_equal(d, np.repeat(x[:, :, 1:2], 4, axis=2))
        np.testing.assert_array_equal(e, x.reshape(8, 4, 24))
        np.testing.assert_array_equal(f, x[:, :, 0])
        np.testing.assert_array_equal(g, x[3])
        np.testing.assert_array_equal(h, x[[7, 5, 3, 1]])

    def test_views_of_a_tile_read_and_written(self):
        x = RNG.standard_normal((32, 10)).astype(np.float32)
        out, back = run(onchip_kernel, x=x).outputs
        np.testing.assert_array_equal(out, x[:, 1::2])
        ref = x.copy()
        ref[:, 0::2] = 0.0
        np.testing.assert_array_equal(back, ref)

    def test_bad_views_are_compile_errors(self):
        @nki.jit
        def bad(x):
            return copy_out(x.squeeze_dim(1))
        with self.assertRaisesRegex(NkiCompileError, "not 1"):
            run(bad, x=np.zeros((4, 3), np.float32))

        @nki.jit
        def bad2(x):
            return copy_out(x.slice(1, 2, 9))
        with self.assertRaisesRegex(NkiCompileError, "outside dimension"):
            run(bad2, x=np.zeros((4, 3), np.float32))


if __name__ == "__main__":
    unittest.main()
