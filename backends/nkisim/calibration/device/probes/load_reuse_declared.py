"""Effect probe (load reuse distance), reference form: as load_reuse.py with x copied into a
declared tile every iteration (`nisa.dma_copy(dst=t, src=x)`), which every compiler
issues as written."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x, y, reps, gap):
    out = nl.ndarray((reps * gap * 128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for r in nl.affine_range(reps):
        t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        for g in nl.affine_range(gap):
            i = r * gap + g
            u = nl.load(y[g * 128:(g + 1) * 128, :])
            nl.store(out[i * 128:(i + 1) * 128, :], value=nl.add(t, u))
    return out
