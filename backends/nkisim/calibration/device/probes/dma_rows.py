"""Probe kernel: copy x [128, C] to out through SBUF in column blocks of `w` elements: every
load and store moves 128 rows of 4w contiguous bytes, independent of the others (they
overlap on the DMA queues, so the time is the DMA bandwidth a `4w`-byte row gets)."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x, w):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(x.shape[1] // w):
        t = nl.load(x[:, j * w:(j + 1) * w])
        nl.store(out[:, j * w:(j + 1) * w], value=t)
    return out
