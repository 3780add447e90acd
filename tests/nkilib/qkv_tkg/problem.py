"""NKI Library qkv_tkg (nkilib/core/qkv/qkv_tkg.py, token generation): fused QKV projection
of hidden [B=4, S=1, H=512] with qkv_w [H, I=256], no norm, BSD output [4, 1, 256], on two
logical cores."""
import numpy as np

SEEDS = (0,)
KERNEL = "qkv_tkg"
TOLERANCE = "rel_l2"
REL_L2 = 1e-2  # the kernel multiplies in bfloat16
B, S, H, I = 4, 1, 512, 256


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"hidden": rng.standard_normal((B, S, H), dtype=np.float32),
            "qkv_w": rng.standard_normal((H, I), dtype=np.float32) * 0.05}


def reference(hidden, qkv_w):
    return (hidden.astype(np.float64) @ qkv_w).astype(np.float32)


def call_kernel(kernel, hidden, qkv_w):
    from ..utils.common_types import NormType
    return kernel[2](hidden, qkv_w, norm_type=NormType.NO_NORM)
