"""NKI Library depthwise_conv1d_implicit_gemm (nkilib/experimental/conv/depthwise_conv1d.py):
depthwise 1-D cross-correlation of img [N=1, C=128, 1, W=512] with filters [C, 1, 1, S=4],
no padding, stride 1: out [1, 128, 1, 509]."""
import numpy as np

SEEDS = (0,)
KERNEL = "depthwise_conv1d_implicit_gemm"
TOLERANCE = "rel_l2"
REL_L2 = 1e-4
N, C, W, S = 1, 128, 512, 4


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"img_ref": rng.standard_normal((N, C, 1, W), dtype=np.float32),
            "filter_ref": rng.standard_normal((C, 1, 1, S), dtype=np.float32),
            "feature_group_count": C}


def reference(img_ref, filter_ref, feature_group_count):
    q = W - S + 1
    out = np.zeros((N, C, 1, q))
    for s in range(S):
        out += img_ref[..., s:s + q].astype(np.float64) * filter_ref[None, :, 0, 0, s, None, None]
    return out.astype(np.float32)

