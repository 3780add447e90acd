"""Probe kernel: `reps` round trips of a small [128, 4] fp32 tile between SBUF and HBM, each
transfer waiting for the previous one (the store reads what the load wrote, the next load
reads what the store wrote): the time is about 2 x reps fixed DMA latencies."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x, reps):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    for _ in nl.sequential_range(reps):
        nl.store(out, value=t)
        t = nl.load(out)
    nl.store(out, value=t)
    return out
