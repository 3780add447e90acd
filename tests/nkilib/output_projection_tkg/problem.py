"""NKI Library output_projection_tkg (nkilib/core/output_projection/output_projection_tkg.py):
out[b*s, h] = sum_{n, d} attention[d, b, n, s] * weight[n*D + d, h] + bias for token
generation, D=128, B=4, N=2, S=1, H=512, on two logical cores. The output is [B * S, H]
(the kernel's documented layout with TRANSPOSE_OUT=False)."""
import numpy as np

SEEDS = (0,)
KERNEL = "output_projection_tkg"
TOLERANCE = "rel_l2"
REL_L2 = 1e-3
D, B, N, S, H = 128, 4, 2, 1, 512


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"attention": rng.standard_normal((D, B, N, S), dtype=np.float32),
            "weight": rng.standard_normal((N * D, H), dtype=np.float32) * 0.1,
            "bias": rng.standard_normal((1, H), dtype=np.float32)}


def reference(attention, weight, bias):
    a = attention.astype(np.float64).transpose(1, 3, 2, 0).reshape(B * S, N * D)
    return (a @ weight + bias[0]).astype(np.float32)


def call_kernel(kernel, attention, weight, bias):
    return kernel[2](attention, weight, bias)
