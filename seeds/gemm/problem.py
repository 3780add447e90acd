"""GEMM with the left operand pre-transposed: result[M, N] = lhsT[K, M].T @ rhs[K, N].

Shape as in Autocomp's published trn-tutorial GEMM: K=8192, M=4096, N=8192, bf16 inputs and
bf16 output, fp32 accumulation. Inputs are scaled by 1/sqrt(K) so outputs stay O(1).
numpy has no bfloat16: inputs are float32 arrays holding bf16-rounded values, declared in
INPUT_DTYPES; the reference computes in float32 from those values.
AUTOCOMP_SMALL=1 shrinks it to K=512, M=512, N=1024.
"""
import os

import numpy as np

SMALL = os.environ.get("AUTOCOMP_SMALL") == "1"
K, M, N = (512, 512, 1024) if SMALL else (8192, 4096, 8192)
INPUT_DTYPES = {"lhsT": "bfloat16", "rhs": "bfloat16"}
OUTPUT_DTYPES = ("bfloat16",)
RTOL = 2e-2
ATOL = 1e-2
# One seed by default: a full-shape reference is 0.55 TFLOP of float32 math.
SEEDS = (0,) if not SMALL else (0, 1)
KERNEL = "matmul_kernel"


def _bf16(x):
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def inputs(seed):
    rng = np.random.default_rng(seed)
    scale = np.float32(1.0 / np.sqrt(K))
    return {
        "lhsT": _bf16(rng.standard_normal((K, M), dtype=np.float32) * scale),
        "rhs": _bf16(rng.standard_normal((K, N), dtype=np.float32)),
    }


def reference(lhsT, rhs):
    return lhsT.T.astype(np.float32) @ rhs.astype(np.float32)
