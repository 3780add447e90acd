"""Probe problem: x [128, 128] fp32, 256 repetitions."""
import numpy as np

W, REPS = 128, 256


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, W), dtype=np.float32), "reps": REPS}


def reference(x, reps):
    return x.copy()
