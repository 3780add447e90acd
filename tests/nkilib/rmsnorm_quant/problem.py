"""NKI Library rmsnorm_quant_kernel (nkilib/core/rmsnorm/rmsnorm_quant.py): RMSNorm of bf16 hidden
[1, 128, 512] then static FP8 (e4m3, range 240) quantization with a given dequantization scale:
out = fp8(clip(norm(x) / scale, -240, 240)), [1, 128, 512]. The
config object and its Enums are built where the kernel runs (call_kernel), and it is launched
on two logical cores."""
import numpy as np

SEEDS = (0,)
KERNEL = "rmsnorm_quant_kernel"
B, S, H = 1, 128, 512
OUTPUT_DTYPES = ("float8_e4m3",)
TOLERANCE = "rel_l2"
REL_L2 = 3e-2


def _e4m3_values():
    """The finite float8_e4m3 values (bias 7, 3 mantissa bits; NKI's range is +-240)."""
    out = []
    for code in range(256):
        s, e, m = code >> 7, (code >> 3) & 15, code & 7
        v = (m / 8.0) * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7)
        out.append(-v if s else v)
    return np.array(out)


_VALUES = _e4m3_values()
_GRID = np.unique(_VALUES[np.abs(_VALUES) <= 240])


def _to_e4m3(x):
    i = np.clip(np.searchsorted(_GRID, x), 1, len(_GRID) - 1)
    lo, hi = _GRID[i - 1], _GRID[i]
    return np.where(np.abs(x - lo) <= np.abs(hi - x), lo, hi)


INPUT_DTYPES = {"hidden": "bfloat16", "ln_w": "bfloat16"}


def _bf16(a):
    """float32 values rounded to bfloat16 (nearest even)."""
    u = a.astype(np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"hidden": _bf16(rng.standard_normal((B, S, H), dtype=np.float32)),
            "ln_w": _bf16(rng.uniform(0.5, 1.5, (1, H)).astype(np.float32)),
            "input_dequant_scale": np.full((128, 1), 0.02, np.float32)}


def reference(hidden, ln_w, input_dequant_scale):
    x = hidden.astype(np.float64).reshape(B * S, H)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * ln_w[0]
    q = _to_e4m3(np.clip(y / float(input_dequant_scale[0, 0]), -240, 240))
    return q.reshape(B, S, H).astype(np.float32)


def call_kernel(kernel, hidden, ln_w, input_dequant_scale):
    from .rmsnorm_quant import RmsNormQuantKernelArgs  # relative to the kernel file
    from ..utils.common_types import NormType, QuantizationType
    args = RmsNormQuantKernelArgs(norm_type=NormType.RMS_NORM,
                                  quantization_type=QuantizationType.STATIC, eps=1e-6)
    return kernel[2](hidden, ln_w, args, input_dequant_scale)
