"""NKI Library output_projection_cte (nkilib/core/output_projection/output_projection_cte/):
out[b, s, h] = sum_{n, d} attention[b, n, d, s] * weight[n*D + d, h] + bias, with B=1, N=2,
D=64, S=512, H=512, on two logical cores."""
import numpy as np

SEEDS = (0,)
KERNEL = "output_projection_cte"
TOLERANCE = "rel_l2"
REL_L2 = 1e-3
B, N, D, S, H = 1, 2, 64, 512, 512


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"attention": rng.standard_normal((B, N, D, S), dtype=np.float32),
            "weight": rng.standard_normal((N * D, H), dtype=np.float32) * 0.1,
            "bias": rng.standard_normal((1, H), dtype=np.float32)}


def reference(attention, weight, bias):
    a = attention.astype(np.float64).transpose(0, 3, 1, 2).reshape(B, S, N * D)
    return (a @ weight + bias[0]).astype(np.float32)


def call_kernel(kernel, attention, weight, bias):
    return kernel[2](attention, weight, bias)
