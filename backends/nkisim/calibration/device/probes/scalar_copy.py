"""Probe kernel: a chain of `reps` dependent ScalarE tensor_copy instructions of a [128, W]
fp32 tile: the latency is reps x ScalarE's cost of one W-element copy, plus a load and a store."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x, reps):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    for _ in nl.sequential_range(reps):
        t = nisa.tensor_copy(t, engine=nisa.scalar_engine)
    nl.store(out, value=t)
    return out
