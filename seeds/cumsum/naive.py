"""Cumsum, naive: 128 rows x 512 columns per step; each chunk is scanned with
tensor_tensor_scan (h = h * 1 + x) starting from the previous chunk's last column, so the
chunks of a row band run strictly one after another; ones are re-created per chunk."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def cumsum_kernel(x):
    rows, cols = x.shape
    P = nl.tile_size.pmax
    F = 512
    assert rows % P == 0 and cols % F == 0
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)

    for i in range(rows // P):
        carry = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=carry, value=0.0)
        for c in range(cols // F):
            ones = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=ones, value=1.0)
            tile = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=x[i * P:(i + 1) * P, c * F:(c + 1) * F])
            scanned = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor_scan(dst=scanned, data0=ones, data1=tile, initial=carry,
                                    op0=nl.multiply, op1=nl.add)
            nisa.tensor_copy(dst=carry, src=scanned[:, F - 1:F])
            nisa.dma_copy(dst=out[i * P:(i + 1) * P, c * F:(c + 1) * F], src=scanned)

    return out
