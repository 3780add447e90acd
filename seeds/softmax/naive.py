"""Softmax, naive: row tiles of 128 x 512 columns (small DMAs), and every step as its own
pass: max, subtract, exp, sum, reciprocal, multiply; the row is loaded twice (once for the
statistics, once for the output pass)."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def softmax_kernel(x):
    rows, cols = x.shape
    P = nl.tile_size.pmax
    F = 512
    assert rows % P == 0 and cols % F == 0
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)

    for i in range(rows // P):
        row_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=row_max, value=-3.0e38)
        for c in range(cols // F):
            tile = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=x[i * P:(i + 1) * P, c * F:(c + 1) * F])
            part_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=part_max, op=nl.maximum, data=tile, axis=(1,), keepdims=True)
            nisa.tensor_tensor(dst=row_max, data1=row_max, data2=part_max, op=nl.maximum)

        row_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=row_sum, value=0.0)
        for c in range(cols // F):
            tile = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=x[i * P:(i + 1) * P, c * F:(c + 1) * F])
            shifted = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=shifted, data=tile, op0=nl.subtract, operand0=row_max)
            expd = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=expd, op=nl.exp, data=shifted)
            part_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=part_sum, op=nl.add, data=expd, axis=(1,), keepdims=True)
            nisa.tensor_tensor(dst=row_sum, data1=row_sum, data2=part_sum, op=nl.add)

        inv_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)
        for c in range(cols // F):
            tile = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=x[i * P:(i + 1) * P, c * F:(c + 1) * F])
            shifted = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=shifted, data=tile, op0=nl.subtract, operand0=row_max)
            expd = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=expd, op=nl.exp, data=shifted)
            res = nl.ndarray((P, F), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=res, data=expd, op0=nl.multiply, operand0=inv_sum)
            nisa.dma_copy(dst=out[i * P:(i + 1) * P, c * F:(c + 1) * F], src=res)

    return out
