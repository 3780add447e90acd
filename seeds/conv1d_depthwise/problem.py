"""Depthwise 1-D convolution (cross-correlation), filter width 3, zero padding 1 (width kept):
out[n, c, t] = w[c, 0] * x[n, c, t-1] + w[c, 1] * x[n, c, t] + w[c, 2] * x[n, c, t+1].

Shape as in Autocomp's published trn-advanced depthwise conv1d: N=8, C=512, W=2048 fp32
(its H=1 axis is dropped), filter [512, 3]. AUTOCOMP_SMALL=1 shrinks it to N=2, C=256, W=512.
"""
import os

import numpy as np

SMALL = os.environ.get("AUTOCOMP_SMALL") == "1"
N, C, W = (2, 256, 512) if SMALL else (8, 512, 2048)
RTOL = 1e-4
ATOL = 1e-5
KERNEL = "conv1d_depthwise_kernel"


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((N, C, W), dtype=np.float32),
        "w": rng.standard_normal((C, 3), dtype=np.float32),
    }


def reference(x, w):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1)))
    wd = w.astype(np.float64)
    out = (wd[None, :, 0:1] * xp[:, :, 0:-2] + wd[None, :, 1:2] * xp[:, :, 1:-1]
           + wd[None, :, 2:3] * xp[:, :, 2:])
    return out.astype(np.float32)
