"""SBUF residency over the access sequence: what an allocator has to spill and reload.

Every SBUF allocation charged to capacity records the sequence numbers of the instructions
that read or write it (`DepState.uses`, appended by timing.record/touch: seq * 2 + 1 for a
write, seq * 2 for a read). When the live data of a kernel exceeds SBUF (the liveness sweep
in simulator._check_capacity found an overflow), `residency` replays those accesses against
the per-partition budget: a tile takes space from its first access to its last; when an
access needs space that is not free, the resident tile whose next access is furthest away is
evicted (Belady's choice: the fewest reloads any allocator could achieve with that access
order, so a kernel cannot lower its spill cost by how it is written, only by what it keeps
live). An evicted tile is saved to HBM if it was written since it was last saved or loaded,
and reloaded at its next access, once per access that finds it evicted. A tile with block
dimensions counts block by block (BlockLive.uses).

The cost of the traffic (one transfer per save or reload, 128 partition rows each) is a
formula in costs.py (`spill_traffic_ns`); simulator places it in idle DMA bandwidth.
"""
import heapq


class Residency:
    """Result of a residency replay: bytes per partition saved and reloaded, and the number
    of save and reload transfers."""
    __slots__ = ("save", "reload", "saves", "reloads")

    def __init__(self):
        self.save = 0
        self.reload = 0
        self.saves = 0
        self.reloads = 0


def _items(allocs):
    """(bytes per partition, sorted access codes) of every SBUF allocation with accesses."""
    out = []
    for _seq, pb, dep, kind, _line, _end in allocs:
        if kind != "sbuf" or pb <= 0:
            continue
        blk = dep.blk
        if blk is not None:
            if kind != "sbuf":
                continue
            for b, first in enumerate(blk.first):
                if first >= 0:
                    out.append((pb, sorted(set(blk.uses[b]))))
                    blk.uses[b] = []
            continue
        uses = dep.uses
        if uses:
            out.append((pb, sorted(set(uses))))
    return out


def residency(allocs, cap):
    """Replay the SBUF accesses of `allocs` (simulator Sim.allocs) against `cap` bytes per
    partition with furthest-next-use eviction; returns a Residency."""
    items = _items(allocs)
    res = Residency()
    if not items:
        return res
    events = []  # (seq, item index, position in its access list)
    for i, (_pb, codes) in enumerate(items):
        prev = -1
        for j, c in enumerate(codes):
            seq = c >> 1
            if seq != prev:  # one event per instruction (a read and a write of one tile)
                events.append((seq, i, j))
                prev = seq
    events.sort()
    n = len(items)
    size = [pb for pb, _ in items]
    codes = [c for _, c in items]
    resident = [False] * n
    dirty = [False] * n
    started = [False] * n
    nxt = [0] * n            # sequence number of the next access of each resident item
    heap = []                # (-next access, item): lazy, checked against nxt / resident
    cur = 0
    k = 0
    ne = len(events)
    while k < ne:
        seq = events[k][0]
        e = k
        while e < ne and events[e][0] == seq:
            e += 1
        batch = events[k:e]
        pinned = {i for _, i, _ in batch}
        for _, i, j in batch:
            if resident[i]:
                continue
            need = size[i]
            held = []
            while cur + need > cap and heap:
                neg, v = heapq.heappop(heap)
                if not resident[v] or -neg != nxt[v]:
                    continue  # a stale entry
                if v in pinned:
                    held.append((neg, v))
                    continue
                resident[v] = False
                cur -= size[v]
                if dirty[v]:
                    res.save += size[v]
                    res.saves += 1
                    dirty[v] = False
            for h in held:
                heapq.heappush(heap, h)
            if started[i]:
                res.reload += size[i]
                res.reloads += 1
            started[i] = True
            resident[i] = True
            cur += need
        for _, i, j in batch:
            cs = codes[i]
            m = j
            wrote = False
            while m < len(cs) and (cs[m] >> 1) == seq:
                wrote = wrote or (cs[m] & 1) == 1
                m += 1
            if wrote:
                dirty[i] = True
            if m < len(cs):
                nxt[i] = cs[m] >> 1
                heapq.heappush(heap, (-nxt[i], i))
            elif resident[i]:  # last access: the tile is dead, its space free
                resident[i] = False
                cur -= size[i]
        k = e
    return res


def charge(sim, floor_bytes, not_before):
    """Count and place the spill traffic of `sim` (its SBUF overflowed): the residency
    replay's saves and reloads (at least `floor_bytes` saved and reloaded, the liveness
    sweep's bytes over capacity, all partitions), as SBUF<->HBM traffic. Their DMA time
    (costs.CostTable.spill_ns) takes the bandwidth the kernel's own transfers leave idle from
    the first overflow on (`not_before`), earliest first; what does not fit runs after the
    kernel's own work, behind one fixed latency. (An optimistic placement: the compiler
    reloads a tile right before its next use, and a save and reload that a dependency chain
    keeps from overlapping anything are not modelled.) Runs without timing count bytes only."""
    from . import constants as C
    r = residency(sim.allocs, sim.sbuf_cap)
    save, reload = r.save * C.PMAX, r.reload * C.PMAX
    saves, reloads = r.saves, r.reloads
    if save < floor_bytes or not saves:
        save, saves = floor_bytes, max(saves, 1)
    if reload < floor_bytes or not reloads:
        reload, reloads = floor_bytes, max(reloads, 1)
    for _seq, _pb, dep, _k, _line, _end in sim.allocs:
        dep.uses = None
    sim.spill_save = save
    sim.spill_reload = reload
    sim.hbm_write += save
    sim.hbm_read += reload
    sim.sbuf_read += save
    sim.sbuf_write += reload
    sim.dma_bytes += save + reload
    if not sim.timing:
        return
    sched = sim.sched
    ns = sim.costs.spill_ns(save, saves, reload, reloads, sim.dma_bw)
    end = sched.makespan
    left = ns
    for a, b in sched.bw.idle_windows(not_before or 0.0, end):
        take = min(left, b - a)
        sched.dma_starts.append(a)
        sched.dma_ends.append(a + take)
        left -= take
        if left <= 0:
            break
    if left > 0:  # the rest runs after the kernel's own work, behind one fixed latency
        sched.dma_starts.append(end)
        end += sim.costs.dma_fixed_ns + left
        sched.dma_ends.append(end)
    sched.dma_count += saves + reloads
    sched.bw.busy += ns
    sched.makespan = end
