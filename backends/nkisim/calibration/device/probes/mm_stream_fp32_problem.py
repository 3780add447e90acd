"""Probe problem: a [128, 128], b [128, 512] (float32), 32 matmuls."""
import numpy as np

N, REPS, DTYPE = 512, 32, "float32"
RTOL = 2e-2
ATOL = 1e-2


def _round(v):
    if DTYPE == "bfloat16":  # bf16 values held in float32 arrays
        u = v.astype(np.float32).view(np.uint32)
        return ((u + 0x8000) & 0xFFFF0000).view(np.float32)
    return v.astype(np.float32)


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"a": _round(rng.standard_normal((128, 128)) / 16),
            "b": _round(rng.standard_normal((128, N)) / 16), "reps": REPS}


INPUT_DTYPES = {"a": DTYPE, "b": DTYPE}


def reference(a, b, reps):
    return (reps * (a.astype(np.float64).T @ b.astype(np.float64))).astype(np.float32)
