"""`nki.isa` on ScalarE: activation and activation_reduce.
"""
import numpy as np

from ..data import dtypes as D
from ..data import ops as O
from ..machine import runtime
from ..data.buffers import Tensor
from ..machine.core import (check_onchip, compute, free_size, scalar_cost)
from ..errors import compile_error
from ..machine.timing import SCALAR
from .isa_base import (reduce_cmd, _bind, _reject, _is_new, _out, _check_same_shape, _f32, _opnd,
                       _skip_masked)


# ---- ScalarE ------------------------------------------------------------------------------
def _activation(fname, args, kw, force_reduce=False):
    new = _is_new(args, kw, 0)
    p = _bind(fname, args, kw, ["op", "data", "bias", "scale", "reduce_op", "reduce_res",
                                "reduce_cmd", "mask", "dtype", "name", "acc_flags"], new)
    _reject(fname, p, "acc_flags")
    cmd = p.get("reduce_cmd")
    if cmd is not None and not (type(cmd) is int and cmd == reduce_cmd.reset_reduce):
        # reset_reduce is what a reduction into reduce_res does by itself; the accumulating
        # forms (reduce, load_reduce) and the register-only ones are not modelled
        raise compile_error("nisa.%s: reduce_cmd=%r is not modelled by nkisim (only "
                            "reduce_cmd.reset_reduce)" % (fname, cmd))
    op = O.op_name(p["op"])
    data = p["data"]
    if op not in O.UNARY:
        raise compile_error("nisa.%s: unsupported activation function %r" % (fname, p["op"]))
    if not isinstance(data, Tensor):
        raise compile_error("nisa.%s: data must be a tile" % fname)
    check_onchip(data, "nisa." + fname)
    bias = p.get("bias")
    scale = p.get("scale", 1.0)
    if scale is None:
        scale = 1.0
    if bias is not None and not isinstance(bias, (Tensor, int, float, np.floating, np.ndarray)):
        raise compile_error("err_activation_bias_invalid_type: bias must be a tile or scalar")
    if not isinstance(scale, (Tensor, int, float, np.floating, np.ndarray)):
        raise compile_error("err_activation_scale_invalid_type: scale must be a tile or scalar")
    dt_def = data.st.dt if data.st.dt.is_float else D.FLOAT32
    dst, _ = _out(p, data.shape, dt_def)
    _check_same_shape(fname, dst, data.shape)
    reduce_op = O.op_name(p.get("reduce_op"))
    rres = p.get("reduce_res")
    if force_reduce and reduce_op is None:
        reduce_op = "add"
    ins = [data] + [t for t in (bias, scale) if isinstance(t, Tensor)]
    f = O.UNARY[op]
    mask = p.get("mask")

    nd = len(data.shape)

    def run():
        v = _f32(data.read())
        sv = _opnd(scale, nd)
        if not (isinstance(sv, (int, float)) and sv == 1.0):
            v = v * sv
        if bias is not None:
            v = v + _opnd(bias, nd)
        return f(v)
    n = free_size(data)
    cost = scalar_cost(n)
    if rres is not None or force_reduce:
        cost += runtime.CUR.costs.scalar_min_ii_cycles * runtime.CUR.ns_scalar
    compute(SCALAR, cost, ins, [dst], run, "nisa." + fname, mask=mask)
    if rres is not None:
        if reduce_op not in O.REDUCE:
            raise compile_error("nisa.%s: unsupported reduce_op %r" % (fname, p.get("reduce_op")))
        s = runtime.CUR
        if s.numerics:
            axes = tuple(range(1, len(dst.shape)))
            r = O.REDUCE[reduce_op](_skip_masked(reduce_op, _f32(dst.read()), mask),
                                    axis=axes, keepdims=True)
            rres.write(r.reshape(rres.shape) if r.size == rres.size else r)
        s.sched.issue_zero(SCALAR, [(dst.st.dep, dst.box)], [(rres.st.dep, rres.box)])
    return None if p.get("dst") is not None else dst




def activation(*args, **kw):
    """op(data * scale + bias) on ScalarE, optionally reducing along the free axis."""
    return _activation("activation", args, kw)


def activation_reduce(*args, **kw):
    """activation plus a free-axis reduction into reduce_res."""
    return _activation("activation_reduce", args, kw, force_reduce=True)
