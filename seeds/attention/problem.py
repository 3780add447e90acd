"""Self-attention (single head, no mask): out = softmax(q.T @ k / sqrt(d)) @ v.

Shape as in Autocomp's published trn-tutorial attention: d_head 128, seq 4096, bf16 inputs
(q and k as [d_head, seq] so the contraction dim is on partitions, v as [seq, d_head]);
the output is fp32 [seq, d_head]. numpy has no bfloat16: inputs are float32 arrays holding
bf16-rounded values (INPUT_DTYPES); the reference computes in float32/float64 from them.
AUTOCOMP_SMALL=1 shrinks seq to 512.
Stress input (STRESS): every key shares one large component (k[0, :] = 4096), aligned with
each query's first component; row i's logits shift by 4096 * q[0, i] / sqrt(128), which
softmax ignores, but exp of them overflows (or underflows to 0) without the row-max
subtraction in most rows.
"""
import os

import numpy as np

SMALL = os.environ.get("AUTOCOMP_SMALL") == "1"
D, S = (128, 512) if SMALL else (128, 4096)
INPUT_DTYPES = {"q": "bfloat16", "k": "bfloat16", "v": "bfloat16"}
# Probabilities are rounded to bf16 before the second matmul, as on the device.
RTOL = 2e-2
ATOL = 2e-3
SEEDS = (0, 1)
KERNEL = "attention_kernel"


def _bf16(x):
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {
        "q": _bf16(rng.standard_normal((D, S), dtype=np.float32)),
        "k": _bf16(rng.standard_normal((D, S), dtype=np.float32)),
        "v": _bf16(rng.standard_normal((S, D), dtype=np.float32)),
    }


def reference(q, k, v):
    scores = (q.T.astype(np.float32) @ k.astype(np.float32)) * np.float32(1.0 / np.sqrt(D))
    scores -= scores.max(axis=1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=1, keepdims=True)
    return (p @ v.astype(np.float32)).astype(np.float32)


def _common_key(inputs):
    # every key's first component set to one large constant (a bf16 value): each query row's
    # logits shift by KEY_OFFSET * q[0, i] / sqrt(d), which softmax ignores
    k = inputs["k"].copy()
    k[0, :] = KEY_OFFSET
    return {"q": inputs["q"], "k": k, "v": inputs["v"]}


KEY_OFFSET = np.float32(4096.0)
STRESS = {"common_key": _common_key}
