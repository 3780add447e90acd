"""`nki.isa` predicated copies, selections and running reductions on VectorE (NKI 0.3+ API,
dst first):

- `tensor_copy_predicated(dst, src, predicate, reverse_pred=False)`: dst = src where the
  predicate is nonzero (its negation with reverse_pred); elsewhere dst is left unmodified.
  src may be a number.
- `range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd,
  reduce_res, reduce_op=nl.maximum, range_start=0, on_false_value)`: an element whose free
  index + range_start satisfies comp_op0(idx, bound0) and comp_op1(idx, bound1) (bounds
  [P, 1]) is kept, others become on_false_value; reduce_res gets the row maximum.
- `select_reduce(dst, predicate, on_true, on_false, reduce_res, reduce_cmd, reduce_op,
  reverse_pred)`: dst = where(predicate, on_true, on_false) with an optional row maximum.
- `tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1, reduce_cmd)`: a running op1 of
  (src op0 imm0) along the free elements.

The row maximum goes through VectorE's accumulator (shared by these instructions):
reduce_cmd.reset_reduce starts it from -inf, reduce_cmd.reduce continues the previous
instruction's, idle leaves it (and needs no reduce_res). Only maximum is a reduce_op, as
documented.
"""
import numpy as np

from ..data import ops as O
from ..data.buffers import Tensor
from ..errors import compile_error
from ..machine import runtime
from ..machine.core import check_onchip, compute, free_size, vector_cost
from ..machine.timing import VECTOR
from .isa_base import _bind, _f32, reduce_cmd

_COMPARE = ("equal", "less", "less_equal", "greater", "greater_equal")


def _tile(opname, what, t):
    if not isinstance(t, Tensor):
        raise compile_error("nisa.%s: %s must be a tile" % (opname, what))
    check_onchip(t, "nisa." + opname)
    return t


def _same_size(opname, a, b, what):
    if a.shape[0] != b.shape[0] or free_size(a) != free_size(b):
        raise compile_error("nisa.%s: %s %s and dst %s must have the same partitions and "
                            "elements per partition" % (opname, what, list(b.shape),
                                                        list(a.shape)))


def _rows(v, t):
    return np.asarray(v, dtype=np.float32).reshape(t.shape[0], -1)


def _accumulate(opname, cmd, rows_max, reduce_res, reduce_op):
    """VectorE's accumulator after a row maximum `rows_max` ([P]) under reduce_cmd `cmd`;
    writes reduce_res when given. Without numerics rows_max is None."""
    if reduce_op is not None and O.op_name(reduce_op) not in ("maximum", "max"):
        raise compile_error("nisa.%s: reduce_op must be nl.maximum (the only one the "
                            "instruction supports), got %r" % (opname, reduce_op))
    cmd = reduce_cmd.idle if cmd is None else cmd
    if cmd not in (reduce_cmd.idle, reduce_cmd.reset, reduce_cmd.reduce,
                   reduce_cmd.reset_reduce):
        raise compile_error("nisa.%s: reduce_cmd=%r is not modelled by nkisim (idle, reset, "
                            "reduce, reset_reduce)" % (opname, cmd))
    s = runtime.CUR
    acc = getattr(s, "vector_accumulator", None)
    if cmd in (reduce_cmd.reset, reduce_cmd.reset_reduce) or acc is None or \
            (rows_max is not None and acc.shape != rows_max.shape):
        acc = None if rows_max is None else np.full(rows_max.shape, -np.inf, np.float32)
    if cmd in (reduce_cmd.reduce, reduce_cmd.reset_reduce) and rows_max is not None:
        acc = np.maximum(acc, rows_max)
    s.vector_accumulator = acc
    if reduce_res is not None:
        if cmd == reduce_cmd.idle:
            raise compile_error("nisa.%s: reduce_res needs reduce_cmd reset_reduce or reduce"
                                % opname)
        _tile(opname, "reduce_res", reduce_res)
        if reduce_res.size != (acc.size if acc is not None else reduce_res.shape[0]):
            raise compile_error("nisa.%s: reduce_res must hold one value per partition"
                                % opname)
        if acc is not None:
            reduce_res.write(acc.reshape(reduce_res.shape))
        s.sched.issue_zero(VECTOR, [], [(reduce_res.st.dep, reduce_res.box)])


def tensor_copy_predicated(*args, **kw):
    """dst = src where predicate (not predicate with reverse_pred); dst unmodified elsewhere
    (VectorE)."""
    p = _bind("tensor_copy_predicated", args, kw, ["src", "predicate", "reverse_pred", "name"],
              True)
    op = "tensor_copy_predicated"
    dst = _tile(op, "dst", p.get("dst"))
    pred = _tile(op, "predicate", p.get("predicate"))
    src = p.get("src")
    _same_size(op, dst, pred, "predicate")
    if not pred.st.dt.is_int:
        raise compile_error("nisa.tensor_copy_predicated: predicate must be an integer tile "
                            "(uint8/uint16/uint32), got %s" % pred.st.dt.name)
    ins = [pred]
    if isinstance(src, Tensor):
        _tile(op, "src", src)
        _same_size(op, dst, src, "src")
        if src.st.kind == "psum" and pred.st.kind == "psum":
            raise compile_error("nisa.tensor_copy_predicated: src and predicate cannot both "
                                "be in PSUM")
        ins.append(src)
    elif not isinstance(src, (int, float, np.integer, np.floating)):
        raise compile_error("nisa.tensor_copy_predicated: src must be a tile or a number")
    reverse = bool(p.get("reverse_pred", False))

    def run():
        m = pred.read().reshape(dst.shape) != 0
        if reverse:
            m = ~m
        v = src.read().reshape(dst.shape) if isinstance(src, Tensor) else src
        dst.write(np.broadcast_to(v, dst.shape), mask=m)
        return None
    k = runtime.CUR.costs
    compute(VECTOR, vector_cost(free_size(dst), k.tensor_copy_predicated_cycles_per_elem), ins,
            [dst], run, "nisa.tensor_copy_predicated")
    return None


def range_select(*args, **kw):
    """Keep on_true_tile where comp_op0(i + range_start, bound0) and comp_op1(i + range_start,
    bound1) for free index i, else on_false_value; row maximum into reduce_res (VectorE)."""
    p = _bind("range_select", args, kw, ["on_true_tile", "comp_op0", "comp_op1", "bound0",
                                         "bound1", "reduce_cmd", "reduce_res", "reduce_op",
                                         "range_start", "on_false_value", "name"], True)
    op = "range_select"
    s = runtime.CUR
    if s is not None and s.target.name == "trn1":
        raise compile_error("nisa.range_select is available only on NeuronCore-v3 or newer "
                            "(trn2, trn3)")
    dst = _tile(op, "dst", p.get("dst"))
    t = _tile(op, "on_true_tile", p.get("on_true_tile"))
    _same_size(op, dst, t, "on_true_tile")
    ops = []
    for name in ("comp_op0", "comp_op1"):
        o = O.op_name(p.get(name))
        if o not in _COMPARE:
            raise compile_error("nisa.range_select: %s must be one of nl.%s, got %r"
                                % (name, ", nl.".join(_COMPARE), p.get(name)))
        ops.append(o)
    bounds = [_tile(op, b, p.get(b)) for b in ("bound0", "bound1")]
    for b in bounds:
        if b.shape[0] != t.shape[0] or free_size(b) != 1:
            raise compile_error("nisa.range_select: bounds must be [%d, 1] tiles, got %s"
                                % (t.shape[0], list(b.shape)))
    start = p.get("range_start", 0) or 0
    if not isinstance(start, (int, np.integer)):
        raise compile_error("nisa.range_select: range_start must be a compile-time integer")
    fv = p.get("on_false_value", -3.4028235e+38)
    fv = -3.4028235e+38 if fv is None or fv is Ellipsis else fv
    rres = p.get("reduce_res")
    cmd = p.get("reduce_cmd", reduce_cmd.reset_reduce)
    cmd = reduce_cmd.reset_reduce if cmd is None else cmd
    state = {}

    def run():
        v = _rows(_f32(t.read()), t)
        idx = (start + np.arange(v.shape[1], dtype=np.float32))[None, :]
        b0, b1 = (_rows(b.read(), b) for b in bounds)
        keep = O.BINARY[ops[0]](idx, b0).astype(bool) & O.BINARY[ops[1]](idx, b1).astype(bool)
        out = np.where(keep, v, np.float32(fv))
        state["max"] = out.max(axis=1)
        return out.reshape(dst.shape)
    k = s.costs
    compute(VECTOR, vector_cost(free_size(dst), k.range_select_cycles_per_elem),
            [t] + bounds, [dst], run, "nisa.range_select")
    _accumulate(op, cmd, state.get("max"), rres, p.get("reduce_op"))
    return None


def select_reduce(*args, **kw):
    """dst = where(predicate, on_true, on_false) (predicate negated with reverse_pred), with an
    optional row maximum into reduce_res (VectorE)."""
    p = _bind("select_reduce", args, kw, ["predicate", "on_true", "on_false", "reduce_res",
                                          "reduce_cmd", "reduce_op", "reverse_pred", "name"], True)
    op = "select_reduce"
    dst = _tile(op, "dst", p.get("dst"))
    pred = _tile(op, "predicate", p.get("predicate"))
    on_true = _tile(op, "on_true", p.get("on_true"))
    _same_size(op, dst, pred, "predicate")
    _same_size(op, dst, on_true, "on_true")
    if pred.st.kind == "psum" and on_true.st.kind == "psum":
        raise compile_error("nisa.select_reduce: on_true and predicate cannot both be in PSUM")
    on_false = p.get("on_false")
    ins = [pred, on_true]
    if isinstance(on_false, Tensor):
        _tile(op, "on_false", on_false)
        if on_false.shape[0] != dst.shape[0] or free_size(on_false) != 1:
            raise compile_error("nisa.select_reduce: a tile on_false must be [%d, 1], got %s"
                                % (dst.shape[0], list(on_false.shape)))
        ins.append(on_false)
    elif not isinstance(on_false, (int, float, np.integer, np.floating)):
        raise compile_error("nisa.select_reduce: on_false must be a number or a [P, 1] tile")
    reverse = bool(p.get("reverse_pred", False))
    state = {}

    def run():
        m = _rows(pred.read(), pred) != 0
        if reverse:
            m = ~m
        f = _rows(on_false.read(), on_false) if isinstance(on_false, Tensor) \
            else np.float32(on_false)
        out = np.where(m, _rows(_f32(on_true.read()), on_true), f)
        state["max"] = out.max(axis=1)
        return out.reshape(dst.shape)
    k = runtime.CUR.costs
    compute(VECTOR, vector_cost(free_size(dst), k.select_reduce_cycles_per_elem), ins, [dst],
            run, "nisa.select_reduce")
    _accumulate(op, p.get("reduce_cmd"), state.get("max"), p.get("reduce_res"),
                p.get("reduce_op"))
    return None


_SCAN_START = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf,
               "minimum": np.inf}


def tensor_scalar_cumulative(*args, **kw):
    """A running op1 over (src op0 imm0) along each partition's free elements:
    reg = op1(src[i] op0 imm0, reg); dst[i] = reg. The running value starts from op1's
    identity (reset_reduce), from imm1 (load_reduce) or from VectorE's accumulator (reduce)
    and is left in the accumulator (VectorE)."""
    p = _bind("tensor_scalar_cumulative", args, kw, ["src", "op0", "op1", "imm0", "imm1",
                                                     "reduce_cmd", "name"], True)
    op = "tensor_scalar_cumulative"
    dst, src = _tile(op, "dst", p.get("dst")), _tile(op, "src", p.get("src"))
    _same_size(op, dst, src, "src")
    for t in (dst, src):
        if t.st.dt.name in ("int32", "uint32"):
            raise compile_error("nisa.tensor_scalar_cumulative: int32/uint32 tiles are not "
                                "supported (%s)" % t.st.dt.name)
    op0, op1 = O.op_name(p.get("op0")), O.op_name(p.get("op1"))
    if op0 not in O.BINARY:
        raise compile_error("nisa.tensor_scalar_cumulative: unsupported op0 %r" % (p.get("op0"),))
    if op1 not in _SCAN_START:
        raise compile_error("nisa.tensor_scalar_cumulative: op1 must be add, subtract, "
                            "multiply, maximum or minimum, got %r" % (p.get("op1"),))
    cmd = p.get("reduce_cmd", reduce_cmd.reset_reduce)
    cmd = reduce_cmd.reset_reduce if cmd is None else cmd
    if cmd not in (reduce_cmd.reset_reduce, reduce_cmd.reduce, reduce_cmd.load_reduce):
        raise compile_error("nisa.tensor_scalar_cumulative: reduce_cmd must be reset_reduce, "
                            "reduce or load_reduce")
    imms = [p.get("imm0"), p.get("imm1")]
    if cmd == reduce_cmd.load_reduce and imms[1] is None:
        raise compile_error("nisa.tensor_scalar_cumulative: load_reduce starts from imm1, "
                            "which is missing")
    ins = [src] + [t for t in imms if isinstance(t, Tensor)]
    for t in ins[1:]:
        if t.shape[0] != src.shape[0] or free_size(t) != 1:
            raise compile_error("nisa.tensor_scalar_cumulative: a tile immediate must be "
                                "[%d, 1]" % src.shape[0])
    s = runtime.CUR

    def imm(v):
        return _rows(v.read(), v) if isinstance(v, Tensor) else np.float32(v)

    def run():
        v = _rows(_f32(src.read()), src)
        v = O.BINARY[op0](v, imm(imms[0])).astype(np.float32)
        parts = v.shape[0]
        acc = getattr(s, "vector_accumulator", None)
        if cmd == reduce_cmd.load_reduce:
            reg = np.broadcast_to(imm(imms[1]), (parts, 1)).reshape(parts).astype(np.float32)
        elif cmd == reduce_cmd.reduce and acc is not None and acc.shape == (parts,):
            reg = acc.astype(np.float32)
        else:
            reg = np.full(parts, _SCAN_START[op1], np.float32)
        out = np.empty_like(v)
        f = O.BINARY[op1]
        for i in range(v.shape[1]):
            reg = f(v[:, i], reg).astype(np.float32)
            out[:, i] = reg
        s.vector_accumulator = reg
        return out.reshape(dst.shape)
    compute(VECTOR, vector_cost(free_size(src), s.costs.tensor_scalar_cumulative_cycles_per_elem),
            ins, [dst], run, "nisa.tensor_scalar_cumulative")
    return None
