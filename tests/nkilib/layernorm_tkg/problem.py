"""NKI Library layernorm_tkg (nkilib/core/subkernels/layernorm_tkg.py, a sub-kernel called with its
output): LayerNorm (no beta) of hidden [B=1, S=4, H=1024] with gamma [1, H]; the output is laid out
[128, B*S, H/128] (one logical core)."""
import numpy as np

SEEDS = (0,)
KERNEL = "layernorm_tkg"
RTOL = 2e-3
ATOL = 2e-3
B, S, H = 1, 4, 1024
OUTPUTS = {"output": ((128, B * S, H // 128), "float32")}


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((B, S, H), dtype=np.float32),
            "gamma": rng.standard_normal((1, H), dtype=np.float32)}


def reference(input, gamma):
    x = input.astype(np.float64).reshape(B * S, H)
    c = x - x.mean(axis=-1, keepdims=True)
    y = c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + 1e-6) * gamma[0]
    return y.reshape(B * S, 128, H // 128).transpose(1, 0, 2).astype(np.float32)
