"""Row softmax: out[i, :] = exp(x[i, :] - max_i) / sum(exp(x[i, :] - max_i)).

Shape: x [4096, 4096] fp32 (rows tiled by 128 as in the NKI softmax tutorial).
AUTOCOMP_SMALL=1 shrinks it to x [256, 1024].
Stress input (STRESS): every row shifted by its own constant of 80..200 in either direction;
softmax is shift-invariant, but exp(x) without the max subtraction overflows (or underflows
to 0) there.
"""
import os

import numpy as np

SMALL = os.environ.get("AUTOCOMP_SMALL") == "1"
ROWS, COLS = (256, 1024) if SMALL else (4096, 4096)
RTOL = 1e-4
ATOL = 1e-7
KERNEL = "softmax_kernel"


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": (rng.standard_normal((ROWS, COLS), dtype=np.float32) * 3.0)}


def reference(x):
    v = x.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def _shifted_rows(inputs):
    x = inputs["x"]
    rng = np.random.default_rng(x.view(np.uint32)[0, :4].tolist())
    rows = x.shape[0]
    shift = rng.uniform(80.0, 200.0, (rows, 1)) * rng.choice((-1.0, 1.0), (rows, 1))
    return {"x": (x + shift.astype(np.float32)).astype(np.float32)}


STRESS = {"shifted_rows": _shifted_rows}
