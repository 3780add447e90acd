"""`nki.isa` element-wise, reduction, copy and selection instructions on VectorE / GpSimdE.
"""
import numpy as np

from ..machine import constants as C
from ..machine import core
from ..data import dtypes as D
from ..data import ops as O
from ..machine import runtime
from ..data.buffers import Tensor, sbuf
from ..machine.core import (alloc, check_onchip, compute, dt_of, free_size, value_of, vector_cost,
                            scalar_cost, gpsimd_cost, perf_factor, copy_op, memset_tile)
from ..errors import compile_error
from ..machine.timing import GPSIMD, SCALAR, VECTOR
from .isa_base import (engine, _bind, _reject, _is_new, _out, _check_same_shape, _f32, _opnd,
                       _engine, _apply)


# ---- VectorE / GpSimdE --------------------------------------------------------------------
def tensor_tensor(*args, **kw):
    """Element-wise data1 op data2 (VectorE by default, or GpSimd)."""
    new = _is_new(args, kw, 2)
    p = _bind("tensor_tensor", args, kw, ["data1", "data2", "op", "engine", "mask", "dtype",
                                          "name"], new)
    a, b = p["data1"], p["data2"]
    op = O.op_name(p["op"])
    if op not in O.BINARY:
        raise compile_error("nisa.tensor_tensor: unsupported op %r" % (p["op"],))
    for t in (a, b):
        if not isinstance(t, Tensor):
            raise compile_error("nisa.tensor_tensor: data1 and data2 must be tiles")
        check_onchip(t, "nisa.tensor_tensor")
    if a.shape[0] != b.shape[0]:
        raise compile_error("nisa.tensor_tensor: partition sizes differ (%d vs %d)"
                            % (a.shape[0], b.shape[0]))
    if a.shape[0] > C.PMAX:
        raise compile_error("tensor_tensor data1 partition dimension %d exceeds maximum %d"
                            % (a.shape[0], C.PMAX))
    flat = _same_count_per_partition(a, b)
    if flat:
        # documented rule: the same partition size and number of elements per partition;
        # the engine pairs elements in access order, whatever the free axes' shapes
        shape, nd = tuple(a.shape), None
    else:
        shape, nd = core.tile_shape((a.shape, b.shape), "nisa.tensor_tensor")
    dt_def = D.promote(a.st.dt, b.st.dt)
    if op in O.BITWISE and not dt_def.is_int:
        raise compile_error("nisa.tensor_tensor: invalid dtype %s for bitwise op %s"
                            % (dt_def.name, op))
    dst, _ = _out(p, shape, dt_def)
    _check_same_shape("tensor_tensor", dst, shape)
    eng = _engine(p.get("engine"), VECTOR)
    n = free_size(dst)
    if eng == GPSIMD:
        cost = gpsimd_cost(n, dst.st.dt.itemsize, streams=3)
    elif eng == SCALAR:
        cost = scalar_cost(2 * n)
    else:
        cost = core.tensor_tensor_cost(op, a, b, dst)
    f = O.BINARY[op]
    bitwise = op in O.BITWISE

    def vals(t):
        v = value_of(t, nd)
        if flat and v is not None:
            v = v.reshape(shape)
        return v if bitwise else _f32(v)
    compute(eng, cost, [a, b], [dst], lambda: f(vals(a), vals(b)),
            "nisa.tensor_tensor", mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def _same_count_per_partition(a, b):
    """Operands of different free shapes (not broadcastable onto each other) holding the same
    number of elements per partition: [128, 8] with [128, 2, 4]."""
    if tuple(a.shape) == tuple(b.shape) or len(a.shape) < 1 or len(b.shape) < 1:
        return False
    try:
        core.tile_shape((a.shape, b.shape), "nisa.tensor_tensor")
        return False
    except Exception:
        pass
    return a.shape[0] == b.shape[0] and free_size(a) == free_size(b)




def tensor_scalar(*args, **kw):
    """(data op0 operand0) op1 operand1 with scalar or per-partition [P,1] operands."""
    new = _is_new(args, kw, 1)
    p = _bind("tensor_scalar", args, kw, ["data", "op0", "operand0", "reverse0", "op1",
                                          "operand1", "reverse1", "engine", "mask", "dtype",
                                          "name"], new)
    data = p["data"]
    if not isinstance(data, Tensor):
        raise compile_error("nisa.tensor_scalar: data must be a tile")
    check_onchip(data, "nisa.tensor_scalar")
    op0 = O.op_name(p["op0"])
    op1 = O.op_name(p.get("op1"))
    for o in (op0, op1):
        if o is not None and o not in O.BINARY:
            raise compile_error("nisa.tensor_scalar: unsupported op %r" % (o,))
    opnds = [p.get("operand0"), p.get("operand1")]
    ins = [data]
    for o in opnds:
        if isinstance(o, Tensor):
            check_onchip(o, "nisa.tensor_scalar")
            if free_size(o) != 1:
                raise compile_error("nisa.tensor_scalar: tensor operands must have shape [P, 1] "
                                    "(got %s)" % (list(o.shape),))
            ins.append(o)
    dst, _ = _out(p, data.shape, data.st.dt)
    _check_same_shape("tensor_scalar", dst, data.shape)
    chosen = p.get("engine") is not None and _engine(p.get("engine"), None) is not None
    eng = _engine(p.get("engine"), VECTOR)
    n = free_size(dst)
    if eng == SCALAR:
        cost = scalar_cost(n)
    elif eng == GPSIMD:
        cost = gpsimd_cost(n, dst.st.dt.itemsize, streams=2)
    else:
        cost = vector_cost(n, None, perf_factor("tensor_scalar", [data], [dst]))
        if not chosen and dst.st.dt.is_float:
            eng, cost = core.place_scalar_form("nisa.tensor_scalar", (op0, op1), n, cost)
    r0 = bool(p.get("reverse0", False))
    r1 = bool(p.get("reverse1", False))

    nd = len(data.shape)

    def run():
        v = _f32(data.read()) if data.st.dt.is_float else data.read()
        v = _apply(op0, v, _opnd(opnds[0], nd), r0)
        if op1 is not None:
            v = _apply(op1, v, _opnd(opnds[1], nd), r1)
        return v
    compute(eng, cost, ins, [dst], run, "nisa.tensor_scalar", mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def scalar_tensor_tensor(*args, **kw):
    """(data op0 operand0) op1 operand1, operand0 scalar/[P,1], operand1 a tile (VectorE)."""
    new = _is_new(args, kw, 1)
    p = _bind("scalar_tensor_tensor", args, kw, ["data", "op0", "operand0", "op1", "operand1",
                                                 "reverse0", "reverse1", "engine", "mask",
                                                 "dtype", "name"], new)
    data = p["data"]
    op0 = O.op_name(p["op0"])
    op1 = O.op_name(p["op1"])
    o0, o1 = p["operand0"], p["operand1"]
    ins = [data] + [t for t in (o0, o1) if isinstance(t, Tensor)]
    for t in ins:
        check_onchip(t, "nisa.scalar_tensor_tensor")
    dst, _ = _out(p, data.shape, data.st.dt)
    n = free_size(dst)
    r0 = bool(p.get("reverse0", False))
    r1 = bool(p.get("reverse1", False))

    nd = len(data.shape)

    def run():
        v = _apply(op0, _f32(data.read()), _opnd(o0, nd), r0)
        return _apply(op1, v, _opnd(o1, nd), r1)
    eng = _engine(p.get("engine"), VECTOR)
    if eng == GPSIMD:
        cost = gpsimd_cost(n, dst.st.dt.itemsize, streams=1 + len(ins))
    elif eng == VECTOR:
        cost = vector_cost(n, 2.0)
    else:
        raise compile_error("nisa.scalar_tensor_tensor runs on VectorE or GpSimdE (engine=%r)"
                            % (p.get("engine"),))
    compute(eng, cost, ins, [dst], run, "nisa.scalar_tensor_tensor", mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def tensor_reduce(*args, **kw):
    """Reduce along free axes (VectorE)."""
    new = _is_new(args, kw, 0)
    p = _bind("tensor_reduce", args, kw, ["op", "data", "axis", "negate", "keepdims", "mask",
                                          "dtype", "name"], new)
    from . import language as L
    op = O.op_name(p["op"])
    if op not in O.REDUCE:
        raise compile_error("nisa.tensor_reduce: unsupported op %r" % (p["op"],))
    data = p["data"]
    dst = p.get("dst")
    out = L.reduce(op, data, p.get("axis"), dtype=p.get("dtype"),
                   keepdims=bool(p.get("keepdims", False)) or (dst is not None and
                                                               len(dst.shape) == len(data.shape)),
                   mask=p.get("mask"), negate=bool(p.get("negate", False)), out=dst)
    return None if dst is not None else out


def tensor_partition_reduce(*args, **kw):
    """Reduce across partitions (GpSimd); result has one partition."""
    new = _is_new(args, kw, 0)
    p = _bind("tensor_partition_reduce", args, kw, ["op", "data", "mask", "dtype", "name"], new)
    op = O.op_name(p["op"])
    data = p["data"]
    check_onchip(data, "nisa.tensor_partition_reduce")
    shape = (1,) + tuple(data.shape[1:])
    dst, _ = _out(p, shape, data.st.dt)
    f = O.REDUCE[op]
    compute(GPSIMD, gpsimd_cost(free_size(data) * 4, data.st.dt.itemsize), [data], [dst],
            lambda: f(_f32(data.read()), axis=0, keepdims=True), "nisa.tensor_partition_reduce",
            mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def tensor_copy(*args, **kw):
    """Copy (and convert) a tile; also PSUM -> SBUF eviction."""
    new = _is_new(args, kw, 1)
    p = _bind("tensor_copy", args, kw, ["src", "engine", "mask", "dtype", "name"], new)
    src = p["src"]
    if not isinstance(src, Tensor):
        raise compile_error("nisa.tensor_copy: src must be a tile")
    check_onchip(src, "nisa.tensor_copy")
    dst, _ = _out(p, src.shape, src.st.dt)
    if dst.size != src.size:
        raise compile_error("nisa.tensor_copy: dst shape %s does not match src shape %s"
                            % (list(dst.shape), list(src.shape)))
    copy_op(dst, src, engine=_engine(p.get("engine"), VECTOR), mask=p.get("mask"),
            opname="nisa.tensor_copy")
    return None if p.get("dst") is not None else dst


def memset(*args, **kw):
    """Fill a tile with a constant."""
    new = _is_new(args, kw, 0)
    p = _bind("memset", args, kw, ["shape", "value", "dtype", "mask", "engine", "name"]
              if not new else ["value", "engine", "mask", "name", "dtype"], new)
    dst = p.get("dst")
    if dst is None:
        dst = alloc(tuple(p["shape"]), dt_of(p["dtype"]), sbuf)
    memset_tile(dst, p["value"], engine=_engine(p.get("engine"), VECTOR), mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def iota(*args, **kw):
    """Tile of index values from an index expression (GpSimd)."""
    new = "dst" in kw or (args and isinstance(args[0], Tensor))
    p = _bind("iota", args, kw, ["expr", "dtype", "mask", "name"], new)
    expr = p["expr"]
    vals = np.asarray(expr.values() if hasattr(expr, "values") else expr)
    shape = vals.shape if vals.ndim >= 2 else (vals.size, 1)
    dst, _ = _out(p, shape, D.INT32)
    compute(GPSIMD, gpsimd_cost(free_size(dst)), [], [dst],
            lambda: vals.reshape(dst.shape) if vals.size == dst.size else vals,
            "nisa.iota", mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def reciprocal(*args, **kw):
    """1/x on VectorE (8x slower than ScalarE)."""
    new = _is_new(args, kw, 1)
    p = _bind("reciprocal", args, kw, ["data", "mask", "dtype", "name", "engine"], new)
    data = p["data"]
    check_onchip(data, "nisa.reciprocal")
    dst, _ = _out(p, data.shape, data.st.dt)
    eng = _engine(p.get("engine"), VECTOR)
    n = free_size(data)
    if eng == SCALAR:
        cost = scalar_cost(n)
    elif eng == GPSIMD:
        cost = gpsimd_cost(n, dst.st.dt.itemsize, streams=2)
    elif eng == VECTOR:
        cost = vector_cost(n, runtime.CUR.costs.vector_reciprocal_factor)
    else:
        raise compile_error("nisa.reciprocal cannot run on TensorE")
    compute(eng, cost, [data], [dst], lambda: O.reciprocal(_f32(data.read())),
            "nisa.reciprocal", mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def tensor_tensor_scan(*args, **kw):
    """Scan along the last free axis: r[i] = (r[i-1] op0 data0[i]) op1 data1[i], r[-1] = initial."""
    new = _is_new(args, kw, 2)
    p = _bind("tensor_tensor_scan", args, kw, ["data0", "data1", "initial", "op0", "op1",
                                               "reverse0", "reverse1", "mask", "dtype",
                                               "name"], new)
    d0, d1 = p["data0"], p["data1"]
    op0, op1 = O.op_name(p["op0"]), O.op_name(p["op1"])
    init = p["initial"]
    ins = [d0, d1] + ([init] if isinstance(init, Tensor) else [])
    for t in ins:
        check_onchip(t, "nisa.tensor_tensor_scan")
    dst, _ = _out(p, d0.shape, D.promote(d0.st.dt, d1.st.dt))
    r0 = bool(p.get("reverse0", False))
    r1 = bool(p.get("reverse1", False))

    def run():
        a = _f32(d0.read())
        b = _f32(d1.read())
        cur = _opnd(init)
        if isinstance(cur, np.ndarray):
            cur = cur.reshape(a.shape[0], -1)[:, :1].reshape((a.shape[0],) + (1,) * 0)
        out = np.empty(a.shape, dtype=np.float32)
        for i in range(a.shape[-1]):
            cur = _apply(op0, cur, a[..., i], r0)
            cur = _apply(op1, cur, b[..., i], r1)
            out[..., i] = cur
        return out
    compute(VECTOR, vector_cost(free_size(d0), 2.0), ins, [dst], run, "nisa.tensor_tensor_scan",
            mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def bn_stats(*args, **kw):
    """Per-partition statistics of a tile (free size <= 512) for bn_aggr: [P, 6]
    (count, mean, sum of squared deviations, 0, 0, 0); masked-off elements are skipped."""
    new = _is_new(args, kw, 1)
    p = _bind("bn_stats", args, kw, ["data", "mask", "dtype", "name"], new)
    data = p["data"]
    check_onchip(data, "nisa.bn_stats")
    n = free_size(data)
    if n > C.BN_STATS_FMAX:
        raise compile_error("nisa.bn_stats: free size %d exceeds bn_stats_fmax %d"
                            % (n, C.BN_STATS_FMAX))
    dst, _ = _out(p, (data.shape[0], 6), D.FLOAT32)
    mask = p.get("mask")

    def run():
        v = _f32(data.read()).reshape(data.shape[0], -1).astype(np.float64)
        sel = np.ones(v.shape, dtype=bool)
        if mask is not None:
            sel &= np.broadcast_to(np.asarray(mask), data.shape).reshape(v.shape)
        if data.valid is not None:
            sel &= data.valid.reshape(v.shape)
        cnt = sel.sum(axis=1)
        safe = np.maximum(cnt, 1)
        mean = np.where(sel, v, 0.0).sum(axis=1) / safe
        m2 = np.where(sel, (v - mean[:, None]) ** 2, 0.0).sum(axis=1)
        out = np.zeros((data.shape[0], 6), dtype=np.float32)
        out[:, 0] = cnt
        out[:, 1] = mean
        out[:, 2] = m2
        return out
    compute(VECTOR, vector_cost(n), [data], [dst], run, "nisa.bn_stats", in_mask=mask)
    return None if p.get("dst") is not None else dst


def bn_aggr(*args, **kw):
    """Combine bn_stats groups ([P, 6k]) into [P, 2] = (mean, variance)."""
    new = _is_new(args, kw, 1)
    p = _bind("bn_aggr", args, kw, ["data", "mask", "dtype", "name"], new)
    _reject("bn_aggr", p, "mask")
    data = p["data"]
    check_onchip(data, "nisa.bn_aggr")
    dst, _ = _out(p, (data.shape[0], 2), D.FLOAT32)

    def run():
        v = data.read().reshape(data.shape[0], -1, 6).astype(np.float64)
        cnt = v[:, :, 0]
        mean = v[:, :, 1]
        m2 = v[:, :, 2]
        tot = np.maximum(cnt.sum(axis=1), 1)
        gm = (cnt * mean).sum(axis=1) / tot
        gm2 = (m2 + cnt * (mean - gm[:, None]) ** 2).sum(axis=1)
        out = np.stack([gm, gm2 / tot], axis=1).astype(np.float32)
        return out.reshape(dst.shape)
    compute(VECTOR, vector_cost(free_size(data), runtime.CUR.costs.bn_aggr_factor), [data], [dst], run,
            "nisa.bn_aggr")
    return None if p.get("dst") is not None else dst


def affine_select(*args, **kw):
    """Element-wise select by a predicate on index expressions (GpSimd)."""
    new = "dst" in kw
    p = _bind("affine_select", args, kw, ["pred", "on_true_tile", "on_false_value", "mask",
                                          "dtype", "name"], new)
    pred = np.asarray(p["pred"])
    t = p["on_true_tile"]
    fv = p["on_false_value"]
    check_onchip(t, "nisa.affine_select")
    if t.st.kind == "psum":
        # GpSimd cannot read PSUM: the compiler stages the tile through SBUF (VectorE copy)
        staged = core.tmp(t.shape, t.st.dt, sbuf)
        copy_op(staged, t)
        t = staged
    dst, _ = _out(p, t.shape, t.st.dt)
    compute(GPSIMD, gpsimd_cost(free_size(t), t.st.dt.itemsize), [t], [dst],
            lambda: np.where(np.broadcast_to(pred, t.shape), _f32(t.read()), fv),
            "nisa.affine_select", mask=p.get("mask"))
    return None if p.get("dst") is not None else dst


def tensor_scalar_reduce(*args, **kw):
    """tensor_scalar followed by a free-axis reduction into reduce_res (VectorE)."""
    new = _is_new(args, kw, 1)
    p = _bind("tensor_scalar_reduce", args, kw, ["data", "op0", "operand0", "reduce_op",
                                                 "reduce_res", "reverse0", "mask", "dtype",
                                                 "name"], new)
    _reject("tensor_scalar_reduce", p, "mask")
    data = p["data"]
    dst = p.get("dst")
    # the reduce runs on VectorE: the element-wise part stays there too
    kw2 = dict(data=data, op0=p["op0"], operand0=p["operand0"],
               reverse0=p.get("reverse0", False), dtype=p.get("dtype"), engine=engine.vector)
    if dst is not None:
        kw2["dst"] = dst
        tensor_scalar(**kw2)
        out = dst
    else:
        out = tensor_scalar(**kw2)
    rres = p["reduce_res"]
    rop = O.op_name(p["reduce_op"])
    s = runtime.CUR
    if s.numerics:
        r = O.REDUCE[rop](_f32(out.read()), axis=tuple(range(1, len(out.shape))), keepdims=True)
        rres.write(r.reshape(rres.shape))
    s.sched.issue(VECTOR, s.costs.vector_min_ii_cycles * s.ns_vector, [(out.st.dep, out.box)],
                  [(rres.st.dep, rres.box)])
    return None if dst is not None else out


def max8(*args, **kw):
    """Top-8 values per partition, descending (VectorE)."""
    new = _is_new(args, kw, 1)
    p = _bind("max8", args, kw, ["src", "mask", "dtype", "name"], new)
    _reject("max8", p, "mask")
    src = p["src"]
    check_onchip(src, "nisa.max8")
    dst, _ = _out(p, (src.shape[0], 8), src.st.dt)
    compute(VECTOR, vector_cost(free_size(src)), [src], [dst],
            lambda: -np.sort(-_f32(src.read()).reshape(src.shape[0], -1), axis=1)[:, :8],
            "nisa.max8")
    return None if p.get("dst") is not None else dst


def nc_find_index8(*args, **kw):
    """Indices of the 8 given values in each partition (VectorE)."""
    new = _is_new(args, kw, 1)
    p = _bind("nc_find_index8", args, kw, ["data", "vals", "mask", "dtype", "name"], new)
    _reject("nc_find_index8", p, "mask")
    data, vals = p["data"], p["vals"]
    dst, _ = _out(p, (data.shape[0], 8), D.UINT32)

    def run():
        d = _f32(data.read()).reshape(data.shape[0], -1)
        v = _f32(vals.read()).reshape(data.shape[0], -1)[:, :8]
        out = np.zeros((d.shape[0], 8), dtype=np.int64)
        for j in range(8):
            out[:, j] = np.argmax(d == v[:, j:j + 1], axis=1)
        return out
    compute(VECTOR, vector_cost(free_size(data)), [data, vals], [dst], run, "nisa.nc_find_index8")
    return None if p.get("dst") is not None else dst


def dropout(*args, **kw):
    """Dropout with a deterministic mask."""
    new = _is_new(args, kw, 1)
    p = _bind("dropout", args, kw, ["data", "prob", "mask", "dtype", "name"], new)
    _reject("dropout", p, "mask")
    data = p["data"]
    dst, _ = _out(p, data.shape, data.st.dt)
    prob = p["prob"]

    def run():
        r = float(prob) if not isinstance(prob, Tensor) else float(np.ravel(prob.read())[0])
        keep = np.random.default_rng(0).random(data.shape) >= r
        return np.where(keep, _f32(data.read()), 0)
    compute(VECTOR, vector_cost(free_size(data)), [data], [dst], run, "nisa.dropout")
    return None if p.get("dst") is not None else dst
