"""Probe kernel: transpose x [128 * k, 128] block by block with transposing DMAs (HBM ->
SBUF, nisa.dma_transpose), each block stored with an ordinary DMA: the transposing loads
set the time."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    k = x.shape[0] // 128
    out = nl.ndarray((128, x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(k):
        t = nisa.dma_transpose(x[j * 128:(j + 1) * 128, :])
        nl.store(out[:, j * 128:(j + 1) * 128], value=t)
    return out
