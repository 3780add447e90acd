"""Rotary position embedding (rotate-half form) on x laid out [head_dim, seq]:
    out[:h]  = x[:h] * cos - x[h:] * sin
    out[h:]  = x[h:] * cos + x[:h] * sin          (h = head_dim / 2)
Shape as in Autocomp's published trn-advanced RoPE: x [128, 4096] fp32, cos and sin
[64, 4096] fp32. AUTOCOMP_SMALL=1 shrinks seq to 2048.
Stress input (STRESS): cos and sin replaced by independent N(0, 1) tables, so the output
follows from the tables as given (a kernel that rebuilds them from positions, derives sin from
cos or relies on cos^2 + sin^2 = 1 is wrong there).
"""
import os

import numpy as np

SMALL = os.environ.get("AUTOCOMP_SMALL") == "1"
HEAD_DIM = 128
SEQ = 2048 if SMALL else 4096
RTOL = 1e-4
ATOL = 1e-5
KERNEL = "rope_kernel"


def inputs(seed):
    rng = np.random.default_rng(seed)
    half = HEAD_DIM // 2
    pos = np.arange(SEQ, dtype=np.float64)[None, :]
    freq = 10000.0 ** (-np.arange(half, dtype=np.float64)[:, None] / half)
    angle = pos * freq + rng.uniform(0, 0.1)
    return {
        "x": rng.standard_normal((HEAD_DIM, SEQ), dtype=np.float32),
        "cos": np.cos(angle).astype(np.float32),
        "sin": np.sin(angle).astype(np.float32),
    }


def reference(x, cos, sin):
    h = x.shape[0] // 2
    x1 = x[:h].astype(np.float64)
    x2 = x[h:].astype(np.float64)
    c = cos.astype(np.float64)
    s = sin.astype(np.float64)
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s]).astype(np.float32)


def _free_tables(inputs):
    rng = np.random.default_rng(inputs["x"].view(np.uint32)[0, :4].tolist())
    shape = inputs["cos"].shape
    return dict(inputs, cos=rng.standard_normal(shape, dtype=np.float32),
                sin=rng.standard_normal(shape, dtype=np.float32))


STRESS = {"free_tables": _free_tables}
