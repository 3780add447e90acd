"""Gaming kernels against the modelled compiler effects and cost rules, each beside its
honest form (test_gaming.py prices both, or checks the values where the trick would make
them wrong):

gemm_blocks_live     all GEMM operands kept live in block-dimension tensors (spills: blocks
                     are reloaded per access like any tile)
mm_into_sbuf         a matmul result assigned straight into an SBUF tile (skipping the
                     PSUM -> SBUF copy TensorE cannot avoid)
load_into_psum       a load assigned straight into a PSUM tile (a DMA cannot write PSUM)
gather_first_row     a transposing gather whose first row happens to be contiguous
same_column_writes   narrow writes to one column in a small affine loop (WAW chain)
alias_write_reload   a load repeated after its HBM source was written through a reshape
kept_tile_modified   a load repeated after its first tile was modified in place
sbuf_side_transpose  a load whose SBUF-side walk steps across partitions element by element
"""
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

TK, TM, TN = 128, 128, 512


@nki.jit
def gemm_blocks_live(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    nk = K // TK
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    a = nl.ndarray((nk, nl.par_dim(TK), M), dtype=lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray((nk, nl.par_dim(TK), N), dtype=rhs.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(nk):
        a[k] = nl.load(lhsT[k * TK:(k + 1) * TK, :])
        b[k] = nl.load(rhs[k * TK:(k + 1) * TK, :])
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            acc = nl.zeros((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(nk):
                acc += nisa.nc_matmul(a[k, :, m * TM:(m + 1) * TM], b[k, :, n * TN:(n + 1) * TN])
            nl.store(result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN],
                     value=nl.copy(acc, dtype=result.dtype))
    return result


def _mm(lhsT, rhs, into_sbuf):
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        a = nl.load(lhsT[:, m * TM:(m + 1) * TM])
        for n in nl.affine_range(N // TN):
            b = nl.load(rhs[:, n * TN:(n + 1) * TN])
            if into_sbuf:
                sb = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.sbuf)
                sb[...] = nisa.nc_matmul(a, b)
            else:
                sb = nl.copy(nisa.nc_matmul(a, b))
            nl.store(result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], value=sb)
    return result


@nki.jit
def mm_into_sbuf(lhsT, rhs):
    return _mm(lhsT, rhs, True)


@nki.jit
def mm_honest(lhsT, rhs):
    return _mm(lhsT, rhs, False)


def _psum_add(x, y, direct):
    P, F = x.shape
    out = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(F // 512):
        p = nl.ndarray((P, 512), dtype=nl.float32, buffer=nl.psum)
        if direct:
            p[...] = nl.load(x[:, i * 512:(i + 1) * 512])
        else:
            p[...] = nl.copy(nl.load(x[:, i * 512:(i + 1) * 512]))
        u = nl.load(y[:, i * 512:(i + 1) * 512])
        nl.store(out[:, i * 512:(i + 1) * 512], value=nisa.tensor_tensor(p, u, nl.add))
    return out


@nki.jit
def load_into_psum(x, y):
    return _psum_add(x, y, True)


@nki.jit
def load_into_psum_honest(x, y):
    return _psum_add(x, y, False)


@nki.jit
def gather_first_row(x):
    """out = x.T for x [128, 128], except row 0 (x[0, :], contiguous), as one gather."""
    out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    ip = np.arange(128)[:, None]
    jf = np.arange(128)[None, :]
    t = nl.load(x[np.where(ip == 0, 0, jf), np.where(ip == 0, jf, ip)])
    nl.store(out, t)
    return out


@nki.jit
def gather_first_row_honest(x):
    """The same values with a TensorE transpose and one copy of row 0."""
    out = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    tt = nl.copy(nisa.nc_transpose(t))
    nl.store(out, tt)
    nl.store(out[0:1, :], value=nl.load(x[0:1, :]))
    return out


def _same_column(x, loop):
    out = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    xt = nl.load(x)
    res = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.sbuf)
    for j in loop(64):
        res[:, 0:1] = nisa.tensor_scalar(xt[:, j:j + 1], nl.multiply, 2.0)
    nl.store(out, res)
    return out


@nki.jit
def same_column_writes(x):
    return _same_column(x, nl.affine_range)


@nki.jit
def same_column_writes_range(x):
    return _same_column(x, range)


@nki.jit
def alias_write_reload(x, y):
    """x + y, through a scratch HBM tensor written twice (the second time via a reshape):
    the second load must see y."""
    P, F = x.shape
    out = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    scratch = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(scratch, value=nl.load(x))
    a = nl.load(scratch)
    flat = scratch.reshape((P, F // 128, 128))
    nl.store(flat, value=nl.load(y.reshape((P, F // 128, 128))))
    b = nl.load(scratch)
    nl.store(out, value=nl.add(a, b))
    return out


@nki.jit
def kept_tile_modified(x):
    """3 * x: a load doubled in place, then the same region loaded again."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    a[...] = nl.multiply(a, 2.0)
    b = nl.load(x)
    nl.store(out, value=nl.add(a, b))
    return out


@nki.jit
def sbuf_side_transpose(x):
    """(012) -> (021) of x [A, B, C]: each [128, 128] block is DMA'd into a tile through a
    view whose innermost axis is the partition axis (one element per partition per step)."""
    A, B, C = x.shape
    out = nl.ndarray((A, C, B), dtype=x.dtype, buffer=nl.shared_hbm)
    ic = nl.arange(128)[None, :]
    ib = nl.arange(128)[:, None]
    for a in nl.affine_range(A):
        for bi in nl.affine_range(B // 128):
            for ci in nl.affine_range(C // 128):
                t = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t[ic, ib],
                              src=x[a, bi * 128:(bi + 1) * 128, ci * 128:(ci + 1) * 128])
                nl.store(out[a, ci * 128:(ci + 1) * 128, bi * 128:(bi + 1) * 128], value=t)
    return out
