"""Probe problem: x [4096, 128] fp32, transposed in 32 blocks of [128, 128]."""
import numpy as np


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((4096, 128), dtype=np.float32)}


def reference(x):
    return np.ascontiguousarray(x.T)
