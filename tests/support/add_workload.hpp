#pragma once

// A small workload shared by the tool integration tests: an element-wise add of two 128x512
// tensors, with a fast kernel (one full tile per input) and a slow one (64 narrow slices: many
// more, smaller DMAs) that compute the same thing.
namespace autocomp::testing {

inline constexpr const char* k_add_problem = R"(import numpy as np

def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((128, 512), dtype=np.float32),
            "b": rng.standard_normal((128, 512), dtype=np.float32)}

def reference(a, b):
    return a + b

SEEDS = [0, 1]
)";

inline constexpr const char* k_add_fast_kernel = R"(import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    nl.store(out, value=nl.add(x, y))
    return out
)";

inline constexpr const char* k_add_slow_kernel = R"(import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for j in nl.sequential_range(64):
        x = nl.load(a[:, j * 8:(j + 1) * 8])
        y = nl.load(b[:, j * 8:(j + 1) * 8])
        nl.store(out[:, j * 8:(j + 1) * 8], value=nl.add(x, y))
    return out
)";

}  // namespace autocomp::testing
