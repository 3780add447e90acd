"""NKI Library cumsum (nkilib/core/cumsum/cumsum.py): cumulative sum over the last axis of a
[256, 1024] float32 tensor (two partition tiles)."""
import numpy as np

SEEDS = (0,)
KERNEL = "cumsum"
RTOL = 1e-4
ATOL = 1e-3


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((256, 1024), dtype=np.float32)}


def reference(x):
    return np.cumsum(x.astype(np.float64), axis=-1).astype(np.float32)
