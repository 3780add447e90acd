"""Probe problem: x, y [128, 1024] fp32, 32 dependent adds."""
import numpy as np

W, REPS = 1024, 32


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, W), dtype=np.float32),
            "y": rng.standard_normal((128, W), dtype=np.float32), "reps": REPS}


def reference(x, y, reps):
    a = x.copy()
    for _ in range(reps):
        a = a + y
    return a
