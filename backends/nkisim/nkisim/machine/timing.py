"""List scheduler for the timing model.

Each compute instruction goes to its engine (TensorE, VectorE, ScalarE, GpSimdE). Like the
compiler's list scheduler over unrolled loop iterations, it takes the earliest idle gap of
its engine that is long enough, once every earlier instruction it depends on has finished,
but it may not start before the instruction issued `SCHED_WINDOW` places earlier on the
same engine (a bounded reordering window). Inside `sequential_range` loops each engine runs
strictly in program order, and code after such a loop starts after it. On trn1 VectorE and
GpSimdE share one SBUF port: the streaming part of their instructions never overlaps.
DMA transfers go to the earliest-free of the DMA queues. Dependencies are read-after-write, write-after-read and write-after-write
on overlapping regions of the same storage; a region is a box (lo, hi per storage
dimension, flattened into one tuple) or None for the whole storage. DMA transfers also
share one bandwidth timeline that later transfers may back-fill.
"""
from bisect import bisect_right
from itertools import chain

from . import constants as C
from . import costs
from .grouping import _Group, effects_text
# the dependency tracking lives in deps.py; its names stay importable from here
from .deps import (_SEQ, _SEQ_END, BlockLive, DepState, covers, mark_written,  # noqa: F401
                   overlap, ready_time, record, timing_seq, timing_seq_end, touch)

TENSOR, VECTOR, SCALAR, GPSIMD = 0, 1, 2, 3
ENGINE_NAMES = ("tensor", "vector", "scalar", "gpsimd")


class Timeline:
    """Busy intervals of a shared resource (DMA bandwidth); work is fluid and may fill gaps."""

    def __init__(self, keep_history=False):
        self.s = []
        self.e = []
        self.busy = 0.0
        self.first = 0.0  # where the last request started
        # with keep_history, the intervals prune() took out of s/e (they precede every
        # interval still there), so that idle_windows sees the whole run
        self.done_s = [] if keep_history else None
        self.done_e = [] if keep_history else None

    def end(self):
        return self.e[-1] if self.e else 0.0

    def consume(self, t, dur):
        """Take `dur` of free time starting no earlier than t; return the finish time."""
        self.busy += dur
        s, e = self.s, self.e
        n = len(s)
        i = bisect_right(e, t)
        if i == n:
            self.first = t
            if n and e[-1] == t:
                e[-1] = t + dur
            else:
                s.append(t)
                e.append(t + dur)
            return t + dur
        pieces = []
        cur = t
        rem = dur
        j = i
        while rem > 1e-9:
            if j < n and s[j] <= cur:
                if e[j] > cur:
                    cur = e[j]
                j += 1
                continue
            gap_end = s[j] if j < n else float("inf")
            take = gap_end - cur
            if take > rem:
                take = rem
            if not pieces:
                self.first = cur
            pieces.append((cur, cur + take))
            cur += take
            rem -= take
        hi = min(j + 1, n)
        merged = sorted(list(zip(s[i:hi], e[i:hi])) + pieces)
        ns, ne = [], []
        for a, b in merged:
            if ns and a <= ne[-1] + 1e-9:
                if b > ne[-1]:
                    ne[-1] = b
            else:
                ns.append(a)
                ne.append(b)
        s[i:hi] = ns
        e[i:hi] = ne
        return cur

    def prune(self, floor):
        """Set aside intervals ending before `floor` (no future request starts earlier)."""
        k = bisect_right(self.e, floor)
        if k > 64:
            if self.done_s is not None:
                self.done_s.extend(self.s[:k])
                self.done_e.extend(self.e[:k])
            del self.s[:k]
            del self.e[:k]

    def idle_windows(self, lo, hi):
        """(start, end) gaps between the busy intervals within [lo, hi), in order; intervals
        already pruned count only with keep_history."""
        out = []
        t = lo
        for a, b in zip(chain(self.done_s or (), self.s), chain(self.done_e or (), self.e)):
            if b <= t:
                continue
            if a >= hi:
                break
            if a > t:
                out.append((t, a))
            t = b
            if t >= hi:
                break
        if t < hi:
            out.append((t, hi))
        return out


class Scheduler:
    """Engine queues, DMA queues and the resulting statistics (all times in ns)."""

    def __init__(self, target):
        self.target = target
        _SEQ_END[0] = 0.0                     # a new run starts at time 0
        self.free = [0.0, 0.0, 0.0, 0.0]      # latest end per engine
        self.floor = [0.0, 0.0, 0.0, 0.0]     # no instruction of the engine starts earlier
        self.lines = [Timeline(), Timeline(), Timeline(), Timeline()]  # busy time per engine
        self.recent = [[], [], [], []]        # starts of the last SCHED_WINDOW instructions
        self.window = C.SCHED_WINDOW
        self.ordered = 0                      # > 0 inside sequential_range
        # trn1: VectorE and GpSimdE stream through one shared SBUF port
        self.shared_port = bool(getattr(target, "vector_gpsimd_shared_port", False))
        self.port = Timeline()
        k = costs.table(target)
        self.overhead = [0.0,
                         k.vector_fixed_cycles * 1e9 / target.vector_hz,
                         0.0,
                         k.gpsimd_startup_cycles * 1e9 / target.gpsimd_hz]
        self.active = [0.0, 0.0, 0.0, 0.0]
        self.count = [0, 0, 0, 0]
        self.nq = C.DMA_ENGINES
        self.qfree = [0.0] * self.nq          # latest end per DMA queue
        self.qgaps = [[] for _ in range(self.nq)]  # idle (start, end) windows per queue
        self.ngaps = 0
        self.dma_recent = []                  # starts of the last DMA_SCHED_WINDOW transfers
        self.dma_floor = 0.0                  # no transfer starts earlier
        self.bw = Timeline(keep_history=True)  # the spill model reads its idle windows
        # the HBM stack the physical cores of a logical core share (cores.Cores sets it up
        # for LNC=2 launches; None: one core, whose DMA rate already caps its HBM traffic)
        self.stack = None
        self.stack_rate = 0.0
        self.stack_floor = 0.0
        self.dma_starts = []
        self.dma_ends = []
        self.dma_count = 0
        self.makespan = 0.0
        self.hot = None          # (line, engine) -> [instructions, ns] when attribution is on
        self.line_of = None
        self.producer = None     # end time -> (engine, line) when attribution is on
        self.wait = None         # (engine, waiting_on, line) -> idle ns
        # instruction grouping (the compiler's widening of narrow instructions): pending
        # groups in creation order, the stack of open small affine loops (each a dict
        # key -> group), and the effects applied: (line, why) -> [narrow, issued]
        self.groups = []
        self.loops = []
        self.loop_iter = []      # current iteration of each open affine loop
        self.effects = {}
        self.placements = {}     # (line, op) -> [placed on ScalarE, all] (core)
        self.loads = {}          # line -> [loads not issued (kept tile reused), all] (core)
        self.costs = costs.table(target)

    def start_attribution(self, line_of):
        """Record hotspots and engine waits; `line_of()` names the current kernel line."""
        self.hot = {}
        self.producer = {}
        self.wait = {}
        self.line_of = line_of

    def _attribute(self, engine, ns, line):
        key = (line, engine)
        rec = self.hot.get(key)
        if rec is None:
            self.hot[key] = [1, ns]
        else:
            rec[0] += 1
            rec[1] += ns

    def hotspots(self, top=20):
        """Busiest kernel source lines: dicts with line, engine, instructions, time_us."""
        if not self.hot:
            return []
        names = ENGINE_NAMES + ("dma",)
        rows = [{"line": line, "engine": names[eng], "instructions": c, "time_us": ns / 1000.0}
                for (line, eng), (c, ns) in self.hot.items()]
        rows.sort(key=lambda r: (-r["time_us"], r["line"] or 0, r["engine"]))
        return rows[:top]

    def waits(self, top=5):
        """Where engines sat idle waiting for another engine's (or DMA's) result: dicts with
        engine, waiting_on, idle_pct (of the makespan) and line (of the instruction waited
        for), largest first."""
        if not self.wait or self.makespan <= 0:
            return []
        names = ENGINE_NAMES + ("dma",)
        rows = [{"engine": names[e], "waiting_on": names[w],
                 "idle_pct": 100.0 * ns / self.makespan, "line": line}
                for (e, w, line), ns in self.wait.items() if ns > 0]
        rows.sort(key=lambda r: (-r["idle_pct"], r["engine"], r["waiting_on"], r["line"] or 0))
        return rows[:top]

    # -- instruction grouping ----------------------------------------------------------------
    def begin_affine(self, trip):
        """Enter an affine_range loop of `trip` iterations: in a small one (at most
        GROUP_MAX_TRIP) narrow instructions of its iterations may be grouped (join) until
        it ends. A frame is a dict key -> group, or None for a loop too long to group."""
        self.loops.append({} if trip <= C.GROUP_MAX_TRIP else None)
        self.loop_iter.append(-1)

    def next_iteration(self):
        """The innermost affine loop starts its next iteration (members of one group come
        from distinct iterations)."""
        if self.loop_iter:
            self.loop_iter[-1] += 1

    def end_affine(self):
        """Leave the innermost affine loop: issue the groups it collected."""
        if self.loops:
            frame = self.loops.pop()
            self.loop_iter.pop()
            if frame:
                for g in list(frame.values()):
                    self._flush(g)

    def close_loops(self):
        """Program end: close every affine loop still open (an iterator the kernel kept
        alive) and issue its groups, so no frame outlives the program."""
        while self.loops:
            self.end_affine()

    def join(self, key, engine, work, reads, writes, cap, why):
        """Add a narrow instruction of `work` streaming cycles to group `key` (capacity
        `cap` members, 0 = until its loop ends): the group is issued as one instruction of
        the summed work, after every pending group it depends on. Only independent copies
        join one group: an instruction that depends on a member (or a member on it), or, in
        a loop group, one from an iteration a member came from, issues the group and starts
        a new one. Returns False (nothing done) when the instruction cannot be grouped: no
        open loop for an uncapped group."""
        frame = self.loops[-1] if self.loops else None
        if cap == 0 and frame is None:
            return False
        it = self.loop_iter[-1] if cap == 0 else None
        if cap:
            frame = None
        g = frame.get(key) if frame is not None else None
        if g is None:
            for h in self.groups:
                if h.key == key and h.cap:
                    g = h
                    break
        deps = self._conflicts(reads, writes, None)
        if g is not None and (g in deps or it in g.iters or
                              any(g in self._closure(h) for h in deps if h is not g)):
            # a member it depends on, its own iteration, or a dependency cycle through
            # another group: issue the group and start again
            self._flush(g)
            g = None
            deps = self._conflicts(reads, writes, None)
        if g is None:
            line = self.line_of() if self.line_of is not None else None
            g = _Group(key, engine, cap, line, why)
            self.groups.append(g)
            if cap == 0:
                frame[key] = g
        for h in deps:
            if h is not g and h not in g.after:
                g.after.append(h)
        g.work += work
        g.count += 1
        g.last = (work, len(reads), len(writes), it)
        if it is not None:
            g.iters.add(it)
        g.reads.extend(reads)
        g.writes.extend(writes)
        for ds, _ in chain(reads, writes):
            g.ids[id(ds)] = True
        if g.cap and g.count >= g.cap:
            self._flush(g)
        return True

    def _closure(self, g):
        out = []
        todo = [g]
        while todo:
            h = todo.pop()
            if h in out:
                continue
            out.append(h)
            todo.extend(h.after)
        return out

    def _conflicts(self, reads, writes, own):
        """Pending groups (other than `own`) the accesses depend on or that depend on them."""
        if not self.groups:
            return []
        out = []
        for g in self.groups:
            if g is own:
                continue
            ids = g.ids
            hit = False
            for ds, box in chain(reads, writes):
                if id(ds) in ids:
                    for gds, gbox in g.writes:
                        if gds is ds and (box is None or gbox is None or overlap(box, gbox)):
                            hit = True
                            break
                    if not hit:
                        for wds, wbox in writes:
                            if wds is not ds:
                                continue
                            for gds, gbox in g.reads:
                                if gds is ds and (wbox is None or gbox is None or
                                                  overlap(wbox, gbox)):
                                    hit = True
                                    break
                            if hit:
                                break
                if hit:
                    break
            if hit:
                out.append(g)
        return out

    def _flush(self, g):
        """Issue pending group g (after the groups it depends on) as one instruction."""
        if g not in self.groups:
            return
        self.groups.remove(g)
        for h in list(g.after):
            self._flush(h)
        for frame in self.loops:
            if frame is not None and frame.get(g.key) is g:
                del frame[g.key]
        k = self.costs
        hz = (self.target.vector_hz, self.target.scalar_hz)[g.engine - 1]
        cyc = k.vector_cycles(g.work) if g.engine == VECTOR else k.scalar_cycles(g.work)
        line_of = self.line_of
        if line_of is not None:
            self.line_of = lambda: g.line
        try:
            self.issue(g.engine, cyc * 1e9 / hz, g.reads, g.writes)
        finally:
            self.line_of = line_of
        if g.count > 1:
            rec = self.effects.setdefault((g.line, g.why), [0, 0])
            rec[0] += g.count
            rec[1] += 1

    def add_writes(self, ds, writes):
        """The result a pending group wrote to storage `ds` is written in place into
        `writes` (an assignment the compiler fuses): the group writes those too. True if a
        pending group wrote `ds`."""
        for g in self.groups:
            if id(ds) in g.ids and any(gds is ds for gds, _ in g.writes):
                if g.count > 1 and g.last is not None and self._touches(g, writes):
                    # the latest member writes what an earlier one reads or writes: it is
                    # not independent of them, so it leaves the group and starts a new one
                    g = self._split_last(g)
                g.writes.extend(writes)
                for wds, _ in writes:
                    g.ids[id(wds)] = True
                return True
        return False

    @staticmethod
    def _touches(g, writes):
        for wds, wbox in writes:
            if id(wds) not in g.ids:
                continue
            for gds, gbox in chain(g.reads, g.writes):
                if gds is wds and (wbox is None or gbox is None or overlap(wbox, gbox)):
                    return True
        return False

    def _split_last(self, g):
        """Take the latest member out of pending group g, issue g, and return a new pending
        group (same key, frame and place) holding that member."""
        work, nr, nw, it = g.last
        reads = g.reads[len(g.reads) - nr:] if nr else []
        writes = g.writes[len(g.writes) - nw:] if nw else []
        del g.reads[len(g.reads) - nr:]
        del g.writes[len(g.writes) - nw:]
        g.work -= work
        g.count -= 1
        g.iters.discard(it)
        g.last = None
        frame = None
        for f in self.loops:
            if f is not None and f.get(g.key) is g:
                frame = f
        self._flush(g)
        h = _Group(g.key, g.engine, g.cap, g.line, g.why)
        h.work, h.count, h.last = work, 1, (work, nr, nw, it)
        h.reads, h.writes = list(reads), list(writes)
        for ds, _ in chain(reads, writes):
            h.ids[id(ds)] = True
        if it is not None:
            h.iters.add(it)
        self.groups.append(h)
        if frame is not None:
            frame[h.key] = h
        return h

    def flush_groups(self, reads=None, writes=None):
        """Issue the pending groups an instruction outside them touches (all with None)."""
        if not self.groups:
            return
        if reads is None:
            while self.groups:
                self._flush(self.groups[0])
            return
        for g in self._conflicts(reads, writes, None):
            self._flush(g)

    def compiler_effects(self):
        """The compiler effects applied, one sentence each (grouping.effects_text)."""
        return effects_text(self.effects, self.loads, self.placements)

    # -- sequential_range ------------------------------------------------------------------
    def begin_ordered(self):
        """Enter a sequential_range loop: engines run in program order until end_ordered."""
        self.ordered += 1
        self._barrier()

    def end_ordered(self):
        """Leave a sequential_range loop: later instructions start after it."""
        if self.ordered > 0:
            self.ordered -= 1
        self._barrier()

    def _barrier(self):
        for e in range(4):
            if self.free[e] > self.floor[e]:
                self.floor[e] = self.free[e]

    # -- placement ---------------------------------------------------------------------------
    def issue(self, engine, cost, reads, writes, startup=0.0):
        """Schedule a compute instruction of `cost` ns; returns its end time. Engine time is
        taken from the earliest idle time at or after the instruction's ready time (later
        instructions fill idle gaps left by dependency waits, as the compiler's reordering
        of independent iterations does), within the reordering window. `startup` is added
        when the engine is idle at the ready time (a pipeline that has to fill again, e.g.
        TensorE's MM_INIT_LATENCY), not for back-to-back instructions."""
        if self.groups:
            self.flush_groups(reads, writes)
        lo = self.free[engine] if self.ordered else self.floor[engine]
        t = ready_time(lo, reads, writes)
        tl = self.lines[engine]
        if startup and t > tl.end():
            cost += startup
        if self.wait is not None:
            self._record_wait(engine, t, tl.end(), lo)
        if t < tl.end():
            tl.prune(self.floor[engine])
        end = tl.consume(t, cost)
        start = tl.first
        if self.shared_port and (engine == 1 or engine == 3):
            off = self.overhead[engine]
            if off > cost:
                off = cost
            pt = self.port
            if start + off < pt.end():
                pt.prune(min(self.floor[1], self.floor[3]))
            pend = pt.consume(start + off, cost - off)
            if pend > end:
                end = pend
        rc = self.recent[engine]
        rc.append(start)
        if len(rc) >= self.window:
            f = rc[-self.window]
            if f > self.floor[engine]:
                self.floor[engine] = f
            if len(rc) > 4 * self.window:
                del rc[:-self.window]
        if end > self.free[engine]:
            self.free[engine] = end
        self.active[engine] += cost
        self.count[engine] += 1
        if self.hot is not None:
            line = self.line_of()
            self._attribute(engine, cost, line)
            self.producer[end] = (engine, line)
        record(reads, writes, end)
        if end > self.makespan:
            self.makespan = end
        return end

    def _record_wait(self, engine, t, busy_end, lo):
        """Idle time of `engine` right before an instruction that had to wait for the result
        of another engine or a DMA (its dependencies, not its engine, set its start; gaps
        later filled by other instructions are not subtracted)."""
        if t <= lo or t <= busy_end:
            return
        who = self.producer.get(t)
        if who is None or who[0] == engine:
            return
        prev = busy_end if busy_end > lo else lo
        if t > prev:
            key = (engine, who[0], who[1])
            self.wait[key] = self.wait.get(key, 0.0) + (t - prev)

    def issue_zero(self, engine, reads, writes):
        """A bookkeeping step with no cost and no instruction (e.g. a fused accumulate)."""
        if self.groups:
            self.flush_groups(reads, writes)
        lo = self.free[engine] if self.ordered else self.floor[engine]
        t = ready_time(lo, reads, writes)
        record(reads, writes, t)
        return t

    def dma(self, data_ns, fixed_ns, reads, writes, min_data_ns=0.0, hbm_bytes=0):
        """Schedule a DMA transfer on the earliest-free queue; returns its end time.
        `data_ns` is its share of the core's DMA bandwidth; `min_data_ns` the shortest time
        the engines it can use need for it (transfers over few partitions use few engines);
        `hbm_bytes` the bytes it moves to or from HBM (drawn from the shared HBM stack when
        several cores run, cores.py)."""
        # A transfer holds a queue from its trigger (when its inputs are ready) to its end,
        # so one waiting for compute does not block later independent transfers (the
        # compiler reorders DMA triggers of independent iterations like other
        # instructions), within a window of DMA_SCHED_WINDOW transfers.
        if self.groups:
            self.flush_groups(reads, writes)
        t = ready_time(self.dma_floor, reads, writes)
        est = fixed_ns + (data_ns if data_ns > min_data_ns else min_data_ns)
        q, t, gap = self._queue_slot(t, est)
        self.bw.prune(self.dma_floor)
        end = self.bw.consume(t + fixed_ns, data_ns)
        if hbm_bytes and self.stack is not None:
            st = self.stack
            st.prune(min(self.stack_floor, self.dma_floor))
            send = st.consume(t + fixed_ns, hbm_bytes / self.stack_rate)
            if send > end:
                end = send
        if t + fixed_ns + min_data_ns > end:
            end = t + fixed_ns + min_data_ns
        self._queue_take(q, t, end, gap)
        if self.hot is not None:
            # a transfer's share of the core's DMA bandwidth, not its time in flight: many
            # transfers are in flight at once, so the DMA rows add up to at most the makespan
            line = self.line_of()
            self._attribute(4, data_ns, line)
            self.producer[end] = (4, line)
        self.dma_starts.append(t)
        self.dma_ends.append(end)
        self.dma_count += 1
        record(reads, writes, end)
        if end > self.makespan:
            self.makespan = end
        return end

    def _queue_slot(self, t, est):
        """The queue and start (>= t) where a transfer of about `est` ns fits earliest: a
        queue idle from t on, else an idle gap a transfer that waited for its inputs left in
        a queue, else the queue that frees first. Returns (queue, start, gap index)."""
        qf = self.qfree
        lo = min(qf)
        q = qf.index(lo)
        if lo <= t:
            return q, t, -1
        best = (q, lo, -1)
        if self.ngaps:
            for k, gaps in enumerate(self.qgaps):
                for j, (g0, g1) in enumerate(gaps):
                    st = g0 if g0 > t else t
                    if st + est <= g1 and st < best[1]:
                        best = (k, st, j)
        return best

    def _queue_take(self, q, start, end, gap):
        gaps = self.qgaps[q]
        if gap >= 0:
            g0, g1 = gaps.pop(gap)
            self.ngaps -= 1
            for a, b in ((g0, start), (end, g1)):
                if b - a > 1.0:
                    gaps.append((a, b))
                    self.ngaps += 1
        else:
            if start - self.qfree[q] > 1.0:
                gaps.append((self.qfree[q], start))
                self.ngaps += 1
                if len(gaps) > 8:  # keep the latest gaps
                    del gaps[0]
                    self.ngaps -= 1
            if end > self.qfree[q]:
                self.qfree[q] = end
        rc = self.dma_recent
        rc.append(start)
        w = C.DMA_SCHED_WINDOW
        if len(rc) >= w:
            f = rc[-w]
            if f > self.dma_floor:
                self.dma_floor = f
            if len(rc) > 4 * w:
                del rc[:-w]
                if self.ngaps:
                    floor = self.dma_floor
                    n = 0
                    for k in range(self.nq):
                        kept = [g for g in self.qgaps[k] if g[1] > floor]
                        self.qgaps[k] = kept
                        n += len(kept)
                    self.ngaps = n

    def dma_active_ns(self):
        """Length of the union of all DMA transfer intervals."""
        if not self.dma_starts:
            return 0.0
        pairs = sorted(zip(self.dma_starts, self.dma_ends))
        total = 0.0
        cs, ce = pairs[0]
        for a, b in pairs[1:]:
            if a > ce:
                total += ce - cs
                cs, ce = a, b
            elif b > ce:
                ce = b
        total += ce - cs
        return total


class NullScheduler(Scheduler):
    """A scheduler that times nothing, for runs that only need values (a harness replaying
    a trace whose timing it already has, on another seed's inputs): instructions are counted
    for storage liveness (capacity checks see the same sequence numbers) but get no engine
    time, so latency, metrics, hotspots and waits of such a run are zero/empty."""

    def start_attribution(self, line_of):
        pass

    def join(self, key, engine, work, reads, writes, cap, why):
        return False

    def begin_ordered(self):
        pass

    def end_ordered(self):
        pass

    def next_iteration(self):
        pass

    def issue(self, engine, cost, reads, writes, startup=0.0):
        touch(reads, writes)
        return 0.0

    def issue_zero(self, engine, reads, writes):
        touch(reads, writes)
        return 0.0

    def dma(self, data_ns, fixed_ns, reads, writes, min_data_ns=0.0, hbm_bytes=0):
        touch(reads, writes)
        return 0.0


class ValueScheduler(NullScheduler):
    """For runs without liveness (runtime.Sim): instructions only mark what they write."""

    def issue(self, engine, cost, reads, writes, startup=0.0):
        mark_written(writes)
        return 0.0

    def issue_zero(self, engine, reads, writes):
        mark_written(writes)
        return 0.0

    def dma(self, data_ns, fixed_ns, reads, writes, min_data_ns=0.0, hbm_bytes=0):
        mark_written(writes)
        return 0.0
