"""idiomlib scale: out = 2 * x, x float32 [128, 512] (the kernel's defaults)."""
import numpy as np

SEEDS = (0,)
KERNEL = "scale"


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, 512), dtype=np.float32)}


def reference(x):
    return 2.0 * x
