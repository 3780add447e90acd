"""`nki.isa` DMA instructions: dma_copy, dma_transpose, dma_compute.
"""
import numpy as np

from ..data import ops as O
from ..machine import runtime
from ..data.buffers import Tensor
from ..machine.core import (dma as _dma)
from ..errors import compile_error
from .isa_base import (dge_mode, oob_mode, _bind, _reject, _out, _f32)


# ---- DMA ----------------------------------------------------------------------------------
def dma_copy(*args, **kw):
    """DMA between HBM and SBUF (or within either); converts dtype through fp32."""
    p = _bind("dma_copy", args, kw, ["dst", "src", "mask", "dst_rmw_op", "oob_mode",
                                     "dge_mode", "engine", "priority", "name"], False)
    _reject("dma_copy", p, "engine", "priority")
    if p.get("oob_mode") not in (None, oob_mode.error):
        raise compile_error("nisa.dma_copy: oob_mode=%r is not modelled by nkisim (only "
                            "oob_mode.error)" % (p.get("oob_mode"),))
    dst, src = p["dst"], p["src"]
    if isinstance(src, Tensor) and src.st.kind == "psum":
        _hw.reject("nisa.dma_copy reading PSUM", "nisa.tensor_copy from PSUM to SBUF first")
    dge = p.get("dge_mode")
    if dge is not None and dge == dge_mode.hwdge and isinstance(src, Tensor) \
            and isinstance(dst, Tensor) and src.st.dt is not dst.st.dt:
        raise compile_error("nisa.dma_copy: hardware DGE (dge_mode.hwdge) cannot convert "
                            "dtypes (%s -> %s)" % (src.st.dt.name, dst.st.dt.name))
    if p.get("dst_rmw_op") is not None:
        op = O.op_name(p["dst_rmw_op"])
        s = runtime.CUR
        if s.numerics:
            old = _f32(dst.read()).copy()
            _dma(dst, src, p.get("mask"), opname="nisa.dma_copy")
            dst.write(O.BINARY[op](old, _f32(dst.read())))
            return None
    _dma(dst, src, p.get("mask"), opname="nisa.dma_copy")
    return None


# the permutation of a DMA transpose by rank (NKI API: the only ones it performs)
_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def dma_transpose(*args, **kw):
    """Transposing DMA (HBM->SBUF or SBUF->SBUF) of a 2-, 3- or 4-D tile, permuted (1, 0),
    (2, 1, 0) or (3, 1, 2, 0) respectively."""
    new = "dst" in kw or (len(args) >= 2 and isinstance(args[1], Tensor))
    p = _bind("dma_transpose", args, kw, ["src", "axes", "mask", "dtype", "dge_mode",
                                          "priority", "oob_mode", "name"], new)
    _reject("dma_transpose", p, "priority")
    if p.get("oob_mode") not in (None, oob_mode.error):
        raise compile_error("nisa.dma_transpose: oob_mode=%r is not modelled by nkisim (only "
                            "oob_mode.error)" % (p.get("oob_mode"),))
    src = p["src"]
    if not isinstance(src, Tensor):
        raise compile_error("nisa.dma_transpose: src must be a tensor")
    perm = _TRANSPOSE_AXES.get(len(src.shape))
    if perm is None:
        raise compile_error("nisa.dma_transpose: src must be a 2-, 3- or 4-D tile, got shape %s"
                            % (list(src.shape),))
    axes = p.get("axes")
    if axes is not None and tuple(int(a) for a in axes) != perm:
        raise compile_error("nisa.dma_transpose: axes=%r is not a DMA transpose of a %d-D tile "
                            "(the only one is %r)" % (axes, len(src.shape), perm))
    shape = tuple(src.shape[a] for a in perm)
    dst, _ = _out(p, shape, src.st.dt)
    before = src.read() if len(perm) == 4 and runtime.CUR.numerics else None
    _dma(dst, src, p.get("mask"), transpose=True, opname="nisa.dma_transpose")
    if before is not None:
        # the transfer's own numerics reverse every axis; (3, 1, 2, 0) keeps the middle two
        dst.write(np.transpose(before, perm).reshape(dst.shape), p.get("mask"),
                  exact=src.st.dt is dst.st.dt)
    return None if p.get("dst") is not None else dst


def dma_compute(*args, **kw):
    """dst = reduce_op over srcs (each times its scale, in fp32) computed by the DMA engines;
    dst may be one of the sources (an accumulation: `srcs=[x, dst]`)."""
    p = _bind("dma_compute", args, kw, ["srcs", "reduce_op", "scales", "unique_indices",
                                        "oob_mode", "name"], True)
    dst, srcs = p.get("dst"), p.get("srcs")
    if not isinstance(dst, Tensor):
        raise compile_error("nisa.dma_compute: dst must be a tensor")
    if not isinstance(srcs, (list, tuple)) or not srcs or \
            not all(isinstance(t, Tensor) for t in srcs):
        raise compile_error("nisa.dma_compute: srcs must be a non-empty list of tensors")
    op = O.op_name(p.get("reduce_op"))
    if op not in O.BINARY:
        raise compile_error("nisa.dma_compute: unsupported reduce_op %r" % (p.get("reduce_op"),))
    scales = p.get("scales")
    if scales is not None and (not isinstance(scales, (list, tuple)) or
                               len(scales) != len(srcs)):
        raise compile_error("nisa.dma_compute: scales must give one number per source")
    if p.get("oob_mode") not in (None, oob_mode.error):
        raise compile_error("nisa.dma_compute: oob_mode=%r is not modelled by nkisim (only "
                            "oob_mode.error)" % (p.get("oob_mode"),))
    s = runtime.CUR
    vals = None
    if s.numerics:  # every source as it is before the instruction writes dst
        for i, src in enumerate(srcs):
            if src.size != dst.size:
                break  # the transfer below names the mismatch
            v = _f32(src.read()).reshape(dst.shape)
            if scales is not None:
                v = v * np.float32(scales[i])
            vals = v if vals is None else O.BINARY[op](vals, v)
    for src in srcs:
        _dma(dst, src, opname="nisa.dma_compute")
    if vals is not None:
        dst.write(vals)
    return None


from . import hwrules as _hw  # noqa: E402  (namespace rules)
