"""NKI Library router_topk (nkilib/core/router_topk/router_topk.py, a sub-kernel writing its
outputs): MoE router for T=128 tokens, H=512, E=8 experts, top k=2: logits = x @ w + b,
softmax affinities, and the top-2 expert indices. x is [T, H] in HBM (x_hbm_layout=1)."""
import numpy as np

SEEDS = (0,)
KERNEL = "router_topk"
RTOL = 2e-3
ATOL = 2e-3
T, H, E, K = 128, 512, 8, 2
OUTPUTS = {"router_logits": ((T, E), "float32"), "expert_affinities": ((T, E), "float32"),
           "expert_index": ((T, K), "uint32")}


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((T, H), dtype=np.float32) * 0.1,
            "w": rng.standard_normal((H, E), dtype=np.float32) * 0.1,
            "w_bias": rng.standard_normal((1, E), dtype=np.float32) * 0.1}


def reference(x, w, w_bias):
    logits = x.astype(np.float64) @ w + w_bias[0]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    idx = np.argsort(-p, axis=1, kind="stable")[:, :K]
    return logits.astype(np.float32), p.astype(np.float32), idx.astype(np.uint32)


def call_kernel(kernel, x, w, w_bias, router_logits, expert_affinities, expert_index):
    from ..utils.common_types import RouterActFnType
    kernel[2](x, w, w_bias, router_logits, expert_affinities, expert_index,
           act_fn=RouterActFnType.SOFTMAX, k=2, x_hbm_layout=1, x_sb_layout=0,
              shard_on_tokens=True)
