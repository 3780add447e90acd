"""NKI Library rope_hf (nkilib/core/embeddings/rope_hf.py): HuggingFace-layout rotary
embedding of q [1, 2, 128, 64] and k [1, 1, 128, 64] with cos/sin [1, 128, 64], written into
the output parameters q_out / k_out."""
import numpy as np

SEEDS = (0,)
KERNEL = "rope_hf"
RTOL = 1e-4
ATOL = 1e-4
B, HQ, HK, S, D = 1, 2, 1, 128, 64
OUTPUTS = {"q_out": ((B, HQ, S, D), "float32"), "k_out": ((B, HK, S, D), "float32")}


def inputs(seed):
    rng = np.random.default_rng(seed)
    ang = rng.uniform(-3, 3, (B, S, D // 2)).astype(np.float32)
    ang = np.concatenate([ang, ang], axis=-1)
    return {"q": rng.standard_normal((B, HQ, S, D), dtype=np.float32),
            "k": rng.standard_normal((B, HK, S, D), dtype=np.float32),
            "cos": np.cos(ang).astype(np.float32), "sin": np.sin(ang).astype(np.float32)}


def _rot(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def reference(q, k, cos, sin):
    c, s = cos[:, None], sin[:, None]
    return ((q * c + _rot(q) * s).astype(np.float32), (k * c + _rot(k) * s).astype(np.float32))
