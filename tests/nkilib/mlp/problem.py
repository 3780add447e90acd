"""NKI Library mlp (nkilib/core/mlp/mlp.py, the MLP dispatcher): out = (silu(x @ Wg) *
(x @ Wu)) @ Wd for x [B=1, S=128, H=512], I=512. At library commit d2ad3a5 mlp.py does not
parse in Python (a library bug); the product reports that with the file and line."""
import numpy as np

SEEDS = (0,)
KERNEL = "mlp"
TOLERANCE = "rel_l2"
REL_L2 = 2e-2
B, S, H, I = 1, 128, 512, 512


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"hidden_tensor": rng.standard_normal((B, S, H), dtype=np.float32),
            "gate_proj_weights_tensor": rng.standard_normal((H, I), dtype=np.float32) * 0.05,
            "up_proj_weights_tensor": rng.standard_normal((H, I), dtype=np.float32) * 0.05,
            "down_proj_weights_tensor": rng.standard_normal((I, H), dtype=np.float32) * 0.05}


def reference(hidden_tensor, gate_proj_weights_tensor, up_proj_weights_tensor,
              down_proj_weights_tensor):
    x = hidden_tensor.astype(np.float64).reshape(B * S, H)
    g = x @ gate_proj_weights_tensor
    act = g / (1.0 + np.exp(-g)) * (x @ up_proj_weights_tensor)
    return (act @ down_proj_weights_tensor).reshape(B, S, H).astype(np.float32)
