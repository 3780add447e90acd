"""Front-end forms the NKI Library writes, in small kernels of our own: a positional `dst`
before keyword operands, PSUM tiles pinned to one address (the library's bank reuse) and the
shared identity matrix in SBUF, dtypes that print as their names `.ap()` of an `.ap()` view of a
whole tensor, and tensor_tensor operands of one element count per partition."""
import unittest

import numpy as np

from tests.python.nkisim import _util  # noqa: F401  (activates the simulator)

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

BANK = 2048  # bytes per partition of one PSUM bank


def _scale_and_max(x):
    """dst given positionally, the source by keyword (as attention_cte calls it)."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    mx = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    m = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    nisa.tensor_scalar_reduce(r, data=s, op0=nl.multiply, operand0=2.0, reduce_op=nl.maximum,
                              reduce_res=m)
    nisa.dma_copy(dst=out, src=r)
    nisa.dma_copy(dst=mx, src=m)
    return out, mx


def _pinned_banks(x):
    """Twelve [128, 512] fp32 PSUM tiles (one bank each) pinned to four bank addresses: the
    hardware holds four banks; a tile pinned to the address of another is the same memory."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    tiles = [nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum, address=(0, (i % 4) * BANK))
             for i in range(12)]
    nisa.tensor_copy(tiles[1], s)
    nisa.tensor_copy(r, tiles[9])  # bank 1 again: the values written through tiles[1]
    nisa.dma_copy(dst=out, src=r)
    return out


def _unpinned_banks(x):
    """The same twelve tiles without addresses: twelve banks at once, more than PSUM has."""
    tiles = [nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum) for _ in range(12)]
    s = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    for t in tiles:
        nisa.tensor_copy(t, s)
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=s)
    return out


def _transpose_by_identity(x):
    """x^T through TensorE with the shared identity as an SBUF operand (as the NKI Library's
    find_nonzero_indices writes it)."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    p = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.dma_copy(dst=s, src=x)
    ident = nl.shared_identity_matrix(128, dtype=nl.float32)
    assert ident.buffer == nl.sbuf and nl.shared_identity_matrix(128, dtype=nl.float32) is ident
    nisa.nc_matmul(dst=p, stationary=s, moving=ident, is_transpose=True)
    nisa.tensor_copy(dst=r, src=p)
    nisa.dma_copy(dst=out, src=r)
    return out


class SharedIdentity(unittest.TestCase):
    def test_the_identity_is_in_sbuf_and_reused(self):
        x = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
        np.testing.assert_array_equal(nki.jit(_transpose_by_identity)(x), x.T)


def _ap_of_an_ap_view(x):
    """The NKI Library's TensorView: a view of a whole tensor is `.ap()` of its own layout,
    and a slice of that view is another `.ap()` on the result."""
    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    whole = s.ap(pattern=[[16, 128], [4, 4], [1, 4]], offset=0)
    column = whole.ap(pattern=[[16, 128], [4, 4]], offset=2)  # s[:, :, 2]
    nisa.tensor_copy(dst=r, src=column)
    nisa.dma_copy(dst=out, src=r)
    return out


class DtypesAreNames(unittest.TestCase):
    def test_str_of_a_dtype_and_of_a_tensor_dtype_is_its_name(self):
        self.assertEqual([str(nl.float32), str(nl.int32), str(nl.uint8), str(nl.bfloat16)],
                         ["float32", "int32", "uint8", "bfloat16"])
        self.assertTrue(nl.float32 == np.float32 and nl.float32 == "float32")
        seen = []

        def k(x):
            seen.append((str(x.dtype), x.dtype == nl.float32, x.dtype is nl.float32))
            return x
        nki.jit(k)(np.zeros((4, 4), np.float32))
        self.assertEqual(seen, [("float32", True, True)])


class AccessPatternViews(unittest.TestCase):
    def test_an_ap_of_the_tensor_layout_is_the_tensor(self):
        x = np.arange(128 * 16, dtype=np.float32).reshape(128, 4, 4)
        np.testing.assert_array_equal(nki.jit(_ap_of_an_ap_view)(x), x[:, :, 2])


def _minus_broadcast_max(x, m):
    """x [128, 8] minus m [128, 4] broadcast to [128, 2, 4] (attention_tkg's trn2 path): the
    operands' free shapes differ, their elements per partition agree."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    xs = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    ms = nl.ndarray(m.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    nisa.dma_copy(dst=ms, src=m)
    mb = ms.ap(pattern=[[4, 128], [0, 2], [1, 4]], offset=0)
    nisa.tensor_tensor(xs, xs, mb, op=nl.subtract)
    nisa.dma_copy(dst=out, src=xs)
    return out


class SameCountPerPartition(unittest.TestCase):
    def test_operands_pair_in_access_order(self):
        rng = np.random.default_rng(2)
        x = rng.standard_normal((128, 8)).astype(np.float32)
        m = rng.standard_normal((128, 4)).astype(np.float32)
        np.testing.assert_allclose(nki.jit(_minus_broadcast_max)(x, m), x - np.tile(m, 2),
                                   rtol=1e-6)

    def test_different_counts_are_still_refused(self):
        def bad(x):
            s = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
            t = nl.ndarray((128, 3, 2), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=s, value=0.0)
            nisa.memset(dst=t, value=0.0)
            nisa.tensor_tensor(s, s, t, op=nl.add)
            return x
        with self.assertRaisesRegex(Exception, "not broadcastable"):
            nki.jit(bad)(np.zeros((128, 4), np.float32))


def _local_gather(src, index):
    """src [128, 64] gathered by index [128, 4] (uint16), 2 elements per index, the first 48
    of each core's 64 indices."""
    out = nl.ndarray((128, 48, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.ndarray(src.shape, dtype=nl.float32, buffer=nl.sbuf)
    i32 = nl.ndarray(index.shape, dtype=nl.int32, buffer=nl.sbuf)
    i16 = nl.ndarray(index.shape, dtype=nl.uint16, buffer=nl.sbuf)
    r = nl.ndarray((128, 48, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=src)
    nisa.dma_copy(dst=i32, src=index)
    nisa.tensor_copy(dst=i16, src=i32)
    nisa.local_gather(dst=r, src_buffer=s, index=i16, num_elem_per_idx=2, num_valid_indices=48)
    nisa.dma_copy(dst=out, src=r)
    return out


class LocalGather(unittest.TestCase):
    def test_each_core_gathers_its_partitions_by_its_own_indices(self):
        rng = np.random.default_rng(3)
        src = rng.standard_normal((128, 64)).astype(np.float32)
        index = rng.integers(0, 63, size=(128, 4)).astype(np.int32)
        got = nki.jit(_local_gather)(src, index)
        for c in range(8):  # written out from the documented rule, element by element
            ids = [index[c * 16 + p, f] for f in range(4) for p in range(16)][:48]
            for p in range(c * 16, c * 16 + 16):
                for j, i in enumerate(ids):
                    np.testing.assert_array_equal(got[p, j], src[p, i:i + 2])


class PositionalDst(unittest.TestCase):
    def test_dst_before_keyword_data_binds_as_dst(self):
        x = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
        out, mx = nki.jit(_scale_and_max)(x)
        np.testing.assert_allclose(out, 2.0 * x, rtol=1e-6)
        np.testing.assert_allclose(mx[:, 0], (2.0 * x).max(axis=1), rtol=1e-6)


class PinnedPsum(unittest.TestCase):
    def test_tiles_at_one_address_share_the_bank(self):
        x = np.arange(128 * 512, dtype=np.float32).reshape(128, 512)
        k = nki.jit(_pinned_banks)
        np.testing.assert_array_equal(k(x), x)
        # an honoured address is not listed among the arguments not honoured
        self.assertFalse([e for e in k.last_result.compiler_effects if "address=" in e],
                         k.last_result.compiler_effects)

    def test_unpinned_tiles_still_exceed_psum(self):
        x = np.zeros((128, 512), dtype=np.float32)
        with self.assertRaisesRegex(Exception, "Out of memory in psum"):
            nki.jit(_unpinned_banks)(x)


if __name__ == "__main__":
    unittest.main()
