"""Probe kernel: a chain of `reps` dependent VectorE tensor_tensor adds of two fp32 [128, W]
tiles (both in SBUF): reps x max/plus of the fixed cost and 2 cycles per element."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x, y, reps):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(y)
    for _ in nl.sequential_range(reps):
        a = nl.add(a, b)
    nl.store(out, value=a)
    return out
