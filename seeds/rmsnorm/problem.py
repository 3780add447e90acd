"""RMSNorm over the hidden (free) axis: out = a / sqrt(mean(a*a, axis=1)) * g.

Shape as in Autocomp's published trn-tutorial RMSNorm: a [512, 4096] fp32, g [4096] fp32.
AUTOCOMP_SMALL=1 shrinks it to a [256, 1024] for quick tests.
"""
import os

import numpy as np

SMALL = os.environ.get("AUTOCOMP_SMALL") == "1"
ROWS, HIDDEN = (256, 1024) if SMALL else (512, 4096)
RTOL = 1e-4
ATOL = 1e-5
KERNEL = "rmsnorm_kernel"


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {
        "a_tensor": rng.standard_normal((ROWS, HIDDEN), dtype=np.float32),
        "g_tensor": rng.uniform(0.5, 1.5, HIDDEN).astype(np.float32),
    }


def reference(a_tensor, g_tensor):
    a = a_tensor.astype(np.float64)
    rms = np.sqrt(np.mean(a * a, axis=1, keepdims=True))
    return (a / rms * g_tensor.astype(np.float64)).astype(np.float32)
