"""Probe problem: x [128, 8192] fp32 copied in blocks of 128 columns (512-byte rows)."""
import numpy as np

C, W = 8192, 128


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, C), dtype=np.float32), "w": W}


def reference(x, w):
    return x.copy()
