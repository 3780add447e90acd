"""Kernels written in the styles of the NKI tutorials (old and new API) run and match numpy."""
import unittest

import numpy as np

from . import _util  # noqa: F401
import nkisim
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import nki as new_nki
import nki.isa as new_nisa
import nki.language as new_nl

RNG = np.random.default_rng(3)


@nki.jit
def spmd_add(a_input, b_input):
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    offset_i_x = nl.program_id(0) * 128
    offset_i_y = nl.program_id(1) * 512
    ix = offset_i_x + nl.arange(128)[:, None]
    iy = offset_i_y + nl.arange(512)[None, :]
    a_tile = nl.load(a_input[ix, iy])
    b_tile = nl.load(b_input[ix, iy])
    c_tile = a_tile + b_tile
    nl.store(c_output[ix, iy], value=c_tile)
    return c_output


@nki.jit
def blocked_matmul(lhsT, rhs, TILES_IN_BLOCK_M=2, TILES_IN_BLOCK_N=2, TILES_IN_BLOCK_K=2):
    K, M = lhsT.shape
    K_, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_K = nl.tile_size.pmax
    TILE_N = nl.tile_size.gemm_moving_fmax
    BLOCK_M = TILE_M * TILES_IN_BLOCK_M
    BLOCK_N = TILE_N * TILES_IN_BLOCK_N
    BLOCK_K = TILE_K * TILES_IN_BLOCK_K
    NUM_BLOCK_M = M // BLOCK_M
    NUM_BLOCK_N = N // BLOCK_N
    NUM_BLOCK_K = K // BLOCK_K
    i_lhsT = nl.mgrid[0:TILE_K, 0:TILE_M]
    i_rhs = nl.mgrid[0:TILE_K, 0:TILE_N]
    i_res = nl.mgrid[0:TILE_M, 0:TILE_N]
    for n2 in nl.affine_range(NUM_BLOCK_N):
        for m2 in nl.affine_range(NUM_BLOCK_M):
            result_tiles = nl.zeros((TILES_IN_BLOCK_M, TILES_IN_BLOCK_N, nl.par_dim(TILE_M),
                                     TILE_N), dtype=nl.float32, buffer=nl.sbuf)
            for k2 in nl.sequential_range(NUM_BLOCK_K):
                lhsT_tiles = nl.ndarray((TILES_IN_BLOCK_M, TILES_IN_BLOCK_K, nl.par_dim(TILE_K),
                                         TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                for bm in nl.affine_range(TILES_IN_BLOCK_M):
                    for bk in nl.affine_range(TILES_IN_BLOCK_K):
                        lhsT_tiles[bm, bk, i_lhsT.p, i_lhsT.x] = nl.load(
                            lhsT[(TILES_IN_BLOCK_K * k2 + bk) * TILE_K + i_lhsT.p,
                                 BLOCK_M * m2 + bm * TILE_M + i_lhsT.x])
                rhs_tiles = nl.ndarray((TILES_IN_BLOCK_K, nl.par_dim(TILE_K), BLOCK_N),
                                       dtype=rhs.dtype, buffer=nl.sbuf)
                for bk in nl.affine_range(TILES_IN_BLOCK_K):
                    rhs_tiles[bk, i_rhs.p, nl.arange(BLOCK_N)[None, :]] = nl.load(
                        rhs[(TILES_IN_BLOCK_K * k2 + bk) * TILE_K + i_rhs.p,
                            BLOCK_N * n2 + nl.arange(BLOCK_N)[None, :]])
                for bn in nl.affine_range(TILES_IN_BLOCK_N):
                    for bm in nl.affine_range(TILES_IN_BLOCK_M):
                        res_tile = nl.zeros((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(TILES_IN_BLOCK_K):
                            res_tile[...] += nisa.nc_matmul(
                                lhsT_tiles[bm, bk, i_lhsT.p, i_lhsT.x],
                                rhs_tiles[bk, i_rhs.p, bn * TILE_N + i_rhs.x])
                        result_tiles[bm, bn, i_res.p, i_res.x] += res_tile[i_res.p, i_res.x]
            for bm in nl.affine_range(TILES_IN_BLOCK_M):
                result_packed = nl.ndarray((TILE_K, BLOCK_N), dtype=result.dtype,
                                           buffer=nl.sbuf)
                for bn in nl.affine_range(TILES_IN_BLOCK_N):
                    result_packed[i_res.p, bn * TILE_N + i_res.x] = nl.copy(
                        result_tiles[bm, bn, i_res.p, i_res.x])
                nl.store(result[(TILES_IN_BLOCK_M * m2 + bm) * TILE_K + i_res.p,
                                BLOCK_N * n2 + nl.arange(BLOCK_N)[None, :]],
                         value=result_packed)
    return result


@nki.jit
def layernorm_bn(in_tensor, eps=1e-5):
    out = nl.ndarray(in_tensor.shape, dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    rows, cols = in_tensor.shape
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(cols)[None, :]
    for i in nl.affine_range(rows // 128):
        x = nl.load(in_tensor[i * 128 + i_p, i_f])
        stats = nl.ndarray((128, 6 * (cols // 512)), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(cols // 512):
            stats[i_p, j * 6 + nl.arange(6)[None, :]] = nisa.bn_stats(
                x[i_p, j * 512 + nl.arange(512)[None, :]])
        mv = nisa.bn_aggr(stats)
        mean = mv[i_p, 0]
        var = mv[i_p, nl.arange(1, 2)[None, :]]
        rstd = nl.rsqrt(var + eps)
        y = nisa.tensor_scalar(data=x, op0=np.subtract, operand0=mean, op1=np.multiply,
                               operand1=rstd)
        nl.store(out[i * 128 + i_p, i_f], value=y)
    return out


@nki.jit
def softmax_isa(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        neg_max = nisa.tensor_reduce(np.max, data=t, axis=(1,), negate=True, keepdims=True)
        e = nisa.activation(op=nl.exp, data=t, bias=neg_max, scale=1.0)
        s = nl.sum(e, axis=1, keepdims=True)
        r = nl.reciprocal(s)
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.multiply(e, r))
    return out


@new_nki.jit
def new_style_attention_scores(q, k):
    """scores = softmax(q @ k.T) for q, k of shape [128, d] using transposes on TensorE."""
    d = q.shape[1]
    out = new_nl.ndarray((128, 128), dtype=new_nl.float32, buffer=new_nl.shared_hbm)
    qs = new_nl.ndarray((128, d), dtype=q.dtype, buffer=new_nl.sbuf)
    ks = new_nl.ndarray((128, d), dtype=k.dtype, buffer=new_nl.sbuf)
    new_nisa.dma_copy(dst=qs, src=q)
    new_nisa.dma_copy(dst=ks, src=k)
    qt_p = new_nl.ndarray((d, 128), dtype=q.dtype, buffer=new_nl.psum)
    kt_p = new_nl.ndarray((d, 128), dtype=k.dtype, buffer=new_nl.psum)
    new_nisa.nc_transpose(dst=qt_p, data=qs)
    new_nisa.nc_transpose(dst=kt_p, data=ks)
    qt = new_nl.ndarray((d, 128), dtype=q.dtype, buffer=new_nl.sbuf)
    kt = new_nl.ndarray((d, 128), dtype=k.dtype, buffer=new_nl.sbuf)
    new_nisa.tensor_copy(dst=qt, src=qt_p)
    new_nisa.tensor_copy(dst=kt, src=kt_p, engine=new_nisa.engine.scalar)
    sc = new_nl.ndarray((128, 128), dtype=new_nl.float32, buffer=new_nl.psum)
    new_nisa.nc_matmul(dst=sc, stationary=qt, moving=kt)
    mx = new_nl.ndarray((128, 1), dtype=new_nl.float32, buffer=new_nl.sbuf)
    new_nisa.tensor_reduce(dst=mx, op=new_nl.maximum, data=sc, axis=1, negate=True)
    e = new_nl.ndarray((128, 128), dtype=new_nl.float32, buffer=new_nl.sbuf)
    ssum = new_nl.ndarray((128, 1), dtype=new_nl.float32, buffer=new_nl.sbuf)
    new_nisa.activation(dst=e, op=new_nl.exp, data=sc, bias=mx, reduce_op=new_nl.add,
                        reduce_res=ssum)
    rs = new_nl.ndarray((128, 1), dtype=new_nl.float32, buffer=new_nl.sbuf)
    new_nisa.reciprocal(dst=rs, data=ssum)
    p = new_nl.ndarray((128, 128), dtype=new_nl.float32, buffer=new_nl.sbuf)
    new_nisa.tensor_scalar(dst=p, data=e, op0=new_nl.multiply, operand0=rs)
    new_nisa.dma_copy(dst=out, src=p)
    return out


@nki.jit
def block_psum_softmax(q, k):
    """Old-style kernel with a PSUM tensor carrying block dimensions (allocated per block),
    engine constants and 1-D per-partition tiles broadcast along the free axis."""
    d, seq = q.shape
    out = nl.ndarray((seq, seq), dtype=nl.float32, buffer=nl.shared_hbm)
    q_sb = nl.load(q)
    k_sb = nl.load(k)
    qk = nl.ndarray((seq // 128, seq // 512, nl.par_dim(128), 512), dtype=nl.float32,
                    buffer=nl.psum)
    for i in nl.affine_range(seq // 128):
        for j in nl.affine_range(seq // 512):
            qk[i, j, :, :] = nisa.nc_matmul(stationary=q_sb[:, nl.ds(i * 128, 128)],
                                            moving=k_sb[:, nl.ds(j * 512, 512)])
    for i in nl.affine_range(seq // 128):
        row = nl.ndarray((nl.par_dim(128), seq), dtype=nl.float32, buffer=nl.sbuf)
        for j in nl.affine_range(seq // 512):
            row[:, nl.ds(j * 512, 512)] = nisa.tensor_copy(qk[i, j], engine=nisa.scalar_engine)
        m = nl.max(row, axis=1)
        e = nisa.tensor_scalar(data=row, op0=nl.subtract, operand0=m,
                               engine=nisa.vector_engine)
        e = nl.exp(e)
        s = nl.sum(e, axis=1)
        inv = (1.0 / s).broadcast_to((128, seq))
        nl.store(out[nl.ds(i * 128, 128), :], value=nl.multiply(e, inv))
    return out


class StylesTest(unittest.TestCase):
    def test_block_psum_and_per_partition_broadcasts(self):
        q = RNG.standard_normal((64, 1024)).astype(np.float32) * 0.2
        k = RNG.standard_normal((64, 1024)).astype(np.float32) * 0.2
        res = nkisim.simulate(block_psum_softmax, {"q": q, "k": k})
        s = q.T @ k
        e = np.exp(s - s.max(axis=1, keepdims=True))
        np.testing.assert_allclose(res.outputs[0], e / e.sum(axis=1, keepdims=True),
                                   rtol=1e-4, atol=1e-7)
        self.assertLessEqual(res.metrics["peak_psum_bytes_per_partition"], 16 * 1024)
        self.assertEqual(res.metrics["scalar_engine_instruction_count"], 8 * 2 + 8)

    def test_spmd_tensor_add_2d_grid(self):
        a = RNG.standard_normal((256, 1024)).astype(np.float32)
        b = RNG.standard_normal((256, 1024)).astype(np.float32)
        out = spmd_add[2, 2](a, b)
        np.testing.assert_array_equal(out, a + b)

    def test_blocked_matmul_with_block_dims(self):
        lhsT = RNG.standard_normal((512, 512)).astype(np.float32)
        rhs = RNG.standard_normal((512, 2048)).astype(np.float32)
        res = nkisim.simulate(blocked_matmul, {"lhsT": lhsT, "rhs": rhs})
        np.testing.assert_allclose(res.outputs[0], lhsT.T @ rhs, rtol=1e-4, atol=1e-3)
        # every nc_matmul is one TensorE instruction; `res_tile[...] += ...` adds nothing
        self.assertEqual(res.metrics["tensor_engine_instruction_count"], 4 * 4 * 4)

    def test_layernorm_bn_stats(self):
        x = RNG.standard_normal((256, 1024)).astype(np.float32)
        (out,) = nkisim.simulate(layernorm_bn, {"in_tensor": x}).outputs
        ref = (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)

    def test_softmax_isa(self):
        x = RNG.standard_normal((256, 300)).astype(np.float32)
        (out,) = nkisim.simulate(softmax_isa, {"x": x}).outputs
        e = np.exp(x - x.max(axis=1, keepdims=True))
        np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5,
                                   atol=1e-7)

    def test_new_style_attention_scores(self):
        q = RNG.standard_normal((128, 64)).astype(np.float32)
        k = RNG.standard_normal((128, 64)).astype(np.float32)
        res = nkisim.simulate(new_style_attention_scores, {"q": q, "k": k})
        s = q @ k.T
        e = np.exp(s - s.max(axis=1, keepdims=True))
        np.testing.assert_allclose(res.outputs[0], e / e.sum(axis=1, keepdims=True),
                                   rtol=1e-4, atol=1e-6)
        # the copy pinned to ScalarE, the exp, and the engine-less scale by the reciprocal,
        # which the compiler places on ScalarE while VectorE is the busier engine
        self.assertEqual(res.metrics["scalar_engine_instruction_count"], 3)


if __name__ == "__main__":
    unittest.main()
