"""RoPE, optimized: work on all 128 partitions at once. Per 1024-column chunk, one tile holds
x, a second holds x with its halves swapped (loaded straight from HBM into partition ranges),
cos is loaded into both halves and sin into both halves with the top half negated, so
out = x * cos2 + x_swapped * sin2 is three full-height instructions (plus one half-height
negation) instead of six half-height ones; chunks let loads, compute and stores overlap."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rope_kernel(x, cos, sin):
    head_dim, seq = x.shape
    half = head_dim // 2
    F = 1024
    assert cos.shape == (half, seq) and head_dim <= nl.tile_size.pmax and seq % F == 0
    out = nl.ndarray((head_dim, seq), dtype=x.dtype, buffer=nl.shared_hbm)

    for c in range(seq // F):
        lo = c * F
        x_t = nl.ndarray((head_dim, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_t, src=x[:, lo:lo + F])
        x_sw = nl.ndarray((head_dim, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_sw[0:half, :], src=x[half:head_dim, lo:lo + F])
        nisa.dma_copy(dst=x_sw[half:head_dim, :], src=x[0:half, lo:lo + F])
        cos2 = nl.ndarray((head_dim, F), dtype=cos.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=cos2[0:half, :], src=cos[:, lo:lo + F])
        nisa.dma_copy(dst=cos2[half:head_dim, :], src=cos[:, lo:lo + F])
        sin2 = nl.ndarray((head_dim, F), dtype=sin.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=sin2[0:half, :], src=sin[:, lo:lo + F])
        nisa.dma_copy(dst=sin2[half:head_dim, :], src=sin[:, lo:lo + F])
        nisa.tensor_scalar(dst=sin2[0:half, :], data=sin2[0:half, :], op0=nl.multiply,
                           operand0=-1.0)

        a = nl.ndarray((head_dim, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=a, data1=x_t, data2=cos2, op=nl.multiply)
        b = nl.ndarray((head_dim, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=b, data1=x_sw, data2=sin2, op=nl.multiply)
        res = nl.ndarray((head_dim, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=res, data1=a, data2=b, op=nl.add)
        nisa.dma_copy(dst=out[:, lo:lo + F], src=res)

    return out
