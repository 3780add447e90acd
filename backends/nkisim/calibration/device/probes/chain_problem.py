"""Probe problem: x [128, 4] fp32, 64 dependent round trips."""
import numpy as np

REPS = 64


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, 4), dtype=np.float32), "reps": REPS}


def reference(x, reps):
    return x.copy()
