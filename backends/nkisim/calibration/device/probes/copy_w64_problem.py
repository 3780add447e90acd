"""Probe problem: x [128, 64] fp32, 256 repetitions."""
import numpy as np

W, REPS = 64, 256


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, W), dtype=np.float32), "reps": REPS}


def reference(x, reps):
    return x.copy()
