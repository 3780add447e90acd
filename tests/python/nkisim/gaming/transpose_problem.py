"""Problem for the gaming transposes (gaming/transpose_strided.py, surfaces.py) and the
transpose seed's kernels at a reduced shape: out[a, c, b] = x[a, b, c], x [4, 512, 256] fp32."""
import numpy as np

RTOL = 0.0
ATOL = 0.0
KERNEL = "transpose_kernel"


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.random((4, 512, 256), dtype=np.float32)}


def reference(x):
    return np.ascontiguousarray(np.transpose(x, (0, 2, 1)))
