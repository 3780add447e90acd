"""NKI 0.3+ access and transfer forms against numpy written here: `.ap(scalar_offset=,
vector_offset=)`, 3-D and 4-D dma_transpose, dma_compute accumulating into one of its
sources, nc_matmul PE tiling (tile_position / tile_size) and `nl.bool`."""
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl
from nkisim.errors import NkiCompileError

RNG = np.random.default_rng(5)


def run(kernel, target="trn2", **inputs):
    return nkisim.simulate(kernel, inputs, target=target)


def load(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def store(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def scalar_offset_kernel(a, row):
    idx = load(row)
    t = nl.ndarray((128, 256), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.ap(pattern=[[512, 128], [1, 256]], offset=3,
                                  scalar_offset=idx, indirect_dim=0))
    return store(t)


@nki.jit
def vector_offset_kernel(a, rows):
    idx = load(rows)
    t = nl.ndarray((rows.shape[0], 512), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.ap([[512, rows.shape[0]], [1, 512]], 0, vector_offset=idx,
                                  indirect_dim=0))
    return store(t)


@nki.jit
def transpose_kernel(x):
    t = nl.ndarray(tuple(x.shape[a] for a in {3: (2, 1, 0), 4: (3, 1, 2, 0)}[len(x.shape)]),
                   dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x)
    return store(t)


@nki.jit
def accumulate_kernel(x, y):
    acc = load(y)
    nisa.dma_compute(dst=acc, srcs=[x, acc], reduce_op=nl.add, scales=[2.0, 1.0],
                     unique_indices=True, name="acc")
    return store(acc)


@nki.jit
def tiled_matmul_kernel(a, b):
    out = nl.ndarray((32, 512), dtype=nl.float32, buffer=nl.sbuf)
    sa, sb = load(a), load(b)
    for col in range(4):
        ps = nl.ndarray((32, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=sa, moving=sb[:, col * 128:(col + 1) * 128],
                       tile_position=(0, 32 * col), tile_size=(128, 32))
        nisa.tensor_copy(dst=out[:, col * 128:(col + 1) * 128], src=ps)
    return store(out)


class AccessPatternTest(unittest.TestCase):
    def test_scalar_offset_moves_the_access_by_rows_of_the_base_tensor(self):
        a = RNG.standard_normal((512, 512)).astype(np.float32)
        (t,) = run(scalar_offset_kernel, a=a, row=np.array([[300]], np.int32)).outputs
        flat = a.reshape(-1)
        ref = np.stack([flat[3 + 300 * 512 + r * 512: 3 + 300 * 512 + r * 512 + 256]
                        for r in range(128)])
        np.testing.assert_array_equal(t, ref)

    def test_vector_offset_gathers_one_row_per_partition(self):
        a = RNG.standard_normal((128, 512)).astype(np.float32)
        rows = RNG.integers(0, 128, (64, 1)).astype(np.int32)
        (t,) = run(vector_offset_kernel, a=a, rows=rows).outputs
        np.testing.assert_array_equal(t, a[rows[:, 0]])

    def test_vector_offset_out_of_range_is_an_error(self):
        a = np.zeros((8, 512), np.float32)
        with self.assertRaises(nkisim.NkiRuntimeError):
            run(vector_offset_kernel, a=a, rows=np.full((4, 1), 8, np.int32))


class TransferTest(unittest.TestCase):
    def test_dma_transpose_3d_and_4d(self):
        for shape in ((4, 6, 32), (2, 3, 4, 16), (8, 1, 1, 64)):
            x = RNG.standard_normal(shape).astype(np.float32)
            (t,) = run(transpose_kernel, x=x).outputs
            perm = {3: (2, 1, 0), 4: (3, 1, 2, 0)}[len(shape)]
            np.testing.assert_array_equal(t, np.transpose(x, perm), str(shape))

    def test_dma_transpose_refuses_other_axes(self):
        @nki.jit
        def bad(x):
            t = nl.ndarray((4, 3, 2), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=t, src=x, axes=(0, 2, 1))
            return store(t)
        with self.assertRaisesRegex(NkiCompileError, r"\(2, 1, 0\)"):
            run(bad, x=np.zeros((2, 3, 4), np.float32))

    def test_dma_compute_reads_its_destination_before_writing_it(self):
        x = RNG.standard_normal((32, 64)).astype(np.float32)
        y = RNG.standard_normal((32, 64)).astype(np.float32)
        (t,) = run(accumulate_kernel, x=x, y=y).outputs
        np.testing.assert_allclose(t, 2 * x + y, rtol=1e-6)


class MatmulTilingTest(unittest.TestCase):
    def test_column_tiles_give_the_untiled_product(self):
        a = RNG.standard_normal((128, 32)).astype(np.float32)
        b = RNG.standard_normal((128, 512)).astype(np.float32)
        (t,) = run(tiled_matmul_kernel, a=a, b=b).outputs
        np.testing.assert_allclose(t, a.T @ b, rtol=2e-5, atol=1e-4)

    def test_tiles_must_fit(self):
        a = RNG.standard_normal((128, 64)).astype(np.float32)  # 64 columns > a 32 tile
        b = RNG.standard_normal((128, 512)).astype(np.float32)
        with self.assertRaisesRegex(NkiCompileError, "column tile size 32"):
            run(tiled_matmul_kernel, a=a, b=b)

    def test_32_wide_tiles_need_trn2(self):
        a = RNG.standard_normal((128, 32)).astype(np.float32)
        b = RNG.standard_normal((128, 512)).astype(np.float32)
        with self.assertRaisesRegex(NkiCompileError, "one of"):
            run(tiled_matmul_kernel, target="trn1", a=a, b=b)


class DtypeTest(unittest.TestCase):
    def test_nl_bool_is_the_boolean_dtype(self):
        self.assertIs(nl.bool, nl.bool_)


if __name__ == "__main__":
    unittest.main()
