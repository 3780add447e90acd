"""RoPE, naive: 512-column chunks (small DMAs), both halves of x, cos and sin loaded per
chunk, and six separate tensor_tensor instructions per chunk."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rope_kernel(x, cos, sin):
    head_dim, seq = x.shape
    half = head_dim // 2
    F = 512
    assert seq % F == 0 and cos.shape == (half, seq)
    out = nl.ndarray((head_dim, seq), dtype=x.dtype, buffer=nl.shared_hbm)

    for c in range(seq // F):
        x1 = nl.ndarray((half, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x1, src=x[0:half, c * F:(c + 1) * F])
        x2 = nl.ndarray((half, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x2, src=x[half:head_dim, c * F:(c + 1) * F])
        cos_t = nl.ndarray((half, F), dtype=cos.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=cos_t, src=cos[:, c * F:(c + 1) * F])
        sin_t = nl.ndarray((half, F), dtype=sin.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=sin_t, src=sin[:, c * F:(c + 1) * F])

        a = nl.ndarray((half, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=a, data1=x1, data2=cos_t, op=nl.multiply)
        b = nl.ndarray((half, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=b, data1=x2, data2=sin_t, op=nl.multiply)
        lo = nl.ndarray((half, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=lo, data1=a, data2=b, op=nl.subtract)
        c2 = nl.ndarray((half, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=c2, data1=x2, data2=cos_t, op=nl.multiply)
        d2 = nl.ndarray((half, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=d2, data1=x1, data2=sin_t, op=nl.multiply)
        hi = nl.ndarray((half, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=hi, data1=c2, data2=d2, op=nl.add)

        nisa.dma_copy(dst=out[0:half, c * F:(c + 1) * F], src=lo)
        nisa.dma_copy(dst=out[half:head_dim, c * F:(c + 1) * F], src=hi)

    return out
