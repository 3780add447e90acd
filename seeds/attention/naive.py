"""Self-attention, naive: for each 128-query tile, the full score row block [128, seq] is
computed into SBUF (8 matmuls of 128x512), softmax runs as separate passes (max, scale and
shift, exp, sum, reciprocal, normalise), then every 128x128 probability block is transposed
on TensorE and multiplied with v, accumulating in PSUM. k and v are reloaded for every query
tile."""
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

    for qi in range(seq // P):
        q_tile = nl.ndarray((d, P), dtype=q.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=q_tile, src=q[:, qi * P:(qi + 1) * P])

        scores = nl.ndarray((P, seq), dtype=nl.float32, buffer=nl.sbuf)
        for kj in range(seq // F):
            k_tile = nl.ndarray((d, F), dtype=k.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=k_tile, src=k[:, kj * F:(kj + 1) * F])
            s_psum = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_psum, stationary=q_tile, moving=k_tile)
            nisa.tensor_copy(dst=scores[:, kj * F:(kj + 1) * F], src=s_psum)

        row_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=scores, axis=(1,), keepdims=True)
        shifted = nl.ndarray((P, seq), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=shifted, data=scores, op0=nl.subtract, operand0=row_max,
                           op1=nl.multiply, operand1=scale)
        probs = nl.ndarray((P, seq), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=probs, op=nl.exp, data=shifted)
        row_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=row_sum, op=nl.add, data=probs, axis=(1,), keepdims=True)
        inv_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)
        probs_n = nl.ndarray((P, seq), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=probs_n, data=probs, op0=nl.multiply, operand0=inv_sum)

        o_psum = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.psum)
        for kj in range(seq // P):
            pt_psum = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=pt_psum, data=probs_n[:, kj * P:(kj + 1) * P])
            pt = nl.ndarray((P, P), dtype=v.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=pt, src=pt_psum)
            v_tile = nl.ndarray((P, d), dtype=v.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=v_tile, src=v[kj * P:(kj + 1) * P, :])
            nisa.nc_matmul(dst=o_psum, stationary=pt, moving=v_tile)

        o_tile = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o_tile, src=o_psum)
        nisa.dma_copy(dst=out[qi * P:(qi + 1) * P, :], src=o_tile)

    return out
