"""`nki.isa` instructions driven by an affine pattern on GpSimdE (NKI 0.2+ forms):

- `iota(dst, pattern, offset=0, channel_multiplier=0)`: dst[p, i] = offset + p *
  channel_multiplier + sum_d(index_d(i) * step_d), the free index i walking the pattern's
  `[[step, num], ...]` dimensions (at most 4, outermost first), computed in int32 and
  converted to dst's dtype;
- `affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value,
  cmp_op=nl.equal, offset=0)`: dst = on_true_tile where cmp_op(affine value, 0), else
  on_false_value.

The older forms (`iota(expr, dtype)`, `affine_select(pred, on_true_tile, on_false_value)`)
are isa_vector's; a call is routed by its arguments.
"""
import numpy as np

from ..data import ops as O
from ..data.buffers import Tensor, sbuf
from ..errors import compile_error
from ..machine import core
from ..machine.core import check_onchip, compute, free_size, gpsimd_cost
from ..machine.timing import GPSIMD
from . import isa_vector as _old
from .isa_base import _bind, _f32


def _is_pattern(x):
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(
        isinstance(d, (list, tuple)) and len(d) == 2 for d in x)


def pattern_values(opname, pattern, offset, channel_multiplier, dst):
    """The int64 [P, F] affine values of `pattern` for a destination of P partitions and F
    elements per partition (F must be the product of the pattern's counts)."""
    if not _is_pattern(pattern) or len(pattern) > 4:
        raise compile_error("nisa.%s: pattern must be a list of 1 to 4 [step, num] pairs, got %r"
                            % (opname, pattern))
    try:
        steps = [int(s) for s, _ in pattern]
        nums = [int(n) for _, n in pattern]
        offset, cm = int(offset), int(channel_multiplier)
    except (TypeError, ValueError):
        raise compile_error("nisa.%s: pattern, offset and channel_multiplier must be "
                            "integers (got %r, %r, %r)" % (opname, pattern, offset,
                                                           channel_multiplier)) from None
    if any(n < 1 for n in nums):
        raise compile_error("nisa.%s: pattern counts must be positive, got %r" % (opname, nums))
    parts, n = dst.shape[0], free_size(dst)
    if int(np.prod(nums)) != n:
        raise compile_error("nisa.%s: the pattern has %d elements per partition, dst %s has %d"
                            % (opname, int(np.prod(nums)), list(dst.shape), n))
    idx = np.zeros(nums, dtype=np.int64)
    for ax, (step, num) in enumerate(zip(steps, nums)):
        sh = [1] * len(nums)
        sh[ax] = num
        idx = idx + (np.arange(num, dtype=np.int64) * step).reshape(sh)
    vals = offset + np.arange(parts, dtype=np.int64)[:, None] * cm + idx.reshape(1, n)
    # int32 arithmetic on the engine: wrap as the hardware does
    return ((vals + 2 ** 31) % 2 ** 32 - 2 ** 31).reshape((parts,) + tuple(dst.shape[1:]))


def _dst(opname, dst):
    if not isinstance(dst, Tensor):
        raise compile_error("nisa.%s: dst must be a tile" % opname)
    if dst.st.kind != "sbuf":
        raise compile_error("nisa.%s: dst must be in SBUF (it is in %s)"
                            % (opname, dst.st.kind.upper()))
    return dst


def iota(*args, **kw):
    """Affine index pattern (GpSimdE): dst[p, i] = offset + p * channel_multiplier + the
    pattern's index of i (the older `iota(expr, dtype)` form is also accepted)."""
    pattern_form = "pattern" in kw or (len(args) >= 2 and isinstance(args[0], Tensor) and
                                       _is_pattern(args[1])) or \
        ("dst" in kw and args and _is_pattern(args[0]))
    if not pattern_form:
        return _old.iota(*args, **kw)
    p = _bind("iota", args, kw, ["pattern", "offset", "channel_multiplier", "name"], True)
    dst = _dst("iota", p.get("dst"))
    vals = pattern_values("iota", p.get("pattern"), p.get("offset", 0) or 0,
                          p.get("channel_multiplier", 0) or 0, dst)
    compute(GPSIMD, gpsimd_cost(free_size(dst), dst.st.dt.itemsize), [], [dst],
            lambda: vals, "nisa.iota")
    return None


def affine_select(*args, **kw):
    """dst = on_true_tile where cmp_op(affine pattern value, 0), else on_false_value (GpSimdE;
    the older `affine_select(pred, on_true_tile, on_false_value)` form is also accepted)."""
    pattern_form = "pattern" in kw or (len(args) >= 2 and isinstance(args[0], Tensor) and
                                       _is_pattern(args[1]))
    if not pattern_form:
        return _old.affine_select(*args, **kw)
    p = _bind("affine_select", args, kw, ["pattern", "channel_multiplier", "on_true_tile",
                                          "on_false_value", "cmp_op", "offset", "name"], True)
    dst = _dst("affine_select", p.get("dst"))
    t = p.get("on_true_tile")
    if not isinstance(t, Tensor):
        raise compile_error("nisa.affine_select: on_true_tile must be a tile")
    check_onchip(t, "nisa.affine_select")
    if t.shape[0] != dst.shape[0] or free_size(t) != free_size(dst):
        raise compile_error("nisa.affine_select: on_true_tile %s and dst %s differ in size"
                            % (list(t.shape), list(dst.shape)))
    cmp = O.op_name(p.get("cmp_op")) or "equal"
    if cmp not in O.BINARY:
        raise compile_error("nisa.affine_select: unsupported cmp_op %r" % (p.get("cmp_op"),))
    fv = p.get("on_false_value")
    if isinstance(fv, Tensor) or fv is None:
        raise compile_error("nisa.affine_select: on_false_value must be a number")
    vals = pattern_values("affine_select", p.get("pattern"), p.get("offset", 0) or 0,
                          p.get("channel_multiplier"), dst)
    pred = O.BINARY[cmp](vals, 0).astype(bool)
    if t.st.kind == "psum":
        staged = core.tmp(t.shape, t.st.dt, sbuf)  # GpSimdE cannot read PSUM
        core.copy_op(staged, t)
        t = staged

    def run():
        return np.where(pred, _f32(t.read()).reshape(dst.shape), np.float32(fv))
    compute(GPSIMD, gpsimd_cost(free_size(dst), dst.st.dt.itemsize), [t], [dst], run,
            "nisa.affine_select")
    return None
