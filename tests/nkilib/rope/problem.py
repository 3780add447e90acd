"""NKI Library RoPE (nkilib/core/embeddings/rope.py): rotary embedding of x_in [d_head=64,
B=1, heads=2, S=128] with the contiguous (first half / second half) layout."""
import numpy as np

SEEDS = (0,)
KERNEL = "RoPE"
RTOL = 1e-4
ATOL = 1e-4


def inputs(seed):
    rng = np.random.default_rng(seed)
    d, b, h, s = 64, 1, 2, 128
    ang = rng.uniform(-3, 3, (d // 2, b, s)).astype(np.float32)
    return {"x_in": rng.standard_normal((d, b, h, s), dtype=np.float32),
            "cos": np.cos(ang).astype(np.float32), "sin": np.sin(ang).astype(np.float32)}


def reference(x_in, cos, sin):
    half = x_in.shape[0] // 2
    x1, x2 = x_in[:half], x_in[half:]          # [half, B, H, S]
    c, s = cos[:, :, None, :], sin[:, :, None, :]
    return np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=0).astype(np.float32)
