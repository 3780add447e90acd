"""`nki.isa` instructions of NeuronCore-v4 (trn3) beyond MX:

- `exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=idle, reduce_init=0.0)`
  (VectorE): dst = exp(src - max_value) (max_value a number or a [P, 1] tile), the row sums
  accumulated in VectorE's accumulator (shared with range_select / select_reduce, see
  isa_predicated) under reduce_cmd; load_reduce starts it from reduce_init.
- `activate2(dst, op, data, imm0, imm1, op0, op1, relu_param=0.0, reverse0, reverse1,
  reduce_op, reduce_res, reduce_cmd)` (ScalarE): op((data op0 imm0) op1 imm1), with
  nl.prelu taking relu_param as its negative slope, and an optional row reduction (add,
  maximum) into reduce_res.
"""
import numpy as np

from ..data import ops as O
from ..data.buffers import Tensor
from ..errors import compile_error
from ..machine import runtime
from ..machine.core import check_onchip, compute, free_size, scalar_cost, vector_cost
from ..machine.timing import SCALAR, VECTOR
from .isa_base import _apply, _bind, _f32, reduce_cmd

_PAIRS = {("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"),
          ("add", "bypass"), ("subtract", "bypass"), ("bypass", "bypass")}


def _trn3(opname):
    s = runtime.CUR
    if s is not None and s.target.name != "trn3":
        raise compile_error("nisa.%s is available only on NeuronCore-v4 (trn3), not on %s"
                            % (opname, s.target.name))


def _tile(opname, what, t):
    if not isinstance(t, Tensor):
        raise compile_error("nisa.%s: %s must be a tile" % (opname, what))
    check_onchip(t, "nisa." + opname)
    return t


def _per_row(opname, what, v, parts):
    """A number, or a [P, 1] tile's values as a [P, 1] array."""
    if isinstance(v, Tensor):
        _tile(opname, what, v)
        if v.shape[0] != parts or free_size(v) != 1:
            raise compile_error("nisa.%s: a tile %s must be [%d, 1], got %s"
                                % (opname, what, parts, list(v.shape)))
        return None if v.read() is None else _f32(v.read()).reshape(parts, 1)
    if not isinstance(v, (int, float, np.integer, np.floating)):
        raise compile_error("nisa.%s: %s must be a number or a [P, 1] tile" % (opname, what))
    return np.float32(v)


def exponential(*args, **kw):
    """exp(src - max_value) on VectorE with the row sums kept in its accumulator (trn3)."""
    p = _bind("exponential", args, kw, ["src", "max_value", "reduce_res", "reduce_cmd",
                                        "reduce_init", "name"], True)
    op = "exponential"
    _trn3(op)
    dst, src = _tile(op, "dst", p.get("dst")), _tile(op, "src", p.get("src"))
    if dst.shape[0] != src.shape[0] or free_size(dst) != free_size(src):
        raise compile_error("nisa.exponential: dst %s and src %s differ in size"
                            % (list(dst.shape), list(src.shape)))
    if len(src.shape) > 4:
        raise compile_error("nisa.exponential: src has at most 3 free dimensions")
    cmd = p.get("reduce_cmd")
    cmd = reduce_cmd.idle if cmd is None else cmd
    init = p.get("reduce_init", 0.0)
    init = 0.0 if init is None else init
    if cmd != reduce_cmd.load_reduce and not (isinstance(init, (int, float)) and init == 0):
        raise compile_error("nisa.exponential: reduce_init is used only with "
                            "reduce_cmd.load_reduce")
    mx = p.get("max_value", 0.0)
    ins = [src] + [t for t in (mx, init) if isinstance(t, Tensor)]
    parts = src.shape[0]
    rres = p.get("reduce_res")
    state = {}

    def run():
        v = _f32(src.read()).reshape(parts, -1)
        out = np.exp(v - _per_row(op, "max_value", mx, parts))
        state["sum"] = out.sum(axis=1, dtype=np.float32)
        return out.reshape(dst.shape)
    compute(VECTOR, vector_cost(free_size(src)), ins, [dst], run, "nisa.exponential")
    s = runtime.CUR
    if cmd not in (reduce_cmd.idle, reduce_cmd.reset, reduce_cmd.reduce,
                   reduce_cmd.reset_reduce, reduce_cmd.load_reduce):
        raise compile_error("nisa.exponential: unknown reduce_cmd %r" % (cmd,))
    acc = getattr(s, "vector_accumulator", None)
    if cmd in (reduce_cmd.reset, reduce_cmd.reset_reduce, reduce_cmd.load_reduce) or \
            acc is None or acc.shape != (parts,):
        acc = np.zeros(parts, np.float32)
    if cmd == reduce_cmd.load_reduce and "sum" in state:
        acc = acc + np.reshape(_per_row(op, "reduce_init", init, parts), -1)
    if cmd in (reduce_cmd.reduce, reduce_cmd.reset_reduce, reduce_cmd.load_reduce) and \
            "sum" in state:
        acc = acc + state["sum"]
    s.vector_accumulator = acc
    if rres is not None:
        if cmd in (reduce_cmd.idle, reduce_cmd.reset):
            raise compile_error("nisa.exponential: reduce_res needs reduce_cmd reset_reduce, "
                                "reduce or load_reduce")
        _tile(op, "reduce_res", rres)
        if rres.size != parts:
            raise compile_error("nisa.exponential: reduce_res must hold one value per "
                                "partition")
        rres.write(acc.reshape(rres.shape))
        s.sched.issue_zero(VECTOR, [(dst.st.dep, dst.box)], [(rres.st.dep, rres.box)])
    return None


def activate2(*args, **kw):
    """op((data op0 imm0) op1 imm1) on ScalarE, optionally reduced per row (trn3)."""
    p = _bind("activate2", args, kw, ["op", "data", "imm0", "imm1", "op0", "op1", "relu_param",
                                      "reverse0", "reverse1", "reduce_op", "reduce_res",
                                      "reduce_cmd", "name"], True)
    name = "activate2"
    _trn3(name)
    dst, data = _tile(name, "dst", p.get("dst")), _tile(name, "data", p.get("data"))
    if dst.shape[0] != data.shape[0] or free_size(dst) != free_size(data):
        raise compile_error("nisa.activate2: dst %s and data %s differ in size"
                            % (list(dst.shape), list(data.shape)))
    fn = O.op_name(p.get("op"))
    if fn != "prelu" and fn not in O.UNARY:
        raise compile_error("nisa.activate2: unsupported activation function %r" % (p.get("op"),))
    op0 = O.op_name(p.get("op0")) or "bypass"
    op1 = O.op_name(p.get("op1")) or "bypass"
    if (op0, op1) not in _PAIRS:
        raise compile_error("nisa.activate2: (op0, op1) = (%s, %s) is not one of the supported "
                            "pairs %s" % (op0, op1, sorted(_PAIRS)))
    rop = O.op_name(p.get("reduce_op"))
    rres = p.get("reduce_res")
    if rop is not None and rop not in ("add", "maximum", "max"):
        raise compile_error("nisa.activate2: reduce_op must be nl.add or nl.maximum")
    if rres is not None and rop is None:
        raise compile_error("nisa.activate2: reduce_res needs a reduce_op")
    cmd = p.get("reduce_cmd")
    if cmd not in (None, reduce_cmd.idle, reduce_cmd.reset_reduce):
        raise compile_error("nisa.activate2: reduce_cmd=%r is not modelled by nkisim (idle or "
                            "reset_reduce)" % (cmd,))
    parts = data.shape[0]
    imms = [p.get("imm0"), p.get("imm1"), p.get("relu_param", 0.0)]
    imms[2] = 0.0 if imms[2] is None else imms[2]
    ins = [data] + [t for t in imms if isinstance(t, Tensor)]
    r0, r1 = bool(p.get("reverse0", False)), bool(p.get("reverse1", False))
    state = {}

    def run():
        v = _f32(data.read()).reshape(parts, -1)
        i0, i1, alpha = (_per_row(name, w, x, parts) for w, x in
                         zip(("imm0", "imm1", "relu_param"), imms))
        if op0 != "bypass":
            v = _apply(op0, v, i0, r0)
        if op1 != "bypass":
            v = _apply(op1, v, i1, r1)
        v = np.where(v > 0, v, v * alpha) if fn == "prelu" else O.UNARY[fn](v)
        v = np.asarray(v, dtype=np.float32)
        if rop is not None:
            state["r"] = v.sum(axis=1) if rop == "add" else v.max(axis=1)
        return v.reshape(dst.shape)
    n = free_size(data)
    cost = scalar_cost(n)
    if rres is not None:
        cost += runtime.CUR.costs.scalar_min_ii_cycles * runtime.CUR.ns_scalar
    compute(SCALAR, cost, ins, [dst], run, "nisa.activate2")
    if rres is not None:
        _tile(name, "reduce_res", rres)
        if rres.size != parts:
            raise compile_error("nisa.activate2: reduce_res must hold one value per partition")
        if "r" in state:
            rres.write(state["r"].reshape(rres.shape))
        runtime.CUR.sched.issue_zero(SCALAR, [(dst.st.dep, dst.box)],
                                     [(rres.st.dep, rres.box)])
    return None
