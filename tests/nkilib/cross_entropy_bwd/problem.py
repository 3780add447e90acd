"""NKI Library cross_entropy_backward (nkilib/experimental/loss/cross_entropy.py): gradient of
the mean cross entropy w.r.t. logits [64, 2048] from the saved log-sum-exp, two logical cores."""
import numpy as np

SEEDS = (0,)
KERNEL = "cross_entropy_backward"
RTOL = 1e-3
ATOL = 1e-5
N, V = 64, 2048


def inputs(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, V), dtype=np.float32)
    m = x.astype(np.float64).max(axis=1)
    lse = m + np.log(np.exp(x - m[:, None]).sum(axis=1))
    return {"logits_hbm": x, "targets_hbm": rng.integers(0, V, (N,)).astype(np.int32),
            "lse_state_hbm": lse.astype(np.float32)}


def reference(logits_hbm, targets_hbm, lse_state_hbm):
    p = np.exp(logits_hbm.astype(np.float64) - lse_state_hbm[:, None])
    p[np.arange(N), targets_hbm] -= 1.0
    return (p / N).astype(np.float32)


def call_kernel(kernel, logits_hbm, targets_hbm, lse_state_hbm):
    import nki.language as nl
    return kernel[2](logits_hbm, targets_hbm, lse_state_hbm, reduction="mean",
                     positions_per_batch=16, chunk_size=2048, dtype=nl.float32, inplace=False)
