"""NKI Library find_nonzero_indices (nkilib/core/subkernels/find_nonzero_indices.py): per column
of a [T=256, C=8] 0/1 matrix, the row indices of its nonzero elements, packed first (padding
as the kernel writes it: -1), output [C, T], and the count of nonzeros per column [C] (the
kernel's documented second output)."""
import numpy as np

SEEDS = (0,)
KERNEL = "find_nonzero_indices"
T, C = 256, 8
OUTPUT_DTYPES = ("int32", "int32")


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"input_tensor": (rng.random((T, C)) < 0.3).astype(np.float32)}


def reference(input_tensor):
    out = np.full((C, T), -1, np.int32)
    counts = np.zeros((C,), np.int32)
    for c in range(C):
        idx = np.nonzero(input_tensor[:, c])[0]
        out[c, :len(idx)] = idx
        counts[c] = len(idx)
    return out, counts
