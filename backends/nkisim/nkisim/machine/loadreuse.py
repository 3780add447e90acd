"""Duplicate-load elimination: an `nl.load` of a region an earlier load read, whose tile the
compiler can keep, is not issued (MODEL.md, Compiler effects: evidence, criterion, limits)."""
from ..errors import current_kernel_line
from .deps import ready_time, record

_VECTOR = 1  # timing.VECTOR: the engine of a bookkeeping step in a run without timing


# ---- duplicate-load elimination ---------------------------------------------------------
# An `nl.load` whose result stays an unnamed tile, of exactly the HBM region (view, dtype, no
# mask) an earlier such load read, with no write to that HBM tensor and no more than one
# SBUF's worth of allocations (bytes per partition) in between, is not issued: the compiler
# keeps the earlier tile (a loop-invariant load hoisted out of its loop, or a repeated load
# removed). A load assigned into a declared tensor (`t[...] = nl.load(...)`) is a write into
# a buffer the kernel manages and is always issued. Evidence and limits: MODEL.md.
class _Kept:
    """A kept load: its tile's access history and region (not its data, so the tile's
    arrays can be reused once the kernel drops it), source root, distance stamp and the
    tile's write history at the load."""
    __slots__ = ("dep", "box", "root", "stamp", "sstamp", "wr")

    def __init__(self, tile, root, stamp, sstamp):
        self.dep = tile.st.dep
        self.box = tile.box
        self.root = root
        self.stamp = stamp
        self.sstamp = sstamp
        self.wr = _writes_of(self.dep)


def _root(st):
    return st.base if st.base is not None else st


def _load_key(s, src, dt):
    if src.st.kind != "hbm" or src.adv is not None or src.valid is not None:
        return None
    return (src.st, src.sk, src.vd, dt.name, s.program_id)


def _writes_of(dep):
    return (len(dep.wr), dep.wr_max)


def kept_load(s, src, dt):
    """The kept earlier identical load (_Kept) the compiler reuses for `src`, or None. A load
    is kept only while its reuse distance is short: since it was last used, at most one
    SBUF's worth of allocations and at most `load_reuse_stream_bytes` per partition of new
    data streamed into SBUF by DMA (the cost table's calibratable criterion: MODEL.md,
    Compiler effects); older loads are forgotten."""
    cache = s.kept_loads
    if not cache:
        return None
    horizon = s.sbuf_alloc_seq - s.sbuf_cap
    shorizon = s.load_stream - s.costs.load_reuse_stream_bytes
    while cache:
        k, e = next(iter(cache.items()))
        if e.stamp >= horizon and e.sstamp >= shorizon:
            break
        del cache[k]
    key = _load_key(s, src, dt)
    e = cache.get(key) if key is not None else None
    if e is None:
        return None
    if _writes_of(e.dep) != e.wr:  # the kept tile was overwritten since
        del cache[key]
        return None
    e.stamp = s.sbuf_alloc_seq
    e.sstamp = s.load_stream
    cache.move_to_end(key)
    return e


def keep_load(s, out, src, dt):
    """Remember the fresh tile `out` of an unmasked load of `src` (a later identical load may
    reuse it)."""
    key = _load_key(s, src, dt)
    if key is None:
        return
    root = _root(src.st)
    s.kept_loads[key] = _Kept(out, root, s.sbuf_alloc_seq, s.load_stream)
    s.kept_roots.add(root)
    s.kept_loads.move_to_end(key)
    s.load_tiles[out.st] = ("kept", key)
    _count_load(s, False)


def reuse_load(s, out, kept, src):
    """`out` (a fresh tile) takes the values of `src` from the kept load `kept`: no transfer;
    readers of `out` wait for the kept tile's load."""
    if s.numerics:
        out.write(src.read(), None, exact=src.st.dt is out.st.dt)
    r = [(kept.dep, kept.box)]
    w = [(out.st.dep, out.box)]
    if s.timing:
        record(r, w, ready_time(kept.dep.wr_max, r, w))
    else:
        s.sched.issue_zero(_VECTOR, r, w)
    s.last_st = out.st
    s.last_eng = -1  # core._DMA: the tile stands for a load
    s.load_tiles[out.st] = ("reused", src)
    _count_load(s, True)


def _count_load(s, kept):
    rec = s.sched.loads.setdefault(current_kernel_line(), [0, 0])
    rec[1] += 1
    if kept:
        rec[0] += 1


def load_assigned(s, dst, src, mask, dma):
    """Tile `src`, the fresh result of an nl.load, is assigned into the declared tensor
    `dst`: such a load is issued as written (into `dst`). True when this issued the transfer
    in place of a reused tile."""
    info = s.load_tiles.pop(src.st, None)
    if info is None:
        return False
    if info[0] == "kept":
        e = s.kept_loads.get(info[1])
        if e is not None and e.dep is src.st.dep:
            del s.kept_loads[info[1]]
        return False
    rec = s.sched.loads.get(current_kernel_line())
    if rec:
        rec[0] -= 1
    dma(dst, info[1], mask)
    return True


def hbm_written(s, st):
    """A write to HBM storage `st`: loads of it kept so far can no longer be reused."""
    cache = s.kept_loads
    if cache:
        root = _root(st)
        roots = s.kept_roots
        if root not in roots:  # (a superset of the roots of the kept loads)
            return
        roots.discard(root)
        for k in [k for k, e in cache.items() if e.root is root]:
            del cache[k]
