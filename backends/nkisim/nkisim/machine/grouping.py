"""Instruction grouping: the narrow instructions the compiler issues as one wide instruction
(timing.Scheduler.join), and the sentences naming each compiler effect applied."""


class _Group:
    """Narrow instructions the compiler issues as one wide instruction (Scheduler.join)."""
    __slots__ = ("key", "engine", "work", "count", "cap", "reads", "writes", "ids", "after",
                 "line", "why", "iters", "last")

    def __init__(self, key, engine, cap, line, why):
        self.key = key
        self.engine = engine
        self.work = 0.0
        self.count = 0
        self.cap = cap
        self.reads = []
        self.writes = []
        self.ids = {}       # id(DepState) -> True for every storage the group touches
        self.after = []     # pending groups that must be issued before this one
        self.line = line
        self.why = why
        self.iters = set()  # iterations of its loop the members come from (loop groups)
        self.last = None    # (work, reads, writes, iteration) the latest member added


def effects_text(effects, loads, placements):
    """The compiler effects applied, one sentence each (largest first): groupings and fills
    not issued (`effects`: (line, why) -> [narrow, issued]), loads not issued (`loads`:
    line -> [kept, all]) and engine placements (`placements`: (line, op) -> [moved, all])."""
    rows = sorted(effects.items(), key=lambda kv: (-kv[1][0], kv[0][0] or 0))
    out = []
    for (line, why), (narrow, issued) in rows:
        where = "line %d: " % line if line else ""
        if issued == 0:  # an instruction the compiler does not issue
            out.append("%s%s fill instruction(s) not issued (%s)"
                       % (where, format(narrow, ","), why))
            continue
        out.append("%s%s instructions grouped into %s (%s)"
                   % (where, format(narrow, ","), format(issued, ","), why))
    rows = sorted(loads.items(), key=lambda kv: (-kv[1][0], kv[0] or 0))
    for line, (kept, total) in rows:
        if kept:
            where = "line %d: " % line if line else ""
            out.append("%s%s of %s nl.load transfers not issued (same region loaded "
                       "before: the compiler keeps the tile)"
                       % (where, format(kept, ","), format(total, ",")))
    rows = sorted(placements.items(), key=lambda kv: (-kv[1][0], kv[0][0] or 0))
    for (line, op), (moved, total) in rows:
        if moved:
            out.append("%s%s of %s %s placed on ScalarE (element-wise work the compiler "
                       "spreads over engines)" % ("line %d: " % line if line else "",
                                                  format(moved, ","), format(total, ","),
                                                  op))
    return out
