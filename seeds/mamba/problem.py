"""Mamba selective scan (the NKI fused-Mamba tutorial's computation), per batch b, channel c,
time t and state n:
    h[n, t] = exp(delta[c, t] * A[c, n]) * h[n, t-1] + delta[c, t] * u[c, t] * B[n, t]
    out[c, t] = sum_n C[n, t] * h[n, t]          (h[n, -1] = 0)
Shape as in Autocomp's published trn-tutorial Mamba: batch 1, seq 2048, channels 256,
state 16, fp32. delta [b, c, seq], u [b, c, seq], A [c, state], B and C [b, state, seq].
AUTOCOMP_SMALL=1 shrinks seq to 512.
Stress inputs (STRESS): `long_memory` makes A 100x smaller (exp(delta * A) >= 0.998 per step),
so the state carries over the whole sequence and a scan that drops it between chunks is
wrong; `large_steps` draws delta from 0.5..4 (40x the drawn steps), so exp(delta * A) reaches
e^-8 (an exp approximated on the drawn range fails) and delta * u grows with it.
"""
import os

import numpy as np

SMALL = os.environ.get("AUTOCOMP_SMALL") == "1"
BATCH, CHANNELS, STATE = 1, 256, 16
SEQ = 512 if SMALL else 2048
RTOL = 1e-3
ATOL = 1e-4
KERNEL = "mamba_kernel"


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {
        "delta": rng.uniform(0.01, 0.1, (BATCH, CHANNELS, SEQ)).astype(np.float32),
        "u": rng.standard_normal((BATCH, CHANNELS, SEQ), dtype=np.float32),
        "A": -rng.uniform(0.5, 2.0, (CHANNELS, STATE)).astype(np.float32),
        "B": rng.standard_normal((BATCH, STATE, SEQ), dtype=np.float32),
        "C": rng.standard_normal((BATCH, STATE, SEQ), dtype=np.float32),
    }


def reference(delta, u, A, B, C):
    d = delta.astype(np.float64)
    dA = np.exp(d[:, :, None, :] * A.astype(np.float64)[None, :, :, None])   # b c n t
    dBu = (d * u)[:, :, None, :] * B.astype(np.float64)[:, None, :, :]      # b c n t
    h = np.zeros(dA.shape[:3])
    out = np.empty(delta.shape)
    Cd = C.astype(np.float64)
    for t in range(delta.shape[2]):
        h = dA[..., t] * h + dBu[..., t]
        out[:, :, t] = np.einsum("bcn,bn->bc", h, Cd[:, :, t])
    return out.astype(np.float32)


def _long_memory(inputs):
    return dict(inputs, A=(inputs["A"] * np.float32(0.01)).astype(np.float32))


def _large_steps(inputs):
    rng = np.random.default_rng(inputs["u"].view(np.uint32)[0, 0, :4].tolist())
    delta = rng.uniform(0.5, 4.0, inputs["delta"].shape).astype(np.float32)
    return dict(inputs, delta=delta)


STRESS = {"long_memory": _long_memory, "large_steps": _large_steps}
