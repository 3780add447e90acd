"""NKI Library cascaded_max (nkilib/core/max/cascaded_max.py): max and argmax over the
vocabulary of logits [B*S=4, V=4096], launched on two logical cores as the library runs it. The indices are uint32, the kernel's
documented index dtype (CascadedMaxConfig.index_dtype = nl.uint32)."""
import numpy as np

SEEDS = (0,)
KERNEL = "cascaded_max"
OUTPUT_DTYPES = ("float32", "uint32")


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"input_tensor": rng.standard_normal((4, 4096), dtype=np.float32)}


def reference(input_tensor):
    idx = np.argmax(input_tensor, axis=-1)[:, None]
    return (np.max(input_tensor, axis=-1, keepdims=True).astype(np.float32),
            idx.astype(np.uint32))


def call_kernel(kernel, input_tensor):
    return kernel[2](input_tensor)
