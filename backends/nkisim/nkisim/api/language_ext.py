"""`nki.language` names of NKI 0.3+ beyond the older API: `abs_max` / `abs_min` (trn3,
VectorE: the signed value of larger / smaller magnitude), `expand_dims`, `random_seed`, and
the operator constants `bypass` (an operand slot that passes data through) and `prelu`
(parametric ReLU, the activation of `nisa.activate2` with `relu_param`).
"""
import numpy as np

from ..data import dtypes as D
from ..data.buffers import Tensor, sbuf
from ..errors import compile_error
from ..machine import core, runtime
from ..machine.core import check_onchip, compute, dt_of, free_size, value_of, vector_cost
from ..machine.timing import VECTOR

bypass = "bypass"
prelu = "prelu"


def _magnitude_select(name, larger, x, y, dtype):
    s = runtime.CUR
    if s is not None and s.target.name != "trn3":
        raise compile_error("nl.%s is available only on NeuronCore-v4 (trn3), not on %s"
                            % (name, s.target.name))
    tiles = [t for t in (x, y) if isinstance(t, Tensor)]
    if not tiles:
        raise compile_error("nl.%s needs at least one tile" % name)
    for t in tiles:
        check_onchip(t, "nl." + name)
    shape, nd = core.tile_shape(tuple(t.shape for t in tiles), "nl." + name)
    dt = dt_of(dtype) if dtype is not None else (
        D.promote(x.st.dt, y.st.dt) if len(tiles) == 2 else tiles[0].st.dt)
    out = core.tmp(shape, dt, sbuf, overwritten=True)

    def run():
        a = np.asarray(value_of(x, nd) if isinstance(x, Tensor) else x, dtype=np.float32)
        b = np.asarray(value_of(y, nd) if isinstance(y, Tensor) else y, dtype=np.float32)
        pick = np.abs(a) > np.abs(b) if larger else np.abs(a) < np.abs(b)
        return np.broadcast_to(np.where(pick, a, b), shape)
    compute(VECTOR, vector_cost(free_size(out)), tiles, [out], run, "nl." + name)
    return out


def abs_max(x, y, dtype=None):
    """x where |x| > |y|, else y (element-wise, signed; trn3, VectorE)."""
    return _magnitude_select("abs_max", True, x, y, dtype)


def abs_min(x, y, dtype=None):
    """x where |x| < |y|, else y (element-wise, signed; trn3, VectorE)."""
    return _magnitude_select("abs_min", False, x, y, dtype)


def expand_dims(x, axis):
    """A view of x with a new axis of size 1 at `axis` (whole tensors)."""
    if not isinstance(x, Tensor):
        raise compile_error("nl.expand_dims expects a tile")
    nd = len(x.shape) + 1
    try:
        axis = int(axis)
    except (TypeError, ValueError):
        raise compile_error("nl.expand_dims: axis must be an integer") from None
    if not -nd <= axis < nd:
        raise compile_error("nl.expand_dims: axis %d is out of range for a %d-D result"
                            % (axis, nd))
    shape = list(x.shape)
    shape.insert(axis % nd, 1)
    return x.reshape(tuple(shape))


def random_seed(seed):
    """Seed nl.rand (and nisa.dropout's mask) from a [1, 1] on-chip tile or an int: the same
    seed gives the same values."""
    if isinstance(seed, Tensor):
        check_onchip(seed, "nl.random_seed")
        if seed.size != 1:
            raise compile_error("nl.random_seed: seed must be a [1, 1] tile, got %s"
                                % (list(seed.shape),))
        v = seed.read()
        value = 0 if v is None else int(np.asarray(v).reshape(-1)[0])
    else:
        try:
            value = int(seed)
        except (TypeError, ValueError):
            raise compile_error("nl.random_seed: seed must be a [1, 1] tile or an int") from None
    core.sim().random_seed = value & 0xFFFFFFFF
    return None
