"""Self-attention, optimized: k and v are loaded once and stay in SBUF for every query tile;
the softmax is one max reduction plus one ScalarE activation that computes
exp(scale * s - scale * max) straight to bf16 and accumulates the row sum; the division by
the row sum is deferred to the [128, d] output instead of the [128, seq] probabilities."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def attention_kernel(q, k, v):
    d, seq = q.shape
    P = nl.tile_size.pmax
    F = nl.tile_size.gemm_moving_fmax
    assert d == P and seq % F == 0
    scale = 1.0 / (d ** 0.5)
    out = nl.ndarray((seq, d), dtype=nl.float32, buffer=nl.shared_hbm)

    k_all = nl.ndarray((d, seq), dtype=k.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=k_all, src=k)
    # v block j (rows j*128..) sits at columns j*d..(j+1)*d: kv on partitions, d on the free axis.
    v_all = nl.ndarray((P, (seq // P) * d), dtype=v.dtype, buffer=nl.sbuf)
    for j in range(seq // P):
        nisa.dma_copy(dst=v_all[:, j * d:(j + 1) * d], src=v[j * P:(j + 1) * P, :])

    for qi in range(seq // P):
        q_tile = nl.ndarray((d, P), dtype=q.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=q_tile, src=q[:, qi * P:(qi + 1) * P])

        scores = nl.ndarray((P, seq), dtype=nl.float32, buffer=nl.sbuf)
        for kj in range(seq // F):
            s_psum = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_psum, stationary=q_tile, moving=k_all[:, kj * F:(kj + 1) * F])
            nisa.tensor_copy(dst=scores[:, kj * F:(kj + 1) * F], src=s_psum)

        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=scores, axis=(1,), negate=True,
                           keepdims=True)
        bias = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=bias, data=neg_max, op0=nl.multiply, operand0=scale)
        probs = nl.ndarray((P, seq), dtype=v.dtype, buffer=nl.sbuf)
        row_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=probs, op=nl.exp, data=scores, bias=bias, scale=scale,
                        reduce_op=nl.add, reduce_res=row_sum)
        inv_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)

        o_psum = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.psum)
        for kj in range(seq // P):
            # A 16-bit transpose produces a 16-bit PSUM tile (trn2 TensorE transpose mode).
            pt_psum = nl.ndarray((P, P), dtype=v.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=pt_psum, data=probs[:, kj * P:(kj + 1) * P])
            pt = nl.ndarray((P, P), dtype=v.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=pt, src=pt_psum)
            nisa.nc_matmul(dst=o_psum, stationary=pt, moving=v_all[:, kj * d:(kj + 1) * d])

        o_tile = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o_tile, data=o_psum, op0=nl.multiply, operand0=inv_sum)
        nisa.dma_copy(dst=out[qi * P:(qi + 1) * P, :], src=o_tile)

    return out
