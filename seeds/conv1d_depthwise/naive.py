"""Depthwise conv1d, naive: channels on partitions, one (batch, 128-channel) slab at a time;
the input is copied into a zero-padded tile, then three multiplies and two adds over the
shifted views; the filter is reloaded for every slab."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def conv1d_depthwise_kernel(x, w):
    N, C, W = x.shape
    P = nl.tile_size.pmax
    assert C % P == 0
    out = nl.ndarray((N, C, W), dtype=x.dtype, buffer=nl.shared_hbm)

    for n in nl.affine_range(N):
        for ct in nl.affine_range(C // P):
            w_tile = nl.load(w[ct * P:(ct + 1) * P, :])
            padded = nl.zeros((P, W + 2), dtype=x.dtype, buffer=nl.sbuf)
            padded[:, 1:W + 1] = nl.load(x[n, ct * P:(ct + 1) * P, :])
            left = nl.multiply(padded[:, 0:W], w_tile[:, 0:1])
            mid = nl.multiply(padded[:, 1:W + 1], w_tile[:, 1:2])
            right = nl.multiply(padded[:, 2:W + 2], w_tile[:, 2:3])
            acc = nl.add(left, mid)
            acc = nl.add(acc, right)
            nl.store(out[n, ct * P:(ct + 1) * P, :], value=acc)

    return out
