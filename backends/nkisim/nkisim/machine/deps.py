"""Dependency tracking for the timing model: each storage's access history (DepState: the
latest end time of reads and writes per region box), the per-block liveness of tensors with
block dimensions (BlockLive), and the process-wide instruction sequence number. A region is
a box (lo, hi per storage dimension, flattened into one tuple) or None for the whole storage.
Dependencies are read-after-write, write-after-read and write-after-write on overlapping
regions of the same storage (`ready_time`); `record` notes an instruction's accesses.
"""

_REC_CAP = 256  # distinct boxes kept per storage and kind before they are merged


def overlap(a, b):
    """True when boxes a and b intersect (None = whole storage)."""
    if a is None or b is None:
        return True
    for i in range(0, len(a), 2):
        if a[i] >= b[i + 1] or b[i] >= a[i + 1]:
            return False
    return True


def covers(a, b):
    """True when box a contains box b (None = whole storage)."""
    if a is None:
        return True
    if b is None:
        return False
    for i in range(0, len(a), 2):
        if a[i] > b[i] or a[i + 1] < b[i + 1]:
            return False
    return True


def _union(a, b):
    if a is None or b is None:
        return None
    out = []
    for i in range(0, len(a), 2):
        out.append(min(a[i], b[i]))
        out.append(max(a[i + 1], b[i + 1]))
    return tuple(out)


def _collapse(recs):
    """Merge the older half of a record dict (by end time) into one conservative record:
    accesses overlapping it wait for the latest of those (old) end times."""
    items = sorted(recs.items(), key=lambda kv: kv[1])
    half = len(items) // 2
    box = items[0][0]
    for b, _ in items[1:half]:
        box = _union(box, b)
    end = items[half - 1][1]
    recs.clear()
    recs[box] = end
    for b, e in items[half:]:
        old = recs.get(b)
        recs[b] = e if old is None or e > old else old


class DepState:
    """Access history of one storage: dicts box -> latest end time of reads / writes, and
    `last`, the sequence number of the last instruction that accessed it; `blk`, for an SBUF
    tensor with block dimensions, the liveness of each block (BlockLive), else None; `uses`,
    for an SBUF allocation charged to capacity in a run with liveness, the access codes
    (seq * 2, + 1 for a write) the residency replay reads (spills.py), else None."""
    __slots__ = ("wr", "rd", "wr_max", "rd_max", "last", "blk", "uses")

    def __init__(self):
        self.wr = {}
        self.rd = {}
        self.wr_max = 0.0
        self.rd_max = 0.0
        self.last = -1
        self.blk = None
        self.uses = None


class BlockLive:
    """First and last instruction (sequence numbers) that touch each block of a tensor with
    block dimensions (the leading `len(dims)` storage dimensions), and the end time of the
    first: the compiler allocates such a tensor block by block, each for its live range."""
    __slots__ = ("dims", "first", "last", "first_end", "uses")

    def __init__(self, dims):
        self.dims = tuple(dims)
        n = 1
        for d in self.dims:
            n *= d
        self.first = [-1] * n
        self.last = [-1] * n
        self.first_end = [0.0] * n
        self.uses = [[] for _ in range(n)]  # access codes per block (spills.py)

    def note(self, box, seq, end, code=None):
        """Instruction `seq` (ending at `end`) touches the blocks box covers (None: all);
        `code` is the access code (seq * 2, + 1 for a write) kept per block."""
        first, last, uses = self.first, self.last, self.uses
        if box is None:
            idx = range(len(first))
        else:
            idx = [0]
            for i, d in enumerate(self.dims):
                lo, hi = box[2 * i], box[2 * i + 1]
                if lo < 0:
                    lo = 0
                if hi > d:
                    hi = d
                idx = [j * d + k for j in idx for k in range(lo, hi)]
        for j in idx:
            if first[j] < 0:
                first[j] = seq
                self.first_end[j] = end
            last[j] = seq
            if code is not None:
                uses[j].append(code)


_SEQ = [0]
# end time of the most recently recorded instruction (0 in runs without timing)
_SEQ_END = [0.0]


def timing_seq():
    """Sequence number of the most recently recorded instruction (process-wide counter)."""
    return _SEQ[0]


def timing_seq_end():
    """End time of the most recently recorded instruction, in program order: where an
    allocation made now can first hold data, near enough (the spill model's lower bound)."""
    return _SEQ_END[0]


def ready_time(t, reads, writes):
    """Earliest start >= t honouring RAW (reads), WAW and WAR (writes); args are (DepState, box)."""
    for ds, box in reads:
        if ds.wr_max > t:
            for b, e in ds.wr.items():
                if e > t and (box is None or b is None or overlap(b, box)):
                    t = e
    for ds, box in writes:
        if ds.wr_max > t:
            for b, e in ds.wr.items():
                if e > t and (box is None or b is None or overlap(b, box)):
                    t = e
        if ds.rd_max > t:
            for b, e in ds.rd.items():
                if e > t and (box is None or b is None or overlap(b, box)):
                    t = e
    return t


def record(reads, writes, end):
    """Remember that the accesses finish at `end`."""
    seq = _SEQ[0] + 1
    _SEQ[0] = seq
    _SEQ_END[0] = end
    for ds, box in reads:
        ds.last = seq
        if ds.uses is not None:
            ds.uses.append(seq * 2)
        if ds.blk is not None:
            ds.blk.note(box, seq, end, seq * 2)
        rd = ds.rd
        e = rd.get(box)
        if e is None or end > e:
            rd[box] = end
        if end > ds.rd_max:
            ds.rd_max = end
        if len(rd) > _REC_CAP:
            _collapse(rd)
    for ds, box in writes:
        ds.last = seq
        if ds.uses is not None:
            ds.uses.append(seq * 2 + 1)
        if ds.blk is not None:
            ds.blk.note(box, seq, end, seq * 2 + 1)
        wr = ds.wr
        rd = ds.rd
        if box is None:
            if wr:
                wr.clear()
            if rd:
                rd.clear()
        else:
            # drop records this write covers (only while the history is short; long
            # histories are bounded by _collapse instead)
            if wr and len(wr) <= 32:
                dead = [b for b in wr if b is not None and covers(box, b)]
                for b in dead:
                    del wr[b]
            if rd and len(rd) <= 32:
                dead = [b for b in rd if b is not None and covers(box, b)]
                for b in dead:
                    del rd[b]
        e = wr.get(box)
        if e is None or end > e:
            wr[box] = end
        if end > ds.wr_max:
            ds.wr_max = end
        if len(wr) > _REC_CAP:
            _collapse(wr)


def touch(reads, writes):
    """Count an instruction for liveness (each storage's `last` sequence number) without
    timing it (NullScheduler), and mark what it writes (mark_written)."""
    seq = _SEQ[0] + 1
    _SEQ[0] = seq
    for ds, box in reads:
        ds.last = seq
        if ds.uses is not None:
            ds.uses.append(seq * 2)
        if ds.blk is not None:
            ds.blk.note(box, seq, 0.0, seq * 2)
    for ds, box in writes:
        ds.last = seq
        if ds.uses is not None:
            ds.uses.append(seq * 2 + 1)
        if ds.blk is not None:
            ds.blk.note(box, seq, 0.0, seq * 2 + 1)
    mark_written(writes)


def mark_written(writes):
    """Give each written storage a write record (ending at time 0, so it never delays
    anything) when it has none: `wr` being non-empty is how every run, with or without
    timing and liveness, knows a storage was written (e.g. to copy an output parameter back
    to the caller's array)."""
    for ds, _ in writes:
        if not ds.wr:
            ds.wr[None] = 0.0
