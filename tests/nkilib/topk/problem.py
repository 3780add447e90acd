"""NKI Library topk (nkilib/core/topk/rotational_topk.py, the rotational method): the k=8
largest logits and their indices per row of [B=1, S=4, V=2048], sorted, on two logical cores
(`lnc=2` as the entry point takes it)."""
import numpy as np

SEEDS = (0,)
KERNEL = "topk"
B, S, V, K = 1, 4, 2048, 8
OUTPUT_DTYPES = ("float32", "uint32")


def inputs(seed):
    rng = np.random.default_rng(seed)
    x = rng.permutation(B * S * V).astype(np.float32).reshape(B, S, V) / (B * S * V)
    return {"inp": x, "k": K, "lnc": 2}


def reference(inp, k, lnc):
    idx = np.argsort(-inp, axis=-1, kind="stable")[..., :k]
    return (np.take_along_axis(inp, idx, axis=-1).astype(np.float32), idx.astype(np.uint32))
