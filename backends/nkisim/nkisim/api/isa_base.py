"""The shared part of `nki.isa`: its enums, the old-API engine constants, and the argument
binding every instruction uses (both API styles: the new one with an explicit `dst` first,
positionally or by keyword, and no return value; the old one that returns a new tile and
may take `dtype=` / `mask=`).
"""
import numpy as np

from ..machine import core
from ..data import ops as O
from ..machine import runtime
from ..data.buffers import Tensor, sbuf
from ..machine.core import (dt_of, value_of)
from ..errors import compile_error
from ..machine.timing import GPSIMD, SCALAR, TENSOR, VECTOR


# ---- enums --------------------------------------------------------------------------------
class engine:
    unknown = 0
    tensor = 1
    scalar = 2
    activation = 2
    gpsimd = 3
    pool = 3
    dma = 4
    vector = 5
    sync = 6


_ENGINE_MAP = {1: TENSOR, 2: SCALAR, 3: GPSIMD, 5: VECTOR}


def _engine(e, default):
    if e is None:
        return default
    if isinstance(e, str):
        e = getattr(engine, e, 0)
    return _ENGINE_MAP.get(int(e), default)


class dge_mode:
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode:
    error = 0
    skip = 1


class reduce_cmd:
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class matmul_perf_mode:
    none = 0
    double_row = 1
    double_row_gen3 = 1


class dma_engine:
    """The DMA queue a transfer uses (sendrecv's `dma_engine`): accepted; every choice is
    priced as the core's default DMA queues."""
    unknown = 0
    dma = 1
    gpsimd_dma = 2


class nc_version:
    gen2 = 2
    gen3 = 3
    gen4 = 4


def get_nc_sub_version():
    """The silicon revision within the target's nc_version: 0 (the first; the simulator's
    targets are first revisions)."""
    return 0


def get_nc_version():
    sim = runtime.CUR
    name = sim.target.name if sim is not None else "trn2"
    return {"trn1": nc_version.gen2, "trn3": nc_version.gen4}.get(name, nc_version.gen3)


# ---- argument binding ---------------------------------------------------------------------
def _bind(fname, args, kw, names, new):
    """Map positional/keyword arguments onto `names` (with 'dst' first when `new`). An
    unknown keyword is a compile error (it would otherwise be silently ignored)."""
    for k in kw:
        if k != "dst" and k not in names:
            raise compile_error("nisa.%s got an unexpected keyword argument %r (accepted: %s)"
                                % (fname, k, ", ".join(["dst"] + list(names))))
    if not args:
        return kw
    if not new and names and names[0] in kw and len(args) < len(names):
        # `f(out, data=x, ...)`: the first source operand is named, so the positional
        # argument before it can only be the NKI 0.3+ leading `dst`
        new = True
    names = (["dst"] + names) if new else names
    out = {}
    if len(args) > len(names):
        raise compile_error("nisa.%s: too many positional arguments" % fname)
    for n, v in zip(names, args):
        out[n] = v
    for k, v in kw.items():
        if k in out:
            raise compile_error("nisa.%s: argument %r given twice" % (fname, k))
        out[k] = v
    return out


_DEFAULTS = (None, False, 0, "none")


def _reject(fname, p, *names):
    """Arguments nkisim does not model: a non-default value is a compile error rather than
    an argument silently ignored."""
    for n in names:
        v = p.get(n)
        if n == "mask" and (type(v) in (bool, np.bool_) and v or
                            type(v) is np.ndarray and v.dtype == np.bool_ and v.all()):
            continue  # a predicate that is true everywhere masks nothing
        if isinstance(v, (tuple, list)) or not any(v is d or (type(v) is type(d) and v == d)
                                                   for d in _DEFAULTS):
            raise compile_error("nisa.%s: %s=%r is not modelled by nkisim (the simulator would "
                                "ignore it); remove it or use an equivalent supported form"
                                % (fname, n, v))


def _is_new(args, kw, pos):
    if "dst" in kw:
        return True
    return len(args) > pos and isinstance(args[pos], Tensor)


def _out(p, shape, dt_default, buffer=sbuf):
    """Destination: `dst` (new API) or a fresh tile (old API)."""
    dst = p.get("dst")
    if dst is not None:
        if not isinstance(dst, Tensor):
            raise compile_error("dst must be a tensor")
        return dst, False
    dt = dt_of(p["dtype"]) if p.get("dtype") is not None else dt_default
    return core.tmp(tuple(shape), dt, buffer), True


def _check_same_shape(opname, dst, shape):
    if tuple(dst.shape) != tuple(shape):
        if dst.size != int(np.prod(shape)) or dst.shape[0] != shape[0]:
            raise compile_error("nisa.%s: dst shape %s does not match the result shape %s"
                                % (opname, list(dst.shape), list(shape)))


def _f32(v):
    if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.dtype != np.float32:
        return v.astype(np.float32)
    return v


def _opnd(x, nd=None):
    """Operand value: tile values (aligned to rank nd on the partition axis), or a scalar."""
    if isinstance(x, Tensor):
        return _f32(value_of(x, nd))
    return x



def _apply(op, v, operand, reverse):
    f = O.BINARY[op]
    return f(operand, v) if reverse else f(v, operand)



_REDUCE_IDENTITY = {"add": 0.0, "sum": 0.0, "subtract": 0.0, "maximum": -np.inf,
                    "max": -np.inf, "minimum": np.inf, "min": np.inf, "multiply": 1.0,
                    "prod": 1.0}


def _skip_masked(op, v, mask):
    """Values to reduce with the elements a mask excludes replaced by op's identity (the
    instruction does not compute them, so they do not enter its reduction)."""
    if mask is None or (type(mask) in (bool, np.bool_) and mask):
        return v
    if op not in _REDUCE_IDENTITY:
        raise compile_error("a masked reduction with op %r is not modelled by nkisim" % (op,))
    try:
        m = np.broadcast_to(np.asarray(mask, dtype=bool), v.shape)
    except ValueError:
        raise compile_error("mask of shape %s does not match the tile %s"
                            % (list(np.shape(mask)), list(v.shape)))
    return np.where(m, v, np.float32(_REDUCE_IDENTITY[op]))



# old-API engine constants (`engine=nisa.vector_engine`)
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown
