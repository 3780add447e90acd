"""APIs public kernels use that the simulator now runs: nl.loop_reduce, nl.finfo / nl.fp32,
nki.language.constants.sizeinbytes, np.dtype(nl.bfloat16), reshape(shape=...),
nc_matmul(is_transpose=True), activation(reduce_cmd=reset_reduce), lazy_initialization,
nl.matmul of fp32 with bf16."""
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl
from nki.language.constants import sizeinbytes


def run(kernel, **inputs):
    return nkisim.simulate(kernel, inputs).outputs


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@nki.jit
def loop_reduce_kernel(x, opname):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.full((128, 64), -1e30 if opname == "max" else 0.0, dtype=nl.float32,
                  buffer=nl.sbuf)
    op = np.maximum if opname == "max" else np.add
    for k in nl.affine_range(4):
        t = nl.load(x[:, nl.ds(k * 64, 64)])
        acc[...] = nl.loop_reduce(t, op=op, loop_indices=[k], dtype=nl.float32)
    nl.store(out, acc)
    return out


@nki.jit
def limits_kernel(x):
    out = nl.ndarray((128, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 3), dtype=nl.float32, buffer=nl.sbuf)
    t[:, 0:1] = nl.full((128, 1), nl.finfo(nl.bfloat16).min, dtype=nl.float32)
    t[:, 1:2] = nl.full((128, 1), nl.fp32.min, dtype=nl.float32, lazy_initialization=True)
    t[:, 2:3] = nl.full((128, 1), sizeinbytes(x.dtype) + sizeinbytes(nl.bfloat16),
                        dtype=nl.float32)
    nl.store(out, t)
    return out


@nki.jit
def reshaped_tile_outlives_its_original_kernel(a, b):
    """The tile nl.load returns is gone once reshaped (nothing names it); the reshaped view
    must keep its data even when later tiles of the original's shape are allocated."""
    out = nl.ndarray((3, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    y = nl.load(a).reshape((128, 64))
    w = nl.load(b)
    z = nl.load(b)
    nl.store(out[0], y)
    nl.store(out[1], w)
    nl.store(out[2], z)
    return out


@nki.jit
def reshape_kernel(x):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    v = x.reshape(shape=(256, 64))
    nl.store(out, nl.load(v[128:256, :]))
    return out


@nki.jit
def transpose_mode_kernel(x, ident):
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    i = nl.load(ident)
    r = nisa.nc_matmul(t, i, is_transpose=True)
    nl.store(out, nl.copy(r))
    return out


@nki.jit
def transpose_mode_bad_moving_kernel(x, ident):
    t = nl.load(x)
    i = nl.load(ident[0:128, 0:64])
    nisa.nc_matmul(t, i, is_transpose=True)
    return x


@nki.jit
def activation_reduce_kernel(x, cmd):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(op=nl.exp, data=t, reduce_op=nl.add, reduce_res=s,
                    reduce_cmd=getattr(nisa.reduce_cmd, cmd))
    nl.store(out, s)
    return out


@nki.jit
def mixed_matmul_kernel(x, y):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)                        # fp32
    b = nl.load(y, dtype=nl.bfloat16)     # bf16
    nl.store(out, nl.copy(nl.matmul(a, b, transpose_x=True)))
    return out


@nki.jit
def affine_select_psum_kernel(x, ident):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nisa.nc_matmul(nl.load(ident), nl.load(x))          # x, in PSUM
    i_p, i_f = nl.mgrid[0:128, 0:128]
    r = nisa.affine_select(pred=(i_p - i_f >= 0), on_true_tile=p, on_false_value=-9.0)
    nl.store(out, r)
    return out


class CoverageApiTest(unittest.TestCase):
    def test_affine_select_reads_psum_through_sbuf(self):
        x = rand(128, 128)
        res = nkisim.simulate(affine_select_psum_kernel,
                              {"x": x, "ident": np.eye(128, dtype=np.float32)})
        np.testing.assert_allclose(res.outputs[0], np.where(np.tri(128) > 0, x, -9.0),
                                   rtol=1e-6)

    def test_loop_reduce_accumulates_into_the_destination(self):
        x = rand(128, 256)
        parts = [x[:, k * 64:(k + 1) * 64] for k in range(4)]
        (out,) = run(loop_reduce_kernel, x=x, opname="add")
        np.testing.assert_allclose(out, sum(parts), rtol=1e-5, atol=1e-6)
        (out,) = run(loop_reduce_kernel, x=x, opname="max")
        np.testing.assert_allclose(out, np.maximum.reduce(parts), rtol=1e-6)

    def test_dtype_limits_and_sizes(self):
        (out,) = run(limits_kernel, x=rand(128, 8))
        self.assertAlmostEqual(float(out[0, 0]) / -3.3895313892515355e38, 1.0, places=6)
        self.assertAlmostEqual(float(out[0, 1]) / float(np.finfo(np.float32).min), 1.0,
                               places=6)
        self.assertEqual(out[0, 2], 4 + 2)
        self.assertEqual(np.dtype(nl.bfloat16).itemsize, 2)
        self.assertEqual(np.dtype(nl.float8_e4m3).itemsize, 1)
        self.assertEqual(nl.finfo(nl.float8_e4m3).max, 240.0)
        self.assertEqual(nl.finfo(nl.bfloat16).eps, 2.0 ** -7)
        with self.assertRaises(TypeError):
            nl.finfo(nl.int32)

    def test_reshape_by_keyword(self):
        x = rand(64, 256)
        (out,) = run(reshape_kernel, x=x)
        np.testing.assert_array_equal(out, x.reshape(256, 64)[128:256])

    def test_a_reshaped_tile_keeps_its_data_after_its_original_is_gone(self):
        a, b = rand(128, 64, seed=1), rand(128, 64, seed=2)
        (out,) = run(reshaped_tile_outlives_its_original_kernel, a=a, b=b)
        np.testing.assert_array_equal(out[0], a)
        np.testing.assert_array_equal(out[1], b)
        np.testing.assert_array_equal(out[2], b)

    def test_matmul_transpose_mode(self):
        x = rand(128, 64)
        (out,) = run(transpose_mode_kernel, x=x, ident=np.eye(128, dtype=np.float32))
        np.testing.assert_array_equal(out, x.T)
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            run(transpose_mode_bad_moving_kernel, x=x, ident=np.eye(128, dtype=np.float32))
        self.assertIn("identity", cm.exception.message)

    def test_activation_reset_reduce_and_unmodelled_commands(self):
        x = rand(128, 32)
        (out,) = run(activation_reduce_kernel, x=x, cmd="reset_reduce")
        np.testing.assert_allclose(out[:, 0], np.exp(x).sum(axis=1), rtol=1e-5)
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            run(activation_reduce_kernel, x=x, cmd="load_reduce")
        self.assertIn("reduce_cmd", cm.exception.message)

    def test_matmul_of_fp32_with_bf16(self):
        x = rand(128, 128)
        y = rand(128, 256, seed=1)
        (out,) = run(mixed_matmul_kernel, x=x, y=y)
        yb = nkisim.to_bf16(y)
        np.testing.assert_allclose(out, x.T @ yb, rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    unittest.main()


import nki.compiler as ncc  # noqa: E402


@nki.jit
def mod_alias_kernel(x):
    """4 blocks in 2 physical tiles: block 2 is block 0's tile."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32,
                     buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    buf[0] = nl.load(x[:, 0:64])
    buf[2] = nl.load(x[:, 128:192])
    nl.store(out, buf[0])
    return out


@nki.jit
def mod_double_buffer_kernel(x):
    """A correct double-buffered loop over 8 blocks in 2 tiles."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((8, nl.par_dim(128), 64), dtype=nl.float32,
                     buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    for i in nl.affine_range(8):
        buf[i] = nl.load(x[:, nl.ds(i * 64, 64)])
        nl.store(out[:, nl.ds(i * 64, 64)], nl.exp(buf[i]))
    return out


@nki.jit
def mod_full_kernel(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((8, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(8):
        buf[i] = nl.load(x[:, nl.ds(i * 64, 64)])
        nl.store(out[:, nl.ds(i * 64, 64)], nl.exp(buf[i]))
    return out


@nki.jit
def mod_psum_accumulate_kernel(x, y):
    """Four row blocks, each x_i.T @ y summed over two K halves in PSUM; the four
    accumulation groups take turns in one modular bank tile."""
    out = nl.ndarray((4 * 128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((4, nl.par_dim(128), 128), dtype=nl.float32,
                     buffer=ncc.psum.mod_alloc(base_bank=0, num_bank_tiles=(1,)))
    for i in nl.sequential_range(4):
        for k in nl.affine_range(2):
            a = nl.load(x[nl.ds(k * 128, 128), nl.ds(i * 128, 128)])
            b = nl.load(y[nl.ds(k * 128, 128), :])
            acc[i] += nisa.nc_matmul(a, b)
        nl.store(out[nl.ds(i * 128, 128), :], nisa.tensor_copy(acc[i], dtype=nl.float32))
    return out


class ModularAllocationTest(unittest.TestCase):
    def test_psum_accumulation_starts_afresh_in_each_logical_block(self):
        # the first matmul of block i overwrites the bank tile block i-1 left behind, as
        # on hardware (summing onto it gave the attention tutorial's v9/v10 wrong output)
        x = rand(256, 512)
        y = rand(256, 128, seed=1)
        (out,) = run(mod_psum_accumulate_kernel, x=x, y=y)
        np.testing.assert_allclose(out, x.T @ y, rtol=1e-4, atol=1e-4)

    def test_blocks_sharing_a_tile_share_data(self):
        x = rand(128, 256)
        (out,) = run(mod_alias_kernel, x=x)
        np.testing.assert_array_equal(out, x[:, 128:192])

    def test_double_buffering_is_correct_and_smaller(self):
        x = rand(128, 512)
        mod = nkisim.simulate(mod_double_buffer_kernel, {"x": x})
        full = nkisim.simulate(mod_full_kernel, {"x": x})
        np.testing.assert_allclose(mod.outputs[0], np.exp(x), rtol=1e-6)
        self.assertEqual(mod.outputs[0].tolist(), full.outputs[0].tolist())
        # capacity counts the 2 physical tiles, not the 8 blocks (a block-dimension tensor
        # in plain SBUF is allocated by the liveness of its blocks, so it is small too)
        self.assertLess(mod.metrics["peak_sbuf_bytes_per_partition"], 8 * 64 * 4)
        self.assertLess(full.metrics["peak_sbuf_bytes_per_partition"], 8 * 64 * 4)


@nki.jit
def keep_axis_kernel(x):
    out = nl.ndarray((128, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)                     # (128, 8) on-chip
    col = t[:, 2]                      # keeps the free axis: (128, 1), not (128,)
    res = nl.ndarray((128, 3), dtype=nl.float32, buffer=nl.sbuf)
    res[:, 0:1] = col[:, 0]            # indexable as a 2-D tile
    res[:, 1:2] = nl.add(col, t[:, 5])
    blocks = nl.ndarray((2, nl.par_dim(128), 8), dtype=nl.float32, buffer=nl.sbuf)
    blocks[1] = t                      # a block index still drops the block axis
    res[:, 2:3] = blocks[1][:, 7]
    three = nl.ndarray((128, 2, 1), dtype=nl.float32, buffer=nl.sbuf)
    assert tuple(three[:, 1, :].shape) == (128, 1)   # a middle axis is still dropped
    assert tuple(t[:, 2].shape) == (128, 1)
    assert tuple(x[:, 2].shape) == (128,)            # HBM: numpy-like
    nl.store(out, res)
    return out


class IntegerIndexTest(unittest.TestCase):
    def test_integer_on_a_free_axis_keeps_it(self):
        x = rand(128, 8)
        (out,) = run(keep_axis_kernel, x=x)
        np.testing.assert_allclose(out, np.stack([x[:, 2], x[:, 2] + x[:, 5], x[:, 7]], 1),
                                   rtol=1e-6)


@nki.jit
def masked_tail_kernel(x):
    """A 100-row tensor copied in one 128-row tile: the slice reaches past the end, the mask
    covers the tail."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nl.load(x[nl.ds(0, 128), :], mask=(i_p < x.shape[0]))
    nl.store(out[nl.ds(0, 128), :], value=nl.exp(t), mask=(i_p < x.shape[0]))
    return out


@nki.jit
def unmasked_tail_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[nl.ds(0, 128), :])
    nl.store(out[0:100, :], value=t[0:100, :])
    return out


class MaskedSliceTest(unittest.TestCase):
    def test_a_masked_slice_may_reach_past_the_end(self):
        x = rand(100, 64)
        (out,) = run(masked_tail_kernel, x=x)
        np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)

    def test_an_unmasked_one_may_not(self):
        with self.assertRaises(nkisim.NkiRuntimeError) as cm:
            run(unmasked_tail_kernel, x=rand(100, 64))
        self.assertIn("out_of_bound", cm.exception.message)


@nki.jit
def int_divide_kernel(x):
    out = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    pos = nisa.iota(nl.arange(128)[:, None], dtype=nl.int32)
    nl.store(out, nl.floor(pos / 32, dtype=nl.int32))
    return out


class IntegerDivisionTest(unittest.TestCase):
    def test_integer_tiles_divide_truly(self):
        (out,) = run(int_divide_kernel, x=rand(128, 1))
        np.testing.assert_array_equal(out[:, 0], np.arange(128) // 32)
