"""NKI 0.3+ gather and shuffle instructions against numpy written here: nc_n_gather,
nonzero_with_count, nc_match_replace8, nc_stream_shuffle."""
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl
from nkisim.errors import NkiCompileError

RNG = np.random.default_rng(11)


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
def gather_kernel(data, idx):
    d = nl.ndarray(idx.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(dst=d, data=load(data), indices=load(idx))
    return store(d)


@nki.jit
def nonzero_kernel(x):
    d = nl.ndarray((x.shape[0], x.shape[1] + 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=d, value=42)
    nisa.nonzero_with_count(dst=d, src=load(x), index_offset=16, padding_val=-1)
    return store(d)


@nki.jit
def match_kernel(data, vals):
    d = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
    i = nl.ndarray((data.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_match_replace8(dst=d, data=load(data), vals=load(vals), imm=-1.0, dst_idx=i)
    return store(d), store(i)


@nki.jit
def shuffle_kernel(x, mask):
    d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=d, value=0.5)
    nisa.nc_stream_shuffle(dst=d, src=load(x), shuffle_mask=mask)
    return store(d)


class GatherTest(unittest.TestCase):
    def test_nc_n_gather(self):
        data = RNG.standard_normal((128, 3, 100)).astype(np.float32)
        idx = RNG.integers(0, 300, (128, 64)).astype(np.uint32)
        (d,) = run(gather_kernel, data=data, idx=idx).outputs
        np.testing.assert_array_equal(d, np.take_along_axis(data.reshape(128, -1),
                                                            idx.astype(np.int64), axis=1))

    def test_nc_n_gather_refuses_an_index_out_of_range(self):
        data = np.zeros((4, 8), np.float32)
        idx = np.full((4, 2), 8, np.uint32)
        with self.assertRaisesRegex(NkiCompileError, r"outside \[0, 8\)"):
            run(gather_kernel, data=data, idx=idx)

    def test_nonzero_with_count_on_the_first_partition_of_each_core(self):
        x = (RNG.random((128, 20)) > 0.6).astype(np.float32)
        x[16] = 0
        (d,) = run(nonzero_kernel, x=x).outputs
        for p in range(128):
            if p % 16:
                self.assertTrue((d[p] == 42).all(), p)
                continue
            nz = np.flatnonzero(x[p]) + 16
            ref = np.concatenate([nz, np.full(20 - len(nz), -1), [len(nz)]])
            np.testing.assert_array_equal(d[p], ref)
        self.assertEqual(d[16, -1], 0)

    def test_nonzero_with_count_needs_one_more_element(self):
        @nki.jit
        def bad(x):
            d = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.sbuf)
            nisa.nonzero_with_count(dst=d, src=load(x))
            return store(d)
        with self.assertRaisesRegex(NkiCompileError, "one more element"):
            run(bad, x=np.zeros((16, 4), np.float32))

    def test_nc_match_replace8_pairs_duplicates_from_the_last_slot(self):
        data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
        vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
        d, i = run(match_kernel, data=data, vals=vals).outputs
        np.testing.assert_array_equal(i, [[2, 10, 9, 8, 7, 6, 5, 4]])
        np.testing.assert_array_equal(d, [[1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1]])

    def test_nc_match_replace8_after_max8_removes_the_top8(self):
        data = RNG.permutation(128 * 64).reshape(128, 64).astype(np.float32)
        vals = -np.sort(-data, axis=1)[:, :8]
        d, i = run(match_kernel, data=data, vals=vals).outputs
        np.testing.assert_array_equal(np.take_along_axis(data, i.astype(np.int64), 1), vals)
        ref = data.copy()
        np.put_along_axis(ref, i.astype(np.int64), -1.0, axis=1)
        np.testing.assert_array_equal(d, ref)

    def test_nc_stream_shuffle_per_quadrant(self):
        x = RNG.standard_normal((64, 12)).astype(np.float32)
        mask = [(i + 5) % 32 for i in range(32)]
        mask[3] = 255
        (d,) = run(shuffle_kernel, x=x, mask=mask).outputs
        ref = np.empty_like(x)
        for q in (0, 32):
            for i, m in enumerate(mask):
                ref[q + i] = 0.5 if m == 255 else x[q + m]
        np.testing.assert_array_equal(d, ref)

    def test_nc_stream_shuffle_mask_must_have_32_entries(self):
        with self.assertRaisesRegex(NkiCompileError, "32 partition"):
            run(shuffle_kernel, x=np.zeros((32, 4), np.float32), mask=list(range(16)))


if __name__ == "__main__":
    unittest.main()
