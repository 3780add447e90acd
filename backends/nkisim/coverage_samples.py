"""Run every kernel function of an aws-neuron/nki-samples checkout on nkisim and print a table.

    /usr/bin/python3 backends/nkisim/coverage_samples.py PATH [PATH ...] [--only TEXT] [-v]

PATH is a checkout (or several, e.g. older revisions that still hold removed kernels). A kernel
is a top-level function decorated with an NKI decorator (`nki.jit`, `nki.baremetal`, ...,
`trace`) that is neither a `mode='trace'` helper nor private (`_name`): helpers take on-chip
tiles and run only inside another kernel. Each kernel is bound to small inputs by the table
`BINDINGS` below (arguments only: shapes, dtypes, scalars, output parameters; the kernel
source is never edited) and run through `nkisim.simulate` with numerics on (target trn2 unless
the binding names one: the MX kernels run on trn3). A kernel with no binding is reported as
such and counted as not running. Host-only libraries a sample file imports at its top (torch,
scipy, jax: `HOST_LIBRARIES`) resolve to inert stubs when they are not installed, since kernels
never call them.

Output: one line per kernel, `ok` or `FAIL` with the first error, then `N of M run`.
Exit status 0 (the table is the result).
"""
import argparse
import ast
import importlib.abc
import importlib.machinery
import os
import sys
import time
import traceback
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nkisim  # noqa: E402

_DECORATORS = {"jit", "baremetal", "benchmark", "profile", "trace"}
_SKIP_DIRS = {"test", "tests", "doc", "docs", ".github", ".git", "build"}


class T:
    """An input array: shape and dtype name ('bfloat16', 'float8_e4m3' are rounded)."""

    def __init__(self, *shape, dtype="float32", low=-1.0, high=1.0, ints=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.low = low
        self.high = high
        self.ints = ints

    def make(self, rng):
        if self.ints is not None:
            return rng.integers(0, self.ints, size=self.shape).astype(self.dtype)
        a = rng.uniform(self.low, self.high, size=self.shape).astype(np.float32)
        if self.dtype in ("float32", "bfloat16", "float8_e4m3", "float8_e5m2"):
            return a
        return a.astype(self.dtype)


class Out(T):
    """An output parameter: an array the kernel writes (allocated by the caller)."""

    def make(self, rng):
        return np.zeros(self.shape, dtype=np.float32 if self.dtype in (
            "bfloat16", "float8_e4m3") else self.dtype)


GRID = "__grid__"  # a binding key: the SPMD launch grid
# a binding key: (n, rank -> {parameter: value}): run n ranks with nkisim.simulate_ranks, rank
# r on the binding updated by the rank's own arguments (collective kernels)
RANKS = "__ranks__"
# a binding key: the target to simulate (default trn2; the MX kernels need trn3)
TARGET = "__target__"


def _nl(name):
    """A value of `nki.language` (dtype tokens and the like), looked up after activation."""
    return ("nl", name)


# "relative/path.py::function" -> {parameter: value}; T/Out are arrays, anything else is
# passed as is. Shapes are the smallest that satisfy each kernel's own asserts.
BINDINGS = {
    # ---- tutorials ----
    "tensor_addition/tensor_addition_nki_kernels.py::nki_tensor_add_kernel_":
        {"a_input": T(256, 1024), "b_input": T(256, 1024)},
    "tensor_addition/spmd_tensor_addition_nki_kernels.py::nki_tensor_add_kernel_":
        {"a_input": T(256, 1024), "b_input": T(256, 1024)},
    "transpose2d/transpose2d_nki_kernels.py::tensor_transpose2D_kernel_":
        {"in_tensor": T(32, 64), "shape2D": (8, 8)},
    "average_pool2d/average_pool2d_nki_kernels.py::tensor_avgpool_kernel":
        {"in_tensor": T(4, 16, 16), "pool_size": 2},
    "matrix_multiplication/matrix_multiplication_nki_kernels.py::nki_matmul_basic_":
        {"lhsT": T(128, 64), "rhs": T(128, 512)},
    "matrix_multiplication/matrix_multiplication_nki_kernels.py::nki_matmul_tiled_":
        {"lhsT": T(256, 256), "rhs": T(256, 1024)},
    "matrix_multiplication/matrix_multiplication_nki_kernels.py::nki_matmul_hoist_load_":
        {"lhsT": T(256, 256), "rhs": T(256, 1024)},
    "matrix_multiplication/matrix_multiplication_nki_kernels.py::"
    "nki_matmul_block_free_dimension_":
        {"lhsT": T(256, 512), "rhs": T(256, 2048)},
    "matrix_multiplication/matrix_multiplication_nki_kernels.py::nki_matmul_fully_optimized_":
        {"lhsT": T(256, 512), "rhs": T(256, 1024), "TILES_IN_BLOCK_M": 2,
         "TILES_IN_BLOCK_N": 2, "TILES_IN_BLOCK_K": 2},
    "fused_mamba/mamba_nki_kernels.py::mamba_v1":
        {"delta": T(1, 256, 512), "u": T(1, 256, 512), "A": T(256, 16),
         "B": T(1, 16, 512), "C": T(1, 16, 512)},
    "fused_mamba/mamba_nki_kernels.py::mamba_v2":
        {"delta": T(1, 256, 512), "u": T(1, 256, 512), "A": T(256, 16),
         "B": T(1, 16, 512), "C": T(1, 16, 512)},
    "fused_mamba/mamba_nki_kernels.py::mamba_v3":
        {"delta": T(1, 256, 2048), "u": T(1, 256, 2048), "A": T(256, 16),
         "B": T(1, 16, 2048), "C": T(1, 16, 2048)},
    "layernorm/layernorm_nki_kernel.py::nki_layernorm_kernel_v1":
        {"input_tensor": T(256, 512), "epsilon": 1e-5, "gamma_vector": T(512),
         "beta_vector": T(512)},
    "layernorm/layernorm_nki_kernel.py::nki_layernorm_kernel_v2":
        {"input_tensor": T(256, 512), "epsilon": 1e-5, "gamma_vector": T(512),
         "beta_vector": T(512)},
    "rmsnorm/rmsnorm_nki_kernels.py::nki_rmsnorm_kernel":
        {"a_tensor": T(256, 512), "g_tensor": T(512)},
    "softmax/softmax_nki_kernels.py::nki_softmax_kernel": {"a_tensor": T(128, 512)},
    "rotary/rotary_nki_kernels.py::nki_apply_rotary_embedding":  # (batch, heads, seq, dim)
        {"q": T(1, 2, 256, 64), "k": T(1, 2, 256, 64), "cos": T(1, 256, 64),
         "sin": T(1, 256, 64), GRID: (1, 2)},
    "sd_attention/sd_attention_nki_kernels.py::fused_self_attn_for_SD_small_head_size":
        {"q_ref": T(1024, 64, dtype="bfloat16"), "k_ref": T(1024, 64, dtype="bfloat16"),
         "v_ref": T(1024, 64, dtype="bfloat16")},
    # MX (microscaling) matmul: trn3 (NeuronCore-v4) instructions and dtypes; shapes as in
    # the tutorial's driver (M, K, N = 128, 128, 512; packed x4 data, one e8m0 scale per 32
    # elements)
    "mxfp-matmul/mx_kernels.py::kernel_offline_quantized_mx_matmul":
        {"stationary_mx_data": T(128, 512, ints=255, dtype="uint8"),
         "stationary_mx_scale": T(16, 128, ints=255, dtype="uint8"),
         "moving_mx_data": T(128, 2048, ints=255, dtype="uint8"),
         "moving_mx_scale": T(16, 512, ints=255, dtype="uint8"),
         "mx_dtype": _nl("float8_e5m2_x4"), TARGET: "trn3"},
    "mxfp-matmul/mx_kernels.py::kernel_on_device_quantize_matmul_mx":
        {"stationary_mx_data": T(128, 512, ints=255, dtype="uint8"),
         "stationary_mx_scale": T(16, 128, ints=255, dtype="uint8"),
         "moving_data_bf16": T(128, 2048, dtype="bfloat16"),
         "stationary_mx_dtype": _nl("float8_e5m2_x4"), "moving_mx_dtype": _nl("float8_e5m2_x4"),
         TARGET: "trn3"},
    "mxfp-matmul/mx_kernels.py::kernel_copy_strided_quantize_matmul_mx":
        {"stationary_hbm": T(512, 128, dtype="bfloat16"),
         "moving_hbm": T(512, 512, dtype="bfloat16"), "mx_dtype": _nl("float8_e5m2_x4"),
         TARGET: "trn3"},
    # ---- reference ----
    "reference/tutorial.py::add_kernel_nx8x128x512":
        {"a_ptr": T(2, 8, 128, 512), "b_ptr": T(2, 8, 128, 512),
         "n_elements": 2 * 8 * 128 * 512, GRID: (2,)},
    "reference/attention.py::flash_fwd":  # seqlen_k a multiple of 2048
        {"q": T(1, 1, 128, 2048, dtype="bfloat16"), "k": T(1, 1, 128, 2048, dtype="bfloat16"),
         "v": T(1, 1, 2048, 128, dtype="bfloat16"), "seed": None, GRID: (1, 1)},
    "reference/attention.py::flash_attn_bwd":
        {"q_ref": T(1, 1, 128, 512, dtype="bfloat16"),
         "k_ref": T(1, 1, 128, 512, dtype="bfloat16"),
         "v_ref": T(1, 1, 128, 512, dtype="bfloat16"),
         "o_ref": T(1, 1, 128, 512, dtype="bfloat16"),
         "dy_ref": T(1, 1, 128, 512, dtype="bfloat16"),
         "lse_ref": T(1, 1, 128, 4), "seed_ref": T(1, ints=100, dtype="int32"),
         GRID: (1, 1)},
    "reference/attention.py::fused_self_attn_for_SD_small_head_size":
        {"q_ref": T(1, 64, 1024, dtype="bfloat16"), "k_ref": T(1, 1024, 64, dtype="bfloat16"),
         "v_ref": T(1, 1024, 64, dtype="bfloat16")},
    "reference/allocated_attention.py::allocated_fused_self_attn_for_SD_small_head_size":
        {"q_ref": T(1, 128, 1024, dtype="bfloat16"), "k_ref": T(1, 128, 1024, dtype="bfloat16"),
         "v_ref": T(1, 1024, 128, dtype="bfloat16")},
    "reference/allocated_fused_linear.py::allocated_fused_rms_norm_qkv":
        {"hidden": T(1, 128, 1024), "weights": T(1024, 256)},
    "reference/vision.py::select_and_scatter_kernel":
        {"operand_tensor": T(2, 64, 32, 32), "source_tensor": T(2, 64, 16, 16)},
    "reference/vision.py::resize_nearest_fixed_dma_kernel":
        {"data_tensor": T(1, 16, 16, 8), "out_shape": (1, 32, 32, 8)},
    "reference/vision.py::adaptive_avg_pool2d_kernel":
        {"in_tensor": T(2, 8, 16, 16), "output_size": (4, 4)},
    "reference/double_row_matmul.py::quantized_double_row_matmul":
        {"lhs": T(256, 512), "rhs_quantized": T(256, 2048, dtype="float8_e4m3"),
         "rhs_scale": T(128, 1024), "TILES_IN_BLOCK_M": 2, "TILES_IN_BLOCK_N": 2,
         "TILES_IN_BLOCK_K": 2},
    "reference/rmsnorm_quant/rmsnorm_quant.py::rmsnorm_quant_kernel":
        {"hidden": T(1, 128, 512, dtype="bfloat16"), "ln_w": T(512, dtype="bfloat16"),
         "kargs": lambda mod: mod.RmsNormQuantKernelArgs(lower_bound=0.0)},
    # ---- contributed ----
    "contributed/interpolate_bilinear_fwd.py::interpolate_bilinear_2x_fwd":
        {"src_arr": T(1, 4, 8, 8)},
    "contributed/interpolate_trilinear_fwd.py::interpolate_trilinear_2x_fwd":
        {"src_arr": T(1, 2, 4, 8, 8)},
    "contributed/maxpooling.py::max_pooling_2d_stride_1":
        {"in_tensor": T(128, 64), "pool_size": 3},
    # sections of 8192 keys, at least two (the first section's scaling factors are written
    # only by the second): 16k, as the sample says
    "contributed/pipelined_attention.py::flash_fwd":
        {"q": T(1, 128, 16384, dtype="bfloat16"), "k": T(1, 128, 16384, dtype="bfloat16"),
         "v": T(1, 16384, 128, dtype="bfloat16"), "use_causal_mask": False},
    "neuron-team-kernels/hw_ubench.py::row_tiled_matmul_isa_kernel":
        {"A": T(1, 128, 512), "B": T(1, 128, 512), "n_tile": 512, "tiling_factor": 1,
         "use_full_pe": True},
    "neuron-team-kernels/hw_ubench.py::column_tiled_matmul_isa_kernel":
        {"A": T(128, 512), "B": T(128, 512), "n_tile": 512, "use_full_pe": True},
    # token generation, unsharded: B * n_heads * S_tkg <= 128 rows of softmax, S_ctx a
    # multiple of 512 (one PSUM bank of scores per tile)
    "neuron-team-kernels/attention_token_gen.py::attention_token_gen_kernel":
        {"Q": T(2, 128, 4, 4, dtype="bfloat16"), "K": T(2, 128, 4, dtype="bfloat16"),
         "V": T(2, 4, 128, dtype="bfloat16"), "K_cache": T(2, 128, 512, dtype="bfloat16"),
         "V_cache": T(2, 512, 128, dtype="bfloat16"),
         "mask_cache": T(2, 4, 4, 512, ints=2, dtype="uint8"),
         "mask_active": T(2, 4, 4, 4, ints=2, dtype="uint8"), "out": Out(128, 2, 4, 4)},
    # the whole attention block: B=2, S_tkg=4, H=512, 4 query heads of 128 (+ K and V heads)
    "neuron-team-kernels/attention_token_gen.py::llama3_attention_block_token_gen_kernel":
        {"X": T(2, 4, 512, dtype="bfloat16"), "W_qkv": T(512, 6 * 128, dtype="bfloat16"),
         "W_gamma": T(1, 512, dtype="bfloat16"), "rmsnorm_eps": 1e-6,
         "cos": T(64, 2, 4, dtype="bfloat16"), "sin": T(64, 2, 4, dtype="bfloat16"),
         "K_cache": T(2, 128, 512, dtype="bfloat16"), "V_cache": T(2, 512, 128, dtype="bfloat16"),
         "mask_cache": T(2, 4, 4, 512, ints=2, dtype="uint8"),
         "mask_active": T(2, 4, 4, 4, ints=2, dtype="uint8"),
         "position_ids": T(2, 4, ints=508, dtype="int32"), "update_cache": False},
    # blockwise MoE matmul: H in [4096, 8192], block size 128, two blocks over two experts
    "neuron-team-kernels/blockwise_mm.py::blockwise_mm_baseline_allocated":
        {"hidden_states": T(256, 4096, dtype="bfloat16"),
         "expert_affinities_masked": T(256 * 2, 1, dtype="bfloat16"),
         "gate_up_proj_weight": T(2, 4096, 2, 128, dtype="bfloat16"),
         "down_proj_weight": T(2, 128, 4096, dtype="bfloat16"), "block_size": 128,
         "token_position_to_id":  # each token in one block (a permutation)
             lambda mod: np.random.default_rng(1).permutation(256).astype(np.int32),
         "block_to_expert": T(2, ints=2, dtype="int32")},
    "neuron-team-kernels/transpose.py::tiled_dve_transpose_10":
        {"img_ref": T(64, 96), "permutation": (1, 0)},
    "neuron-team-kernels/transpose.py::tiled_dve_transpose_210": {"img_ref": T(4, 32, 32)},
    "neuron-team-kernels/rmsnorm_quant.py::rmsnorm_quant":
        {"hidden": T(1, 128, 512), "ln_w": T(1, 512), "lower_bound": 0.5,
         "out": Out(1, 128, 516, dtype="float8_e4m3"), "kernel_name": "RMSNormQuant"},
    "neuron-team-kernels/rmsnorm_quant.py::shard_rmsnorm_quant":
        {"hidden": T(1, 256, 512), "ln_w": T(1, 512), "lower_bound": 0.5,
         "out": Out(1, 256, 516, dtype="float8_e4m3"), "kernel_name": "RMSNormQuant"},
    "neuron-team-kernels/rmsnorm_quant.py::compatible_rmsnorm_quant":
        {"hidden": T(1, 128, 512), "ln_w": T(1, 512), "lower_bound": 0.5,
         "kernel_name": "RMSNormQuant"},
    "neuron-team-kernels/conv.py::conv2d":
        {"in_ref": T(1, 64, 16, 16), "filter_ref": T(64, 64, 3, 3),
         "out_ref": Out(1, 64, 14, 14)},
}
# ---- collective kernels (simulated rank groups) ----
class _RingFlashConfig:
    """The config fields ring_attention_fwd reads (those of the reference FlashConfig, which
    has lse_dtype; the contributed file's own FlashConfig lacks it)."""
    seq_tile_size = 2048
    training = True
    should_transpose_v = True
    lse_dtype = ""


_RING2 = [(0, 1), (1, 0)]  # two ranks, each sending to the other
BINDINGS.update({
    "neuron-team-kernels/attention.py::ring_attention_fwd":  # (b, h, d, seq chunk) per rank
        {"q": T(1, 1, 128, 2048, dtype="bfloat16"), "k": T(1, 1, 128, 2048, dtype="bfloat16"),
         "v": T(1, 1, 128, 2048, dtype="bfloat16"), "seed": None,
         "src_tgt_pairs": _RING2, "config": _RingFlashConfig(), GRID: (1, 1),
         RANKS: (2, lambda r: {"rank_id": r})},
    "neuron-team-kernels/attention.py::ring_attention_bwd":
        {"q_ref": T(1, 1, 128, 512, dtype="bfloat16"),
         "k_ref": T(1, 1, 128, 512, dtype="bfloat16"),
         "v_ref": T(1, 1, 128, 512, dtype="bfloat16"),
         "o_ref": T(1, 1, 128, 512, dtype="bfloat16"),
         "dy_ref": T(1, 1, 128, 512, dtype="bfloat16"),
         "lse_ref": T(1, 1, 128, 4, dtype="bfloat16"), "seed_ref": None,
         "src_tgt_pairs": _RING2, "use_causal_mask": True, GRID: (1, 1),
         RANKS: (2, lambda r: {"rank_id": r})},
    # single-core (no grid): the LNC-2 sendrecv / core_barrier paths are not taken; the
    # context is one whole MM1 tile (8192)
    "neuron-team-kernels/attention_token_gen.py::attention_token_gen_kernel":
        {"Q": T(1, 128, 4, 1, dtype="bfloat16"), "K": T(1, 128, 1, dtype="bfloat16"),
         "V": T(1, 1, 128, dtype="bfloat16"), "K_cache": T(1, 128, 8192, dtype="bfloat16"),
         "V_cache": T(1, 8192, 128, dtype="bfloat16"),
         "mask_cache": T(1, 4, 1, 8192, ints=2, dtype="uint8"),
         "mask_active": T(1, 4, 1, 1, ints=2, dtype="uint8"),
         "out": Out(128, 1, 4, dtype="bfloat16")},
    "neuron-team-kernels/attention_token_gen.py::llama3_attention_block_token_gen_kernel":
        {"X": T(1, 1, 512, dtype="bfloat16"), "W_qkv": T(512, 6 * 128, dtype="bfloat16"),
         "W_gamma": T(1, 512, dtype="bfloat16"), "rmsnorm_eps": 1e-6,
         "cos": T(64, 1, 1, dtype="bfloat16"), "sin": T(64, 1, 1, dtype="bfloat16"),
         "K_cache": T(1, 128, 512, dtype="bfloat16"), "V_cache": T(1, 512, 128, dtype="bfloat16"),
         "mask_cache": T(1, 4, 1, 512, ints=2, dtype="uint8"),
         "mask_active": T(1, 4, 1, 1, ints=2, dtype="uint8"),
         "position_ids": T(1, 1, ints=500, dtype="int32"), "update_cache": False},
})

# the attention tutorial: v1/v2 take one 128x128 tile, the later ones seqlen >= 512
for _v in ("v1", "v2"):
    BINDINGS["attention_fwd_performance/attention_kernels.py::attn_fwd_" + _v] = {
        "q": T(128, 128, dtype="bfloat16"), "k": T(128, 128, dtype="bfloat16"),
        "v": T(128, 128, dtype="bfloat16")}
for _v in ("v3", "v4", "v5", "v6", "v7", "v8", "v8a", "v9", "v10", "v11"):
    BINDINGS["attention_fwd_performance/attention_kernels.py::attn_fwd_" + _v] = {
        "q": T(128, 512, dtype="bfloat16"), "k": T(128, 512, dtype="bfloat16"),
        "v": T(128, 512, dtype="bfloat16")}


def _decorator_name(d):
    f = d.func if isinstance(d, ast.Call) else d
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


def _is_trace_helper(d):
    if not isinstance(d, ast.Call):
        return False
    for kw in d.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant) and kw.value.value == "trace":
            return True
    return False


def find_kernels(root):
    """[(path, function name)] of the top-level kernels under root, sorted by path."""
    found = []
    for dp, dn, fn in os.walk(root):
        dn[:] = sorted(d for d in dn if d not in _SKIP_DIRS)
        for f in sorted(fn):
            if (not f.endswith(".py") or f.startswith("test_")
                    or f.endswith(("_torch.py", "_jax.py"))):
                continue
            path = os.path.join(dp, f)
            try:
                with open(path) as fh:
                    tree = ast.parse(fh.read())
            except (SyntaxError, UnicodeDecodeError):
                continue
            for node in tree.body:
                if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                    continue
                decs = node.decorator_list
                if not any(_decorator_name(d) in _DECORATORS for d in decs):
                    continue
                if any(_is_trace_helper(d) for d in decs):
                    continue
                found.append((path, node.name))
    return found


def binding_for(path, name):
    """The BINDINGS entry whose key is a suffix of path::name (None entries count)."""
    key = path.replace(os.sep, "/") + "::" + name
    for k, v in BINDINGS.items():
        if key.endswith("/" + k) or key == k:
            return True, v
    return False, None


class _HostStub(types.ModuleType):
    """Stands in for a host-only library a sample imports at file level (torch, scipy, ...)
    but its kernels never call: any attribute is another stub."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _HostStub("%s.%s" % (self.__name__, name))

    def __call__(self, *a, **k):
        return _HostStub(self.__name__ + "()")


class _HostStubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in HOST_LIBRARIES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _HostStub(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


HOST_LIBRARIES = {"torch", "torch_xla", "torch_neuronx", "scipy", "jax", "jaxlib",
                  "neuronxcc_test", "matplotlib", "loguru",
                  "transformers"}


def _import(path):
    """Import a sample file as a module (its folder and the src/ root on sys.path)."""
    d = os.path.dirname(os.path.abspath(path))
    extra = [d]
    p = d
    while p != os.path.dirname(p):
        if os.path.basename(p) == "src":
            extra.append(p)
            break
        p = os.path.dirname(p)
    for e in extra:
        if e not in sys.path:
            sys.path.insert(0, e)
    # a file inside a package under src/ is imported under its dotted name (relative imports)
    package = ""
    if len(extra) > 1:
        rel = os.path.relpath(os.path.splitext(os.path.abspath(path))[0], extra[1])
        package = ".".join(rel.split(os.sep)[:-1])  # namespace packages need no __init__
    name = "nkisim_cov_%d" % abs(hash(os.path.abspath(path)))
    if package:
        name = package + "." + name
    if name in sys.modules:
        return sys.modules[name]
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    tree.body = _definitions(tree.body)
    mod = types.ModuleType(name)
    mod.__file__ = path
    mod.__package__ = package
    sys.modules[name] = mod
    try:
        exec(compile(tree, path, "exec"), vars(mod))
    except BaseException:
        del sys.modules[name]
        raise
    return mod


def _calls_a_kernel(stmt, kernels):
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call):
            f = n.func.value if isinstance(n.func, ast.Subscript) else n.func
            if isinstance(f, ast.Name) and f.id in kernels:
                return True
    return False


def _definitions(body):
    """A sample file's top-level statements up to its script part: a file that runs its
    kernel at import time (a test driver at full size, outside `if __name__ == ...`) keeps
    its imports, definitions and constants; the statements from the first top-level call
    of a kernel on are dropped (definitions after it are kept)."""
    kernels = {n.name for n in body if isinstance(n, ast.FunctionDef) and any(
        _decorator_name(d) in _DECORATORS for d in n.decorator_list)}
    out = []
    script = False
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            out.append(stmt)
        elif not script and _calls_a_kernel(stmt, kernels):
            script = True
        elif not script:
            out.append(stmt)
    return out


def _resolve(v, rng, dtypes, name, mod):
    if callable(v) and not isinstance(v, (T, type)):
        return v(mod)  # a value the sample's own module defines (an argument dataclass)
    if isinstance(v, T):
        if v.dtype in ("bfloat16", "float8_e4m3", "float8_e5m2"):
            dtypes[name] = v.dtype
        return v.make(rng)
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "nl":
        import nki.language as nl
        return getattr(nl, v[1])
    return v


def run_one(path, name, verbose=False):
    """('ok'|'FAIL'|'unbound', detail)."""
    have, binding = binding_for(path, name)
    if not have or binding is None:
        return "unbound", "no argument binding (see BINDINGS)"
    rng = np.random.default_rng(0)
    try:
        mod = _import(path)
        kernel = getattr(mod, name)
        dtypes = {}
        inputs = {k: _resolve(v, rng, dtypes, k, mod) for k, v in binding.items()
                  if k not in (GRID, RANKS, TARGET)}
        target = binding.get(TARGET, "trn2")
        if RANKS in binding:
            n, per_rank = binding[RANKS]
            nkisim.simulate_ranks(kernel, [dict(inputs, **per_rank(r)) for r in range(n)],
                                  target=target, grid=binding.get(GRID), input_dtypes=dtypes)
        else:
            nkisim.simulate(kernel, inputs, target=target, grid=binding.get(GRID),
                            input_dtypes=dtypes, hotspots=False)
        return "ok", ""
    except nkisim.NkiError as e:
        return "FAIL", str(e)
    except Exception as e:  # a sample's own code failed (import, assert): report it
        if verbose:
            traceback.print_exc()
        tb = traceback.extract_tb(e.__traceback__)
        where = ""
        if tb:
            where = " (%s:%d)" % (os.path.basename(tb[-1].filename), tb[-1].lineno)
        return "FAIL", "%s: %s%s" % (type(e).__name__, e, where)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="nki-samples checkout(s)")
    ap.add_argument("--only", default="", help="run kernels whose path::name contains this")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    nkisim.activate()
    sys.meta_path.append(_HostStubFinder())  # after the real finders: real libraries win
    seen = {}
    for root in args.paths:
        for path, name in find_kernels(root):
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            seen.setdefault(rel + "::" + name, path)  # the first checkout wins
    n_ok = 0
    rows = []
    for key in sorted(seen):
        if args.only and args.only not in key:
            continue
        path = seen[key]
        t0 = time.time()
        status, detail = run_one(path, key.split("::")[1], args.verbose)
        dt = time.time() - t0
        n_ok += status == "ok"
        detail = " ".join(detail.split())
        rows.append((status, key))
        print("%-7s %5.1fs  %s%s" % (status, dt, key, ("  -- " + detail[:160]) if detail else ""),
              flush=True)
    print("%d of %d run" % (n_ok, len(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
