"""RMSNorm, naive: one row tile at a time, the weight reloaded and re-broadcast in every
iteration, and each step of the formula as its own instruction."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def rmsnorm_kernel(a_tensor, g_tensor):
    rows, hidden = a_tensor.shape
    assert rows % nl.tile_size.pmax == 0
    out_tensor = nl.ndarray((rows, hidden), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    g_2d = g_tensor.reshape((1, hidden))
    P = nl.tile_size.pmax

    for i in nl.affine_range(rows // P):
        a_tile = nl.load(a_tensor[i * P:(i + 1) * P, :])
        squared = nl.multiply(a_tile, a_tile)
        square_sum = nl.sum(squared, axis=[1], keepdims=True)
        mean = nl.multiply(square_sum, 1.0 / hidden)
        rms_reciprocal = nl.rsqrt(mean)
        normalized = nl.multiply(a_tile, rms_reciprocal)
        g_tile = nl.load(g_2d[0:1, :])
        g_bcast = nl.broadcast_to(g_tile, shape=(P, hidden))
        out_tile = nl.multiply(normalized, g_bcast)
        nl.store(out_tensor[i * P:(i + 1) * P, :], value=out_tile)

    return out_tensor
