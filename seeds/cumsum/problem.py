"""Inclusive prefix sum along the last axis: out[i, j] = sum(x[i, :j+1]).

Shape: x [4096, 4096] fp32 (the issue's size; Autocomp's trn-advanced cumsum used 2048x2048).
AUTOCOMP_SMALL=1 shrinks it to x [256, 1024].
"""
import os

import numpy as np

SMALL = os.environ.get("AUTOCOMP_SMALL") == "1"
ROWS, COLS = (256, 1024) if SMALL else (4096, 4096)
# fp32 running sums over thousands of signed terms: rounding grows with the prefix length.
RTOL = 1e-4
ATOL = 2e-3
KERNEL = "cumsum_kernel"


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((ROWS, COLS), dtype=np.float32)}


def reference(x):
    return np.cumsum(x.astype(np.float64), axis=1).astype(np.float32)
