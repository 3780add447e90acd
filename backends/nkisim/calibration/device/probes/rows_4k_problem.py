"""Probe problem: x [128, 16384] fp32 copied in blocks of 1024 columns (4096-byte rows)."""
import numpy as np

C, W = 16384, 1024


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, C), dtype=np.float32), "w": W}


def reference(x, w):
    return x.copy()
