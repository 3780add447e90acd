"""NKI Library mlp_tkg (nkilib/core/mlp/mlp_tkg/mlp_tkg.py, token generation, a sub-kernel
writing its output): out = (silu(x @ Wg) * (x @ Wu)) @ Wd for x [B=4, S=1, H=512], I=512, no
norm. MLPParameters (the library's config object) is built where the kernel runs, launched on
two logical cores. The SBUF manager is built here as the library's own caller (core/mlp/mlp.py)
builds it: at library commit d2ad3a5 mlp_tkg's default (`sbm=None`) path names SbufManager and
Logger without importing them (a library bug: NameError)."""
import numpy as np

SEEDS = (0,)
KERNEL = "mlp_tkg"
TOLERANCE = "rel_l2"
REL_L2 = 2e-2  # the kernel multiplies in bfloat16
B, S, H, I = 4, 1, 512, 512
OUTPUTS = {"output_tensor_hbm": ((B, S, H), "float32")}


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"hidden": rng.standard_normal((B, S, H), dtype=np.float32),
            "gate_w": rng.standard_normal((H, I), dtype=np.float32) * 0.05,
            "up_w": rng.standard_normal((H, I), dtype=np.float32) * 0.05,
            "down_w": rng.standard_normal((I, H), dtype=np.float32) * 0.05}


def reference(hidden, gate_w, up_w, down_w):
    x = hidden.astype(np.float64).reshape(B * S, H)
    g = x @ gate_w
    act = g / (1.0 + np.exp(-g)) * (x @ up_w)
    return (act @ down_w).reshape(B, S, H).astype(np.float32)


def call_kernel(kernel, hidden, gate_w, up_w, down_w, output_tensor_hbm):
    from ..mlp_parameters import MLPParameters
    from ...utils.common_types import ActFnType
    from ...utils.allocator import SbufManager
    from ...utils.logging import Logger
    params = MLPParameters(hidden_tensor=hidden, gate_proj_weights_tensor=gate_w,
                           up_proj_weights_tensor=up_w, down_proj_weights_tensor=down_w,
                           activation_fn=ActFnType.SiLU)
    sbm = SbufManager(0, 200 * 1024, Logger("mlp"))
    sbm.set_name_prefix("mlp_")
    return kernel[2](params, output_tensor_hbm, None, sbm=sbm)
