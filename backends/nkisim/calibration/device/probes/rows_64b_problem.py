"""Probe problem: x [128, 2048] fp32 copied in blocks of 16 columns (64-byte rows)."""
import numpy as np

C, W = 2048, 16


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, C), dtype=np.float32), "w": W}


def reference(x, w):
    return x.copy()
