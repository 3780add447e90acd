"""NKI Library cross_entropy_forward (nkilib/experimental/loss/cross_entropy.py): per-position
loss and log-sum-exp of logits [64, 2048] (fp32 compute), on two logical cores."""
import numpy as np

SEEDS = (0,)
KERNEL = "cross_entropy_forward"
RTOL = 1e-3
ATOL = 1e-3
N, V = 64, 2048


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"logits_hbm": rng.standard_normal((N, V), dtype=np.float32),
            "targets_hbm": rng.integers(0, V, (N,)).astype(np.int32)}


def reference(logits_hbm, targets_hbm):
    x = logits_hbm.astype(np.float64)
    m = x.max(axis=1)
    lse = m + np.log(np.exp(x - m[:, None]).sum(axis=1))
    loss = lse - x[np.arange(N), targets_hbm]
    return loss.astype(np.float32), lse.astype(np.float32)


def call_kernel(kernel, logits_hbm, targets_hbm):
    import nki.language as nl
    return kernel[2](logits_hbm, targets_hbm, positions_per_batch=16, chunk_size=2048,
                     dtype=nl.float32)
