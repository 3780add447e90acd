"""Transpose (012)->(021), naive: one 128x128 block at a time: a 512-byte-per-partition load,
a TensorE transpose into PSUM, a copy to SBUF and a 512-byte-per-partition store."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def transpose_kernel(x):
    A, B, C = x.shape
    T = nl.tile_size.pmax
    assert B % T == 0 and C % T == 0
    out = nl.ndarray((A, C, B), dtype=x.dtype, buffer=nl.shared_hbm)

    for a in nl.affine_range(A):
        for bi in nl.affine_range(B // T):
            for ci in nl.affine_range(C // T):
                block = nl.load(x[a, bi * T:(bi + 1) * T, ci * T:(ci + 1) * T])
                block_t = nisa.nc_transpose(block)
                block_sb = nl.copy(block_t)
                nl.store(out[a, ci * T:(ci + 1) * T, bi * T:(bi + 1) * T], value=block_sb)

    return out
