"""GEMM, optimized: 512x1024 output blocks held in all 8 PSUM banks (4 M-tiles x 2 N-tiles).
Per K step one 128x512 lhsT load and one 128x1024 rhs load feed 8 matmuls: lhsT is
re-read N/1024 times instead of N/512, rhs M/512 times instead of M/128, and every DMA moves
>= 1 KiB per partition. Each finished 128x1024 row block leaves in one store."""
import nki
import nki.isa as nisa
import nki.language as nl

BLOCK_M_TILES = 4
BLOCK_N_TILES = 2


@nki.jit
def matmul_kernel(lhsT, rhs):
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2
    TILE_K = nl.tile_size.pmax
    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_N = nl.tile_size.gemm_moving_fmax
    BM = TILE_M * BLOCK_M_TILES
    BN = TILE_N * BLOCK_N_TILES
    assert K % TILE_K == 0 and M % BM == 0 and N % BN == 0
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    for mb in range(M // BM):
        for nb in range(N // BN):
            acc = []
            for i in range(BLOCK_M_TILES * BLOCK_N_TILES):
                acc.append(nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum))
            for k in range(K // TILE_K):
                lhsT_block = nl.ndarray((TILE_K, BM), dtype=lhsT.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_block,
                              src=lhsT[k * TILE_K:(k + 1) * TILE_K, mb * BM:(mb + 1) * BM])
                rhs_block = nl.ndarray((TILE_K, BN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=rhs_block,
                              src=rhs[k * TILE_K:(k + 1) * TILE_K, nb * BN:(nb + 1) * BN])
                for i in range(BLOCK_M_TILES):
                    for j in range(BLOCK_N_TILES):
                        nisa.nc_matmul(dst=acc[i * BLOCK_N_TILES + j],
                                       stationary=lhsT_block[:, i * TILE_M:(i + 1) * TILE_M],
                                       moving=rhs_block[:, j * TILE_N:(j + 1) * TILE_N])
            for i in range(BLOCK_M_TILES):
                out_block = nl.ndarray((TILE_M, BN), dtype=result.dtype, buffer=nl.sbuf)
                for j in range(BLOCK_N_TILES):
                    nisa.tensor_copy(dst=out_block[:, j * TILE_N:(j + 1) * TILE_N],
                                     src=acc[i * BLOCK_N_TILES + j])
                row = mb * BM + i * TILE_M
                nisa.dma_copy(dst=result[row:row + TILE_M, nb * BN:(nb + 1) * BN], src=out_block)

    return result
