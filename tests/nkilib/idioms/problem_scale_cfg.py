"""idiomlib scale_cfg: out = 0.5 * x with a config object and an Enum built where the kernel
runs, launched on two logical cores."""
import numpy as np

SEEDS = (0,)
KERNEL = "scale_cfg"


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((128, 512), dtype=np.float32)}


def reference(x):
    return 0.5 * x


def call_kernel(kernel, x):
    from ..utils.config import ScaleConfig, ScaleMode  # relative to the kernel file
    return kernel[2](x, ScaleConfig(mode=ScaleMode.HALVE))
