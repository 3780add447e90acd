"""Transpose (012)->(021), optimized: each 128-row band of x[a] is loaded once with a
full-width DMA (2 KiB per partition); for every output row band, four 128x128 TensorE
transposes fill one PSUM bank side by side, one copy evacuates it, and one full-width DMA
stores it."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def transpose_kernel(x):
    A, B, C = x.shape
    T = nl.tile_size.pmax
    BAND = nl.tile_size.psum_fmax   # 512 fp32 = one PSUM bank
    assert B % BAND == 0 and C % T == 0 and B >= T

    out = nl.ndarray((A, C, B), dtype=x.dtype, buffer=nl.shared_hbm)
    for a in nl.affine_range(A):
        for bb in nl.affine_range(B // BAND):
            bands = []
            for s in nl.static_range(BAND // T):
                row = bb * BAND + s * T
                bands.append(nl.load(x[a, row:row + T, :]))
            for ci in nl.affine_range(C // T):
                acc = nl.ndarray((T, BAND), dtype=nl.float32, buffer=nl.psum)
                for s in nl.static_range(BAND // T):
                    acc[:, s * T:(s + 1) * T] = nisa.nc_transpose(bands[s][:, ci * T:(ci + 1) * T])
                res = nl.copy(acc, dtype=x.dtype)
                nl.store(out[a, ci * T:(ci + 1) * T, bb * BAND:(bb + 1) * BAND], value=res)

    return out
