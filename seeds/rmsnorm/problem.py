"""RMSNorm over the hidden (free) axis: out = a / sqrt(mean(a*a, axis=1)) * g.

Shape as in Autocomp's published trn-tutorial RMSNorm: a [512, 4096] fp32, g [4096] fp32.
AUTOCOMP_SMALL=1 shrinks it to a [256, 1024] for quick tests.
Stress input (STRESS): every row scaled by its own factor of 1e-3..1e3 (RMSNorm is
scale-invariant per row): an epsilon added under the square root, or a sum of squares kept
in a narrow type, shows there.
"""
import os

import numpy as np

SMALL = os.environ.get("AUTOCOMP_SMALL") == "1"
ROWS, HIDDEN = (256, 1024) if SMALL else (512, 4096)
RTOL = 1e-4
ATOL = 1e-5
KERNEL = "rmsnorm_kernel"


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {
        "a_tensor": rng.standard_normal((ROWS, HIDDEN), dtype=np.float32),
        "g_tensor": rng.uniform(0.5, 1.5, HIDDEN).astype(np.float32),
    }


def reference(a_tensor, g_tensor):
    a = a_tensor.astype(np.float64)
    rms = np.sqrt(np.mean(a * a, axis=1, keepdims=True))
    return (a / rms * g_tensor.astype(np.float64)).astype(np.float32)


def _scaled_rows(inputs):
    a = inputs["a_tensor"]
    rng = np.random.default_rng(a.view(np.uint32)[0, :4].tolist())
    scale = 10.0 ** rng.uniform(-3.0, 3.0, (a.shape[0], 1))
    return dict(inputs, a_tensor=(a * scale).astype(np.float32))


STRESS = {"scaled_rows": _scaled_rows}
