"""NKI Library moe_tkg (nkilib/core/moe/moe_tkg/moe_tkg.py, token generation): selected-expert
MoE for T=4 tokens, H=512, I=256, E=4 local experts, top K=2: out[t] = sum_k aff[t, e_k] *
(silu(x Wg_e) * (x Wu_e)) Wd_e, gate/up weights [E, H, 2, I], down [E, I, H]. Launched on two
logical cores."""
import numpy as np

SEEDS = (0,)
KERNEL = "moe_tkg"
TOLERANCE = "rel_l2"
REL_L2 = 2e-2  # the kernel multiplies in bfloat16
T, H, I, E, K = 4, 512, 256, 4, 2


def inputs(seed):
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.choice(E, K, replace=False) for _ in range(T)]).astype(np.int32)
    aff = np.zeros((T, E), np.float32)
    for t in range(T):
        aff[t, idx[t]] = rng.uniform(0.2, 0.8, K)
    return {"hidden_input": rng.standard_normal((T, H), dtype=np.float32),
            "expert_gate_up_weights": rng.standard_normal((E, H, 2, I), dtype=np.float32) * 0.05,
            "expert_down_weights": rng.standard_normal((E, I, H), dtype=np.float32) * 0.05,
            "expert_affinities": aff, "expert_index": idx}


def reference(hidden_input, expert_gate_up_weights, expert_down_weights, expert_affinities,
              expert_index):
    x = hidden_input.astype(np.float64)
    out = np.zeros((T, H))
    for t in range(T):
        for e in expert_index[t]:
            g = x[t] @ expert_gate_up_weights[e, :, 0, :]
            u = x[t] @ expert_gate_up_weights[e, :, 1, :]
            out[t] += expert_affinities[t, e] * ((g / (1 + np.exp(-g)) * u) @ expert_down_weights[e])
    return out.astype(np.float32)


def call_kernel(kernel, hidden_input, expert_gate_up_weights, expert_down_weights,
                expert_affinities, expert_index):
    from ...utils.common_types import ExpertAffinityScaleMode
    return kernel[2](hidden_input, expert_gate_up_weights, expert_down_weights,
                     expert_affinities, expert_index, False,
                     expert_affinities_scaling_mode=ExpertAffinityScaleMode.POST_SCALE)
