"""Simulator speed benchmark: wall time and simulated instructions per second for a GEMM
(M=4096, K=8192, N=8192, bf16) and an RMSNorm (4096 x 512) kernel at full shape.

    /usr/bin/python3 backends/nkisim/bench_sim.py [--target trn2] [--numerics]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import nkisim  # noqa: E402

nkisim.activate()

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402


@nki.jit
def gemm_kernel(lhsT, rhs):
    """result[M, N] = lhsT.T @ rhs; lhsT is [K, M], rhs is [K, N]. Each 128-row M tile keeps
    its whole K panel of lhsT in SBUF; rhs is streamed in [128, 512] tiles."""
    K, M = lhsT.shape
    _, N = rhs.shape
    TK, TM, TN = 128, 128, 512
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        lhsT_tiles = nl.ndarray((K // TK, nl.par_dim(TK), TM), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // TK):
            lhsT_tiles[k] = nl.load(lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
        for n in nl.affine_range(N // TN):
            acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                rhs_tile = nl.load(rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                acc += nisa.nc_matmul(lhsT_tiles[k], rhs_tile)
            out_tile = nl.copy(acc, dtype=result.dtype)
            nl.store(result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], value=out_tile)
    return result


@nki.jit
def rmsnorm_kernel(a_tensor, g_tensor):
    """out = a * rsqrt(mean(a^2, axis=1) + eps) * g, rows tiled by 128."""
    out = nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    rows, cols = a_tensor.shape
    ix = nl.arange(128)[:, None]
    iy = nl.arange(cols)[None, :]
    g_tile = nl.load(g_tensor.reshape((1, cols))[nl.arange(1)[:, None], iy])
    g_bcast = g_tile.broadcast_to((128, cols))
    for i in nl.affine_range(rows // 128):
        a_tile = nl.load(a_tensor[i * 128 + ix, iy])
        sq = nl.square(a_tile)
        ssum = nl.sum(sq, axis=[1], keepdims=True)
        inv = nl.rsqrt(ssum * (1.0 / cols) + 1e-6)
        # a [P, 1] operand scales each row: tensor_scalar (the nki namespace does not
        # broadcast binary operands)
        y = nisa.tensor_scalar(a_tile, nl.multiply, inv)
        y = nl.multiply(y, g_bcast)
        nl.store(out[i * 128 + ix, iy], value=y)
    return out


def run(name, kernel, inputs, target, numerics, input_dtypes=None):
    t0 = time.perf_counter()
    c0 = time.process_time()
    res = nkisim.simulate(kernel, inputs, target=target, numerics=numerics,
                          input_dtypes=input_dtypes)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    print("%-8s numerics=%-5s wall %.3f s (cpu %.3f s)  instructions %d  (%.0f instr/s wall, "
          "%.1f us cpu/instr)  simulated latency %.1f us  bottleneck %s  mfu %.1f%%"
          % (name, numerics, wall, cpu, res.instructions, res.instructions / wall,
             1e6 * cpu / max(1, res.instructions), res.latency_us, res.bottleneck,
             res.metrics["mfu_estimated_percent"]))
    return res, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="trn2")
    ap.add_argument("--numerics", action="store_true",
                    help="also run GEMM with numerics (slow: 550 GFLOP on the CPU)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4096, 512), dtype=np.float32)
    g = rng.standard_normal((512,), dtype=np.float32)
    res, _ = run("rmsnorm", rmsnorm_kernel, {"a_tensor": a, "g_tensor": g}, args.target, True)
    ref = a / np.sqrt((a * a).mean(axis=1, keepdims=True) + 1e-6) * g
    print("rmsnorm max abs err vs numpy: %.3g" % np.abs(res.outputs[0] - ref).max())
    run("rmsnorm", rmsnorm_kernel, {"a_tensor": a, "g_tensor": g}, args.target, False)
    M, K, N = 4096, 8192, 8192
    bf16 = {"lhsT": "bfloat16", "rhs": "bfloat16"}
    lhsT = np.zeros((K, M), dtype=np.float32)
    rhs = np.zeros((K, N), dtype=np.float32)
    run("gemm", gemm_kernel, {"lhsT": lhsT, "rhs": rhs}, args.target, False, bf16)
    if args.numerics:
        lhsT = nkisim.to_bf16(rng.standard_normal((K, M), dtype=np.float32))
        rhs = nkisim.to_bf16(rng.standard_normal((K, N), dtype=np.float32))
        run("gemm", gemm_kernel, {"lhsT": lhsT, "rhs": rhs}, args.target, True, bf16)


if __name__ == "__main__":
    main()
