"""Effect probe problem: x [128, 512] fp32 loaded in each of 16 iterations, 64 tiles of y
(2 KiB per partition each, 128 KiB in all) loaded again between two loads of x."""
import numpy as np

REPS, GAP = 16, 64


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, 512), dtype=np.float32),
            "y": rng.standard_normal((GAP * 128, 512), dtype=np.float32),
            "reps": REPS, "gap": GAP}


def reference(x, y, reps, gap):
    return np.tile(y, (reps, 1)) + np.tile(x, (reps * gap, 1))
