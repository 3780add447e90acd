"""Kernels for the trn2 anchors (calibration/anchors.json), written for calibration from what
the published kernels do.

double_row_fp8: C = A @ B for A [M, K] bf16 and B [K, N] given pre-quantized to fp8_e4m3
  (column scales `b_scale`, broadcast to [128, N]) and interleaved so that each [128, 2N]
  row block holds two consecutive 128-row K tiles side by side per 512 columns. A is
  quantized on chip per 128-row tile and K block (row max / 240), transposed on TensorE,
  and multiplied with double-row fp8 matmuls (two K tiles per instruction); each K block's
  partial sums are dequantized by the row scales and accumulated in SBUF; the column scales
  are applied once at the end. Blocks: 256 rows of A, all N, 2048 of K (the published
  test's 2 x 2 x 16 tiles); the K-block loop is sequential.
"""
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

SHAPES = {
    "double_row_fp8": {"a": ((512, 16384), "bfloat16"), "b_q": ((8192, 2048), "float8_e4m3"),
                       "b_scale": ((128, 1024), "bfloat16")},
}
FP8_MAX = 240.0


def double_row_fp8(a, b_q, b_scale, tiles_m=2, tiles_k=16):
    rows, depth = a.shape
    cols = b_q.shape[1] // 2
    block_m, block_k = 128 * tiles_m, 128 * tiles_k
    out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    for mb in nl.affine_range(rows // block_m):
        total = nl.zeros((128, tiles_m * cols), dtype=a.dtype, buffer=nl.sbuf)
        for kb in nl.sequential_range(depth // block_k):
            a_q = nl.ndarray((tiles_m, nl.par_dim(128), block_k), dtype=nl.float8_e4m3,
                             buffer=nl.sbuf)
            a_s = nl.ndarray((tiles_m, nl.par_dim(128), 1), dtype=a.dtype, buffer=nl.sbuf)
            for tm in nl.affine_range(tiles_m):
                r0 = mb * block_m + tm * 128
                blk = nl.load(a[r0:r0 + 128, kb * block_k:(kb + 1) * block_k])
                a_s[tm] = nisa.tensor_reduce(nl.max, nl.abs(blk), axis=[1])
                a_s[tm] = nl.divide(a_s[tm], FP8_MAX)
                a_q[tm] = nl.divide(blk, a_s[tm])
                for t in nl.affine_range(tiles_k):
                    a_q[tm, :, t * 128:(t + 1) * 128] = nisa.nc_transpose(
                        a_q[tm, :, t * 128:(t + 1) * 128])
            part = nl.zeros((128, tiles_m * cols), dtype=a.dtype, buffer=nl.sbuf)
            b_t = nl.ndarray((tiles_k // 2, nl.par_dim(128), 2 * cols), dtype=b_q.dtype,
                             buffer=nl.sbuf)
            for p in nl.affine_range(tiles_k // 2):
                k0 = (kb * tiles_k // 2 + p) * 128
                b_t[p] = nl.load(b_q[k0:k0 + 128, :])
            for tm in nl.affine_range(tiles_m):
                for tn in nl.affine_range(cols // 512):
                    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
                    for p in nl.affine_range(tiles_k // 2):
                        ik, it, im = nl.mgrid[0:128, 0:2, 0:128]
                        lhs_pair = a_q[tm, ik, p * 256 + it * 128 + im]
                        ik, it, jn = nl.mgrid[0:128, 0:2, 0:512]
                        rhs_pair = b_t[p, ik, tn * 1024 + it * 512 + jn]
                        acc[...] += nisa.nc_matmul(lhs_pair, rhs_pair, perf_mode="double_row")
                    c0 = tm * cols + tn * 512
                    part[:, c0:c0 + 512] += acc
            for tm in nl.affine_range(tiles_m):
                cs = slice(tm * cols, (tm + 1) * cols)
                total[:, cs] += nisa.tensor_tensor(part[:, cs], a_s[tm], nl.multiply)
        scale = nl.load(b_scale)
        for tm in nl.affine_range(tiles_m):
            r0 = mb * block_m + tm * 128
            nl.store(out[r0:r0 + 128, :],
                     value=nisa.tensor_tensor(total[:, tm * cols:(tm + 1) * cols], scale,
                                              nl.multiply))
    return out
