"""`nki.language` element-wise math, comparisons, reductions and the composite operations built
on them (softmax, rms_norm, cumsum, dropout); also the argument checks the nl modules share.
"""
import numpy as np

from ..machine import core
from ..data import dtypes as D
from ..data import ops as O
from . import masks as M
from ..machine import runtime
from ..data.buffers import (Tensor, sbuf)
from ..machine.core import (alloc, compute, check_onchip, free_size, engine_cost, dt_of, value_of,
                            fuse_or_copy)
from ..errors import compile_error
from ..machine.timing import SCALAR, VECTOR


def _unmodelled(fname, kw):
    """Keyword arguments nkisim does not model are an error, not silently ignored."""
    raise compile_error("%s: argument%s %s %s not modelled by nkisim (the simulator would "
                        "ignore %s); remove %s" % (fname, "s" if len(kw) > 1 else "",
                                                   ", ".join(sorted(kw)),
                                                   "are" if len(kw) > 1 else "is",
                                                   "them" if len(kw) > 1 else "it",
                                                   "them" if len(kw) > 1 else "it"))



def _shape(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(map(int, shape))


# ---- element-wise ------------------------------------------------------------------------
_SCALAR_FUNCS = {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "gelu", "gelu_apprx_tanh",
                 "gelu_apprx_sigmoid", "gelu_apprx_sigmoid_dx", "gelu_dx", "silu", "silu_dx",
                 "relu", "square", "reciprocal", "sin", "cos", "tan", "erf", "erf_dx", "softplus",
                 "mish", "arctan", "exp2", "log2", "sign", "abs"}


def unary(name, x, dtype=None, mask=None):
    """Element-wise unary op on a tile; transcendental functions run on ScalarE."""
    if not isinstance(x, Tensor):
        v = O.UNARY[name](np.float32(x))
        return v
    check_onchip(x, name)
    if name in O.BITWISE and not x.st.dt.is_int:
        raise compile_error("invalid dtype %s for nl.%s (integer types only)" % (x.st.dt.name,
                                                                                 name))
    if dtype is not None:
        dt = dt_of(dtype)
    elif x.st.dt.is_float or name in O.BITWISE or name in ("negative", "abs"):
        dt = x.st.dt
    else:
        dt = D.FLOAT32
    out = core.tmp(x.shape, dt, sbuf)
    eng = SCALAR if name in _SCALAR_FUNCS else VECTOR
    f = O.UNARY[name]

    def run():
        v = value_of(x)
        if x.st.dt.is_float or name not in O.BITWISE:
            if v.dtype != np.float32 and name not in O.BITWISE:
                v = v.astype(np.float32)
        return f(v)
    compute(eng, engine_cost(eng, free_size(out)), [x], [out], run, name, mask=mask)
    return M.masked_result(out, mask)


def _make_unary(name):
    def fn(x, dtype=None, mask=None, **kw):
        if kw:
            _unmodelled("nl." + name, kw)
        return unary(name, x, dtype, mask)
    fn.__name__ = name
    fn.nkisim_op = name
    fn.__doc__ = "Element-wise %s." % name
    O.register(fn, name)
    return fn


exp = _make_unary("exp")
log = _make_unary("log")
sqrt = _make_unary("sqrt")
rsqrt = _make_unary("rsqrt")
tanh = _make_unary("tanh")
sigmoid = _make_unary("sigmoid")
gelu = _make_unary("gelu")
gelu_apprx_tanh = _make_unary("gelu_apprx_tanh")
gelu_apprx_sigmoid = _make_unary("gelu_apprx_sigmoid")
gelu_apprx_sigmoid_dx = _make_unary("gelu_apprx_sigmoid_dx")
gelu_dx = _make_unary("gelu_dx")
silu = _make_unary("silu")
silu_dx = _make_unary("silu_dx")
relu = _make_unary("relu")
square = _make_unary("square")
reciprocal = _make_unary("reciprocal")
negative = _make_unary("negative")
abs = _make_unary("abs")
sign = _make_unary("sign")
sin = _make_unary("sin")
cos = _make_unary("cos")
tan = _make_unary("tan")
erf = _make_unary("erf")
erf_dx = _make_unary("erf_dx")
softplus = _make_unary("softplus")
mish = _make_unary("mish")
ceil = _make_unary("ceil")
floor = _make_unary("floor")
trunc = _make_unary("trunc")
arctan = _make_unary("arctan")
exp2 = _make_unary("exp2")
log2 = _make_unary("log2")
logical_not = _make_unary("logical_not")
invert = _make_unary("invert")
bitwise_not = invert
identity = _make_unary("identity")


def binary(name, a, b, dtype=None, mask=None):
    """Element-wise binary op with numpy broadcasting (VectorE)."""
    ta = isinstance(a, Tensor)
    tb = isinstance(b, Tensor)
    if not ta and not tb:
        return O.BINARY[name](a, b)
    if ta:
        check_onchip(a, name)
    if tb:
        check_onchip(b, name)
    if ta and tb:
        dt = D.promote(a.st.dt, b.st.dt)
        if a.shape == b.shape:
            shape = a.shape
        else:
            shape, _ = core.tile_shape((a.shape, b.shape), "nl." + name)
    else:
        t = a if ta else b
        s = b if ta else a
        dt = t.st.dt
        if not dt.is_float and isinstance(s, float):
            dt = D.FLOAT32
        shape = t.shape
    if name in O.COMPARISON and dtype is None:
        dt = dt if dt.is_float else D.UINT8
    if name == "divide" and dtype is None and not dt.is_float:
        dt = D.FLOAT32  # true division: integer tiles give float32 (nl.floor(a / b) idiom)
    if dtype is not None:
        dt = dt_of(dtype)
    if name in O.BITWISE and not dt.is_int:
        raise compile_error("invalid dtype %s for nl.%s (integer types only)" % (dt.name, name))
    out = core.tmp(tuple(shape), dt, sbuf)
    f = O.BINARY[name]
    n = free_size(out)
    if ta and tb:
        # tensor_tensor: 2N unless one side is a per-partition/scalar broadcast (tensor_scalar)
        small = free_size(a) == 1 or free_size(b) == 1
        if small:
            cost = core.vector_cost(n, None, core.perf_factor("tensor_scalar", [a, b], [out]))
        else:
            cost = core.tensor_tensor_cost(name, a, b, out)
        ins = [a, b]
    else:
        cost = core.vector_cost(n, None, core.perf_factor("tensor_scalar", [a if ta else b],
                                                         [out]))
        ins = [a if ta else b]
    eng = VECTOR
    if fdt_ok(dt) and (not (ta and tb) or small):
        eng, cost = core.place_scalar_form("nl." + name, (name,), n, cost)
    fdt = dt.is_float

    nd = len(shape)

    def run():
        va = value_of(a, nd) if ta else a
        vb = value_of(b, nd) if tb else b
        if fdt and name not in O.BITWISE:
            if ta and va.dtype != np.float32:
                va = va.astype(np.float32)
            if tb and vb.dtype != np.float32:
                vb = vb.astype(np.float32)
        return f(va, vb)
    compute(eng, cost, ins, [out], run, name, mask=mask)
    return M.masked_result(out, mask)


def fdt_ok(dt):
    """Float tiles only go to ScalarE's affine path (integer arithmetic stays on VectorE)."""
    return dt.is_float


# `nki` namespace: binary ops the hardware rejects (hwrules); the value is the alternative
_HW_BINARY = {"divide": "nl.multiply by nl.reciprocal, or nisa.tensor_tensor / "
                        "nisa.tensor_scalar with np.divide",
              "mod": "nisa.tensor_scalar / nisa.tensor_tensor with np.mod",
              "fmod": "nisa.tensor_scalar / nisa.tensor_tensor with np.fmod"}


def _hw_binary_check(name, x, y):
    if name in _HW_BINARY:
        _hw.reject("nl.%s" % name, _HW_BINARY[name])
    elif name == "power" and not isinstance(y, Tensor):
        _hw.reject("nl.power with a scalar exponent", "nisa.tensor_scalar with np.power, or "
                   "nisa.activation")
    elif isinstance(x, Tensor) and isinstance(y, Tensor) and x.shape != y.shape:
        _hw.reject("nl.%s broadcasting %s with %s" % (name, list(x.shape), list(y.shape)),
                   "operands of equal shape (nl.broadcast_to first) or nisa.tensor_scalar "
                   "with a [P, 1] operand")


def _make_binary(name):
    def fn(x, y, dtype=None, mask=None, **kw):
        if kw:
            _unmodelled("nl." + name, kw)
        _hw_binary_check(name, x, y)
        return binary(name, x, y, dtype, mask)
    fn.__name__ = name
    fn.nkisim_op = name
    fn.__doc__ = "Element-wise %s with broadcasting." % name
    O.register(fn, name)
    return fn


add = _make_binary("add")
subtract = _make_binary("subtract")
multiply = _make_binary("multiply")
divide = _make_binary("divide")
maximum = _make_binary("maximum")
minimum = _make_binary("minimum")
power = _make_binary("power")
mod = _make_binary("mod")
fmod = _make_binary("fmod")
floor_divide = _make_binary("floor_divide")
equal = _make_binary("equal")
not_equal = _make_binary("not_equal")
greater = _make_binary("greater")
greater_equal = _make_binary("greater_equal")
less = _make_binary("less")
less_equal = _make_binary("less_equal")
logical_and = _make_binary("logical_and")
logical_or = _make_binary("logical_or")
logical_xor = _make_binary("logical_xor")
bitwise_and = _make_binary("bitwise_and")
bitwise_or = _make_binary("bitwise_or")
bitwise_xor = _make_binary("bitwise_xor")
left_shift = _make_binary("left_shift")
right_shift = _make_binary("right_shift")


def inplace(t, o, name):
    """`t op= o`: PSUM `+=` of a fresh matmul result is a fused accumulation (no extra
    instruction); anything else is an element-wise op written back into `t`."""
    if (name == "add" and isinstance(o, Tensor) and t.st.kind == "psum"
            and o.st.name == "__matmul__"):
        m = M.result_mask(o)
        if m is None:
            core.accumulate_fused(t, o)
            return t
        # a masked matmul accumulates only the rectangle it computed
        box = M.mask_box("nisa.nc_matmul", m, o.shape)
        if box is None:
            core.accumulate_fused(t, o)
        elif box[0][1] > box[0][0] and box[1][1] > box[1][0]:
            if tuple(t.shape) != tuple(o.shape):
                raise compile_error("shape mismatch in PSUM accumulation of a masked matmul: "
                                    "%s += %s" % (list(t.shape), list(o.shape)))
            (r0, r1), (c0, c1) = box
            core.accumulate_fused(t[r0:r1, c0:c1], o[r0:r1, c0:c1])
        return t
    res = binary(name, t, o)
    fuse_or_copy(t, res)
    return t


def where(condition, x, y, dtype=None, mask=None, **kw):
    """Element-wise select: x where condition is non-zero, else y."""
    if kw:
        _unmodelled("nl.where", kw)
    tensors = [v for v in (condition, x, y) if isinstance(v, Tensor)]
    for v in tensors:
        check_onchip(v, "where")
    shapes = [v.shape for v in tensors] + [np.shape(v) for v in (condition, x, y)
                                           if isinstance(v, np.ndarray)]
    shape, nd = core.tile_shape(shapes, "nl.where")
    if dtype is not None:
        dt = dt_of(dtype)
    else:
        dts = [v.st.dt for v in (x, y) if isinstance(v, Tensor)]
        dt = dts[0] if dts else D.FLOAT32
        if len(dts) == 2:
            dt = D.promote(dts[0], dts[1])
    out = core.tmp(tuple(shape), dt, sbuf)

    def run():
        c = value_of(condition, nd)
        vx = value_of(x, nd)
        vy = value_of(y, nd)
        return np.where(np.asarray(c) != 0, vx, vy)
    compute(VECTOR, core.vector_cost(free_size(out), 2.0), tensors, [out], run, "select",
            mask=mask)
    return M.masked_result(out, mask)


select = where


# ---- reductions ---------------------------------------------------------------------------
def _axes(x, axis):
    nd = len(x.shape)
    if axis is None:
        axes = tuple(range(1, nd))
    elif isinstance(axis, (list, tuple)):
        axes = tuple(int(a) % nd for a in axis)
    else:
        axes = (int(axis) % nd,)
    if 0 in axes:
        raise compile_error("reduction along the partition dimension (axis 0) is not supported; "
                            "reduce along free axes, or use nisa.tensor_partition_reduce / "
                            "a matmul")
    return axes


_REDUCE_IDENTITY = {"add": 0.0, "sum": 0.0, "mean": 0.0, "maximum": -np.inf, "max": -np.inf,
                    "minimum": np.inf, "min": np.inf, "multiply": 1.0, "prod": 1.0}


def reduce(name, x, axis, dtype=None, keepdims=False, mask=None, negate=False, out=None,
           engine=VECTOR):
    """Reduction along free axes (VectorE)."""
    check_onchip(x, name)
    axes = _axes(x, axis)
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if keepdims else \
        tuple(n for i, n in enumerate(x.shape) if i not in axes)
    if out is None:
        dt = dt_of(dtype) if dtype is not None else x.st.dt
        if name in ("all", "any", "logical_and", "logical_or"):
            dt = dt_of(dtype) if dtype is not None else D.UINT8
        out = core.tmp(shape, dt, sbuf)
    f = O.REDUCE[name]
    n = free_size(x)
    factor = 1.0
    if (x.st.dt is D.BFLOAT16 and out.st.dt is D.BFLOAT16 and name in ("add", "sum", "max",
                                                                       "maximum")):
        factor = 0.5

    def run():
        v = value_of(x)
        if v.dtype.kind == "f" and v.dtype != np.float32:
            v = v.astype(np.float32)
        sel = None
        if mask is not None:
            try:
                sel = np.broadcast_to(np.asarray(mask), x.shape)
            except ValueError:
                sel = None
        if x.valid is not None:
            sel = x.valid if sel is None else (sel & x.valid)
        if sel is not None and name in _REDUCE_IDENTITY:
            v = np.where(sel, v, _REDUCE_IDENTITY[name])
            if name == "mean":
                cnt = np.maximum(sel.sum(axis=axes, keepdims=keepdims), 1)
                r = np.sum(v, axis=axes, keepdims=keepdims) / cnt
                return -r if negate else r
        r = f(v, axis=axes, keepdims=keepdims)
        return -r if negate else r
    compute(engine, core.vector_cost(n, factor) if engine == VECTOR
            else engine_cost(engine, n, streams=1),
            [x], [out], run, "tensor_reduce", mask=mask)
    return out


def _make_reduce(name):
    def fn(x, axis=None, dtype=None, keepdims=False, mask=None, **kw):
        if kw:
            _unmodelled("nl." + name, kw)
        return reduce(name, x, axis, dtype, keepdims, mask)
    fn.__name__ = name
    fn.__doc__ = "Reduction (%s) along free axes." % name
    return fn


sum = _make_reduce("sum")
max = _make_reduce("max")
min = _make_reduce("min")
mean = _make_reduce("mean")
prod = _make_reduce("prod")
all = _make_reduce("all")
any = _make_reduce("any")
O.register(sum, "add")
O.register(max, "maximum")
O.register(min, "minimum")
O.register(prod, "multiply")


def var(x, axis=None, dtype=None, keepdims=False, mask=None, **kw):
    """Variance along free axes (bn_stats + bn_aggr on VectorE)."""
    if kw:
        _unmodelled("nl.var", kw)
    check_onchip(x, "var")
    axes = _axes(x, axis)
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if keepdims else \
        tuple(n for i, n in enumerate(x.shape) if i not in axes)
    out = core.tmp(shape, dt_of(dtype) if dtype is not None else x.st.dt, sbuf)
    n = free_size(x)

    def run():
        return np.var(value_of(x).astype(np.float32), axis=axes, keepdims=keepdims)
    cost = core.vector_cost(n) + core.vector_cost(1, runtime.CUR.costs.bn_aggr_factor)
    compute(VECTOR, cost, [x], [out],
            run, "bn_stats", mask=mask)
    return out


def softmax(x, axis=-1, dtype=None, mask=None, **kw):
    """Softmax along a free axis (max, exp with bias, sum, reciprocal, multiply)."""
    if kw:
        _unmodelled("nl.softmax", kw)
    _hw.reject("nl.softmax", "nl.max, nl.exp (or nisa.activation with a bias), nl.sum and "
               "nl.reciprocal")
    m = reduce("max", x, axis, keepdims=True)
    e = exp(subtract(x, m))
    s = reduce("sum", e, axis, keepdims=True)
    return multiply(e, reciprocal(s), dtype=dtype)


def rms_norm(x, w, axis=-1, n=None, epsilon=1e-6, dtype=None, **kw):
    """x * rsqrt(mean(x^2) + eps) * w along a free axis."""
    if kw:
        _unmodelled("nl.rms_norm", kw)
    _hw.reject("nl.rms_norm", "nl.square, nl.mean, nl.rsqrt and nl.multiply")
    sq = square(x)
    ms = reduce("mean", sq, axis, keepdims=True)
    r = rsqrt(add(ms, float(epsilon)))
    return multiply(multiply(x, r), w, dtype=dtype)


def cumsum(x, axis=-1, dtype=None, **kw):
    """Inclusive prefix sum along the last free axis (VectorE scan)."""
    if kw:
        _unmodelled("nl.cumsum", kw)
    check_onchip(x, "cumsum")
    out = core.tmp(x.shape, dt_of(dtype) if dtype is not None else x.st.dt, sbuf)
    compute(VECTOR, core.vector_cost(free_size(x), 2.0), [x], [out],
            lambda: np.cumsum(value_of(x).astype(np.float32), axis=axis), "tensor_tensor_scan")
    return out


def dropout(x, rate, dtype=None, mask=None, **kw):
    """Dropout with a fixed-seed mask (deterministic)."""
    if kw:
        _unmodelled("nl.dropout", kw)
    check_onchip(x, "dropout")
    out = alloc(x.shape, dt_of(dtype) if dtype is not None else x.st.dt, sbuf)
    r = float(rate) if not isinstance(rate, Tensor) else 0.0

    def run():
        rng = np.random.default_rng(0)
        keep = rng.random(x.shape) >= r
        return np.where(keep, value_of(x), 0)
    compute(VECTOR, core.vector_cost(free_size(x)), [x], [out], run, "dropout", mask=mask)
    return out


from . import hwrules as _hw  # noqa: E402  (namespace rules)
