"""Mamba selective scan, naive (in the spirit of the tutorial's first version): channels on
partitions; for every (batch, channel tile, state) the B and C rows are loaded and broadcast
again, exp(delta * A) and delta * u * B are recomputed from scratch, the recurrence runs as
one tensor_tensor_scan over the whole sequence, and C * h is accumulated in SBUF."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def mamba_kernel(delta, u, A, B, C):
    batch, channels, seq = delta.shape
    state = A.shape[1]
    P = nl.tile_size.pmax
    assert channels % P == 0
    out = nl.ndarray((batch, channels, seq), dtype=delta.dtype, buffer=nl.shared_hbm)

    for b in nl.affine_range(batch):
        for ct in nl.affine_range(channels // P):
            acc = nl.zeros((P, seq), dtype=nl.float32, buffer=nl.sbuf)
            for n in nl.sequential_range(state):
                delta_t = nl.load(delta[b, ct * P:(ct + 1) * P, :])
                u_t = nl.load(u[b, ct * P:(ct + 1) * P, :])
                a_col = nl.load(A[ct * P:(ct + 1) * P, n:n + 1])
                b_row = nl.broadcast_to(nl.load(B[b, n:n + 1, :]), shape=(P, seq))
                c_row = nl.broadcast_to(nl.load(C[b, n:n + 1, :]), shape=(P, seq))
                delta_a = nl.exp(nl.multiply(delta_t, a_col))
                delta_bu = nl.multiply(nl.multiply(delta_t, u_t), b_row)
                h = nisa.tensor_tensor_scan(delta_a, delta_bu, 0.0, op0=nl.multiply, op1=nl.add)
                acc[...] = nl.add(acc, nl.multiply(c_row, h))
            nl.store(out[b, ct * P:(ct + 1) * P, :], value=acc)

    return out
