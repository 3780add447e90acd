"""`nki.isa` DMA instructions: dma_copy, dma_transpose, dma_compute.
"""

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


def dma_transpose(*args, **kw):
    """Transposing DMA of a 2-D tile (HBM->SBUF or SBUF->SBUF)."""
    new = "dst" in kw or (len(args) >= 2 and isinstance(args[1], Tensor))
    p = _bind("dma_transpose", args, kw, ["src", "axes", "mask", "dtype", "dge_mode", "name"],
              new)
    src = p["src"]
    if len(src.shape) != 2:
        raise compile_error("nisa.dma_transpose: only 2-D tiles are supported by nkisim")
    if p.get("axes") is not None and tuple(p["axes"]) != (1, 0):
        raise compile_error("nisa.dma_transpose: axes=%r is not supported by nkisim (2-D "
                            "transpose only, axes=(1, 0))" % (p["axes"],))
    shape = (src.shape[1], src.shape[0])
    dst, _ = _out(p, shape, src.st.dt)
    _dma(dst, src, p.get("mask"), transpose=True, opname="nisa.dma_transpose")
    return None if p.get("dst") is not None else dst


def dma_compute(dst, srcs, reduce_op, scales=None, **kw):
    """dst = reduce_op over srcs (each optionally scaled), as DMA transfers."""
    op = O.op_name(reduce_op)
    s = runtime.CUR
    vals = None
    for i, src in enumerate(srcs):
        _dma(dst, src, opname="nisa.dma_compute")
        if s.numerics:
            v = _f32(src.read()).reshape(dst.shape)
            if scales is not None:
                v = v * scales[i]
            vals = v if vals is None else O.BINARY[op](vals, v)
    if s.numerics:
        dst.write(vals)
    return None


from . import hwrules as _hw  # noqa: E402  (namespace rules)
