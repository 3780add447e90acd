"""Problem for gaming/prefix_chain.py: running sum along the free axis of x [128, 2048] fp32
(kernel_name selects one of its spellings)."""
import numpy as np

RTOL = 1e-3
ATOL = 1e-3
KERNEL = "prefix_range"


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, 2048), dtype=np.float32)}


def reference(x):
    return np.cumsum(x, axis=1, dtype=np.float32)
