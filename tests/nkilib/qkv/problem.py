"""NKI Library qkv (nkilib/core/qkv/qkv.py, the dispatcher to qkv_cte/qkv_tkg): fused QKV
projection of input [B=1, S=128, H=512] with weights [H, I=(2+2*1)*64=256], no norm, BSD
output [1, 128, 256], on two logical cores."""
import numpy as np

SEEDS = (0,)
KERNEL = "qkv"
TOLERANCE = "rel_l2"
REL_L2 = 1e-2  # the kernel multiplies in bfloat16
B, S, H, I = 1, 128, 512, 256


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((B, S, H), dtype=np.float32),
            "fused_qkv_weights": rng.standard_normal((H, I), dtype=np.float32) * 0.05}


def reference(input, fused_qkv_weights):
    return (input.astype(np.float64) @ fused_qkv_weights).astype(np.float32)


def call_kernel(kernel, input, fused_qkv_weights):
    return kernel[2](input, fused_qkv_weights)
