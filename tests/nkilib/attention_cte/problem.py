"""NKI Library attention_cte (nkilib/core/attention/attention_cte.py): causal softmax(q k^T) v
for one head, q/k/v [1, 512, 128] (tp_q=True, tp_k=True layouts), on two logical cores."""
import numpy as np

SEEDS = (0,)
KERNEL = "attention_cte"
TOLERANCE = "rel_l2"
REL_L2 = 2e-2
BS, S, D = 1, 512, 128


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"q": rng.standard_normal((BS, S, D), dtype=np.float32) * 0.1,
            "k": rng.standard_normal((BS, S, D), dtype=np.float32) * 0.1,
            "v": rng.standard_normal((BS, S, D), dtype=np.float32)}


def reference(q, k, v):
    s = np.einsum("bqd,bkd->bqk", q.astype(np.float64), k.astype(np.float64))
    s = np.where(np.tril(np.ones((S, S), bool))[None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bqk,bkd->bqd", p, v).astype(np.float32)


def call_kernel(kernel, q, k, v):
    return kernel[2](q, k, v, scale=1.0, causal_mask=True, tp_q=True, tp_k=True, tp_out=False)
