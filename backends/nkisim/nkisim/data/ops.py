"""Numeric definitions of NKI element-wise and reduction operators (numpy, float32)."""
import math

import numpy as np

_SQRT2 = math.sqrt(2.0)


_OPTIMISED_BLAS = ("openblas", "blis", "mkl", "atlas", "accelerate")


def _reference_blas():
    """True when numpy is linked against the unoptimised reference BLAS (libblas). numpy
    built against the generic libblas.so.3 (as Debian's is) may load an optimised library
    through the system's alternatives; the mapped libraries of the process tell which."""
    try:
        info = getattr(np.__config__, "blas_opt_info", None) or {}
        libs = [str(x).lower() for x in info.get("libraries", [])]
    except Exception:
        return False
    if not (bool(libs) and all(x in ("blas", "cblas") for x in libs)):
        return False
    try:
        with open("/proc/self/maps") as f:
            mapped = f.read().lower()
    except OSError:
        return True
    return not any(name in mapped for name in _OPTIMISED_BLAS)


_USE_EINSUM = _reference_blas()


def matmul_tn(a, b):
    """a.T @ b in float32. With the reference BLAS, numpy's einsum loop is several times
    faster than sgemm, so it is used instead."""
    if _USE_EINSUM:
        return np.einsum("ki,kj->ij", a, b)
    return a.T @ b


def erf(x):
    """Error function (Abramowitz-Stegun 7.1.26, |error| < 1.5e-7)."""
    x = np.asarray(x, dtype=np.float32)
    s = np.sign(x)
    a = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return (s * y).astype(np.float32)


def sigmoid(x):
    return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


def gelu(x):
    return (0.5 * x * (1.0 + erf(x / _SQRT2))).astype(np.float32)


def gelu_tanh(x):
    return (0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
            ).astype(np.float32)


def gelu_sigmoid(x):
    return (x * sigmoid(1.702 * x)).astype(np.float32)


def gelu_sigmoid_dx(x):
    """d/dx of x * sigmoid(1.702 x)."""
    s = sigmoid(1.702 * x)
    return (s + 1.702 * x * s * (1.0 - s)).astype(np.float32)


def gelu_dx(x):
    cdf = 0.5 * (1.0 + erf(x / _SQRT2))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return (cdf + x * pdf).astype(np.float32)


def silu(x):
    return (x * sigmoid(x)).astype(np.float32)


def silu_dx(x):
    s = sigmoid(x)
    return (s * (1 + x * (1 - s))).astype(np.float32)


def softplus(x):
    return np.logaddexp(np.float32(0), x).astype(np.float32)


def mish(x):
    return (x * np.tanh(softplus(x))).astype(np.float32)


def relu(x):
    return np.maximum(x, np.float32(0))


def rsqrt(x):
    return (1.0 / np.sqrt(x)).astype(np.float32)


def reciprocal(x):
    return (1.0 / x).astype(np.float32)


def square(x):
    return x * x


def identity(x):
    return x


def sign(x):
    return np.sign(x)


def logical_not(x):
    return (x == 0)


def bitwise_not(x):
    return np.invert(x)


UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": rsqrt, "tanh": np.tanh,
    "sigmoid": sigmoid, "gelu": gelu, "gelu_apprx_tanh": gelu_tanh,
    "gelu_apprx_sigmoid": gelu_sigmoid, "gelu_apprx_sigmoid_dx": gelu_sigmoid_dx,
    "gelu_dx": gelu_dx, "silu": silu, "silu_dx": silu_dx,
    "relu": relu, "square": square, "reciprocal": reciprocal, "negative": np.negative,
    "abs": np.abs, "sign": sign, "sin": np.sin, "cos": np.cos, "tan": np.tan, "erf": erf,
    "softplus": softplus, "mish": mish, "ceil": np.ceil, "floor": np.floor, "trunc": np.trunc,
    "arctan": np.arctan, "copy": identity, "identity": identity, "logical_not": logical_not,
    "invert": bitwise_not, "bitwise_not": bitwise_not, "exp2": np.exp2, "log2": np.log2,
    "erf_dx": lambda x: (2.0 / math.sqrt(math.pi) * np.exp(-x * x)).astype(np.float32),
}


def _cmp(f):
    return lambda a, b: f(a, b)


def _logical(f):
    return lambda a, b: f(np.asarray(a) != 0, np.asarray(b) != 0)


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power, "mod": np.mod,
    "fmod": np.fmod, "floor_divide": np.floor_divide,
    "equal": _cmp(np.equal), "not_equal": _cmp(np.not_equal), "greater": _cmp(np.greater),
    "greater_equal": _cmp(np.greater_equal), "less": _cmp(np.less),
    "less_equal": _cmp(np.less_equal),
    "logical_and": _logical(np.logical_and), "logical_or": _logical(np.logical_or),
    "logical_xor": _logical(np.logical_xor),
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift, "right_shift": np.right_shift,
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "bypass": lambda a, b: np.broadcast_to(a, np.broadcast_shapes(np.shape(a), np.shape(b))),
    # one-input ALU operators an instruction with an operand slot may name (the operand is
    # ignored): `tensor_scalar(data, op0=nl.abs, operand0=0.0)` is |data|
    "rsqrt": lambda a, b: rsqrt(a),
    "abs": lambda a, b: np.abs(a),
    "reciprocal": lambda a, b: reciprocal(a),
}

BITWISE = {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "invert",
           "bitwise_not"}
COMPARISON = {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
              "logical_and", "logical_or", "logical_xor", "logical_not"}

# reduction name -> numpy reducer(array, axis, keepdims)
REDUCE = {
    "add": np.sum, "sum": np.sum, "maximum": np.max, "max": np.max, "minimum": np.min,
    "min": np.min, "multiply": np.prod, "prod": np.prod, "mean": np.mean,
    "logical_and": lambda a, axis, keepdims: np.all(a != 0, axis=axis, keepdims=keepdims),
    "all": lambda a, axis, keepdims: np.all(a != 0, axis=axis, keepdims=keepdims),
    "logical_or": lambda a, axis, keepdims: np.any(a != 0, axis=axis, keepdims=keepdims),
    "any": lambda a, axis, keepdims: np.any(a != 0, axis=axis, keepdims=keepdims),
    "bitwise_or": lambda a, axis, keepdims: np.bitwise_or.reduce(a, axis=axis, keepdims=keepdims),
    "bitwise_and": lambda a, axis, keepdims: np.bitwise_and.reduce(a, axis=axis,
                                                                  keepdims=keepdims),
    "abs_max": lambda a, axis, keepdims: np.max(np.abs(a), axis=axis, keepdims=keepdims),
}

# Names registered for objects that identify an operator (nl functions, numpy ufuncs...).
_OP_NAMES = {}


def register(obj, name):
    try:
        _OP_NAMES[obj] = name
    except TypeError:
        pass


for _n in list(UNARY) + list(BINARY):
    f = getattr(np, _n, None)
    if f is not None and (_n in BINARY or _n in UNARY):
        register(f, _n)
register(np.sum, "add")
register(np.max, "maximum")
register(np.amax, "maximum")
register(np.min, "minimum")
register(np.amin, "minimum")
register(np.prod, "multiply")
register(np.mean, "mean")
register(np.true_divide, "divide")
register(np.all, "logical_and")
register(np.any, "logical_or")


def op_name(op):
    """Canonical name of an operator given as a function object, numpy ufunc or string."""
    if op is None:
        return None
    if isinstance(op, str):
        return op
    try:
        n = _OP_NAMES.get(op)
    except TypeError:
        n = None
    if n is not None:
        return n
    n = getattr(op, "nkisim_op", None) or getattr(op, "__name__", None)
    return n
