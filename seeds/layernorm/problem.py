"""LayerNorm over the last axis: out = (x - mean) / sqrt(var + eps) * gamma + beta.

Shape as in Autocomp's published trn-tutorial LayerNorm: x [4096, 8192] fp32, gamma and beta
[8192] fp32, eps 1e-5. AUTOCOMP_SMALL=1 shrinks it to x [256, 1024].
Stress input (STRESS): every row moved onto its own offset of 32..64 in either direction
(LayerNorm is shift-invariant): a variance taken as E[x^2] - E[x]^2 in fp32 loses about
offset^2 * 2^-24 to cancellation and misses the tolerance, while a centred variance stays
within it. Larger offsets would fail honest kernels on the fp32 rounding of the mean.
"""
import os

import numpy as np

SMALL = os.environ.get("AUTOCOMP_SMALL") == "1"
ROWS, COLS = (256, 1024) if SMALL else (4096, 8192)
EPS = 1e-5
RTOL = 1e-4
ATOL = 1e-4
KERNEL = "layernorm_kernel"


def inputs(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((ROWS, COLS), dtype=np.float32)
    x += rng.uniform(-1.0, 1.0, (ROWS, 1)).astype(np.float32)
    return {
        "input_tensor": x,
        "gamma": rng.uniform(0.5, 1.5, COLS).astype(np.float32),
        "beta": rng.uniform(-0.5, 0.5, COLS).astype(np.float32),
    }


def reference(input_tensor, gamma, beta):
    x = input_tensor.astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + EPS) * gamma.astype(np.float64) + beta.astype(np.float64)
    return y.astype(np.float32)


def _offset_rows(inputs):
    x = inputs["input_tensor"]
    rng = np.random.default_rng(x.view(np.uint32)[0, :4].tolist())
    rows = x.shape[0]
    offset = rng.uniform(32.0, 64.0, (rows, 1)) * rng.choice((-1.0, 1.0), (rows, 1))
    return dict(inputs, input_tensor=(x + offset.astype(np.float32)).astype(np.float32))


STRESS = {"offset_rows": _offset_rows}
