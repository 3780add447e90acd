"""A matmul optimization ladder (result[M, N] = lhsT.T @ rhs, bf16 in, bf16 out), written for
the simulator's ranking tests: each step applies one classic optimization to the previous."""
import nki
import nki.isa as nisa
import nki.language as nl

TK, TM, TN = 128, 128, 512


def _evict_store(result, acc, row, col):
    sb = nl.ndarray((TM, TN), dtype=result.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=sb, src=acc)
    nisa.dma_copy(dst=result[row * TM:(row + 1) * TM, col * TN:(col + 1) * TN], src=sb)


@nki.jit
def step1_tiled(lhsT, rhs):
    """Every (m, n, k) tile pair is loaded right before its matmul."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                a = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
                nisa.dma_copy(dst=b, src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            _evict_store(result, acc, m, n)
    return result


@nki.jit
def step2_hoisted(lhsT, rhs):
    """The lhsT column panel is loaded once per m; rhs panels once per (m, n)."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    nk = K // TK
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        a = []
        for k in nl.affine_range(nk):
            t = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
            a.append(t)
        for n in nl.affine_range(N // TN):
            b = []
            for k in nl.affine_range(nk):
                t = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                b.append(t)
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(nk):
                nisa.nc_matmul(dst=acc, stationary=a[k], moving=b[k])
            _evict_store(result, acc, m, n)
    return result


@nki.jit
def step3_blocked_free(lhsT, rhs, bm=2, bn=2):
    """M and N blocked: each loaded panel feeds bm x bn output tiles."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    nk = K // TK
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for mb in nl.affine_range(M // (TM * bm)):
        a = []
        for i in nl.affine_range(bm):
            row = []
            m = mb * bm + i
            for k in nl.affine_range(nk):
                t = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
                row.append(t)
            a.append(row)
        for nb in nl.affine_range(N // (TN * bn)):
            b = []
            for j in nl.affine_range(bn):
                col = []
                n = nb * bn + j
                for k in nl.affine_range(nk):
                    t = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=t, src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                    col.append(t)
                b.append(col)
            for i in nl.affine_range(bm):
                for j in nl.affine_range(bn):
                    acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(nk):
                        nisa.nc_matmul(dst=acc, stationary=a[i][k], moving=b[j][k])
                    _evict_store(result, acc, mb * bm + i, nb * bn + j)
    return result


@nki.jit
def step4_blocked_all(lhsT, rhs, bm=16, bn=2, bk=8):
    """M, N and K blocked; each DMA moves a whole [128, block] row panel; partial sums of a
    K block are added into fp32 accumulators kept in SBUF."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    BM, BN = TM * bm, TN * bn
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for nb in nl.affine_range(N // BN):
        sums = []
        for mb in range(M // BM):
            per_m = []
            for i in range(bm):
                per_n = []
                for j in range(bn):
                    s = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.memset(dst=s, value=0.0)
                    per_n.append(s)
                per_m.append(per_n)
            sums.append(per_m)
        for kb in nl.sequential_range(K // (TK * bk)):
            b = []
            for kk in range(bk):
                k = kb * bk + kk
                t = nl.ndarray((TK, BN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=rhs[k * TK:(k + 1) * TK, nb * BN:(nb + 1) * BN])
                b.append(t)
            for mb in nl.affine_range(M // BM):
                a = []
                for kk in nl.affine_range(bk):
                    k = kb * bk + kk
                    t = nl.ndarray((TK, BM), dtype=lhsT.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=t, src=lhsT[k * TK:(k + 1) * TK, mb * BM:(mb + 1) * BM])
                    a.append(t)
                for j in nl.affine_range(bn):
                    for i in nl.affine_range(bm):
                        acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
                        for kk in nl.affine_range(bk):
                            nisa.nc_matmul(dst=acc, stationary=a[kk][:, i * TM:(i + 1) * TM],
                                           moving=b[kk][:, j * TN:(j + 1) * TN])
                        nisa.tensor_tensor(dst=sums[mb][i][j], data1=sums[mb][i][j], data2=acc,
                                           op=nl.add)
        for mb in nl.affine_range(M // BM):
            for i in nl.affine_range(bm):
                packed = nl.ndarray((TM, BN), dtype=result.dtype, buffer=nl.sbuf)
                for j in nl.affine_range(bn):
                    nisa.tensor_copy(dst=packed[:, j * TN:(j + 1) * TN], src=sums[mb][i][j])
                row = mb * bm + i
                nisa.dma_copy(dst=result[row * TM:(row + 1) * TM, nb * BN:(nb + 1) * BN],
                              src=packed)
    return result


@nki.jit
def step4_blocked_all_blockdim(lhsT, rhs, bm=16, bn=2, bk=8):
    """step4 in the older style: accumulators and panels are block-dimension tensors
    (nl.par_dim not first), zeroed by one instruction and updated with `+=`."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    BM, BN = TM * bm, TN * bn
    nmb = M // BM
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for nb in nl.affine_range(N // BN):
        sums = nl.zeros((nmb, bm, bn, nl.par_dim(TM), TN), dtype=nl.float32, buffer=nl.sbuf)
        for kb in nl.sequential_range(K // (TK * bk)):
            b = nl.ndarray((bk, nl.par_dim(TK), BN), dtype=rhs.dtype, buffer=nl.sbuf)
            for kk in nl.affine_range(bk):
                k = kb * bk + kk
                b[kk] = nl.load(rhs[k * TK:(k + 1) * TK, nb * BN:(nb + 1) * BN])
            for mb in nl.affine_range(nmb):
                a = nl.ndarray((bk, nl.par_dim(TK), BM), dtype=lhsT.dtype, buffer=nl.sbuf)
                for kk in nl.affine_range(bk):
                    k = kb * bk + kk
                    a[kk] = nl.load(lhsT[k * TK:(k + 1) * TK, mb * BM:(mb + 1) * BM])
                for j in nl.affine_range(bn):
                    for i in nl.affine_range(bm):
                        acc = nl.zeros((TM, TN), dtype=nl.float32, buffer=nl.psum)
                        for kk in nl.affine_range(bk):
                            acc += nisa.nc_matmul(a[kk, :, i * TM:(i + 1) * TM],
                                                  b[kk, :, j * TN:(j + 1) * TN])
                        sums[mb, i, j] += acc
        for mb in nl.affine_range(nmb):
            for i in nl.affine_range(bm):
                packed = nl.ndarray((TM, BN), dtype=result.dtype, buffer=nl.sbuf)
                for j in nl.affine_range(bn):
                    packed[:, j * TN:(j + 1) * TN] = nl.copy(sums[mb, i, j])
                row = mb * bm + i
                nl.store(result[row * TM:(row + 1) * TM, nb * BN:(nb + 1) * BN], value=packed)
    return result


LADDER = (step1_tiled, step2_hoisted, step3_blocked_free, step4_blocked_all,
          step4_blocked_all_blockdim)
