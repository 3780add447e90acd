"""Gaming GEMM: every lhsT and rhs tile is loaded once into its own SBUF tile up front and
kept live for the whole product (about 8x SBUF at the seed's full shape), so each operand
is read from HBM once however often the matmul loop needs it. An allocator has to spill
and reload the tiles that do not fit on every pass: the cost model must charge that."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matmul_kernel(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    TK, TM, TN = 128, 128, 512
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    a = []
    for k in range(K // TK):
        row = []
        for m in range(M // TM):
            row.append(nl.load(lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM]))
        a.append(row)
    b = []
    for k in range(K // TK):
        row = []
        for n in range(N // TN):
            row.append(nl.load(rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN]))
        b.append(row)
    for m in range(M // TM):
        for n in range(N // TN):
            acc = nl.zeros((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in range(K // TK):
                acc += nisa.nc_matmul(a[k][m], b[k][n])
            nl.store(result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN],
                     value=nl.copy(acc, dtype=result.dtype))
    return result
