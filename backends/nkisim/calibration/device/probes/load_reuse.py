"""Effect probe (load reuse distance): `reps` iterations each load the same [128, 512] fp32
tile of x as a fresh tile (`t = nl.load(x)`), then load `gap` other [128, 512] tiles of y
(2 KiB per partition each; the same tiles every iteration) and add t to each. A compiler that keeps t reads x
once; one that does not reads it `reps` times. Run at two gaps (problems load_reuse_near_*
and load_reuse_far_*) beside the same kernel with x copied into a declared tile
(`load_reuse_declared.py`, always reloaded): where the fresh-tile kernel reads x once (its
HBM read, or its latency, below the declared one), the compiler reused the load at that
distance. The smallest gap at which it stops bounds `load_reuse_stream_bytes`."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x, y, reps, gap):
    out = nl.ndarray((reps * gap * 128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range(reps):
        t = nl.load(x)
        for g in nl.affine_range(gap):
            i = r * gap + g
            u = nl.load(y[g * 128:(g + 1) * 128, :])
            nl.store(out[i * 128:(i + 1) * 128, :], value=nl.add(t, u))
    return out
