"""Probe problem: x [128, 32768] fp32 copied in blocks of 8192 columns (32768-byte rows)."""
import numpy as np

C, W = 32768, 8192


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, C), dtype=np.float32), "w": W}


def reference(x, w):
    return x.copy()
