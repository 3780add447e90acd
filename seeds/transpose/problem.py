"""3-D transpose swapping the last two axes: out[a, c, b] = x[a, b, c] ((012) -> (021)).

Shape as in Autocomp's published trn-advanced transpose: x [512, 512, 512] fp32.
AUTOCOMP_SMALL=1 shrinks it to x [4, 512, 256].
"""
import os

import numpy as np

SMALL = os.environ.get("AUTOCOMP_SMALL") == "1"
A, B, C = (4, 512, 256) if SMALL else (512, 512, 512)
RTOL = 0.0
ATOL = 0.0
KERNEL = "transpose_kernel"


def inputs(seed):
    rng = np.random.default_rng(seed)
    # uniform values: any distinct values check a transpose, and they are 5x cheaper to draw
    return {"x": rng.random((A, B, C), dtype=np.float32)}


def reference(x):
    return np.ascontiguousarray(np.transpose(x, (0, 2, 1)))
