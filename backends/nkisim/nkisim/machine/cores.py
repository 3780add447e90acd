"""The physical NeuronCores of a logical NeuronCore (LNC) and how a launch's programs map to them.

On trn2/trn3 a logical core of degree 2 (LNC=2, the default there) is two physical cores that
share one HBM stack; each has its own engines, SBUF, PSUM and DMA queues. trn1 has LNC=1 only.

Which programs run on which core (MODEL.md "Logical NeuronCores"):
* a grid axis made with `nl.nc(k)` or `nl.spmd_dim(..., nl.nc(k), ...)` is sharded over the
  cores: the program's digit of the nc factor is its core (`kernel[nl.nc(2), 2]`: programs
  [0, *] on core 0, [1, *] on core 1; `kernel[nl.spmd_dim(n, nl.nc(2)), m]`: even ids on core 0);
* a one-axis grid of exactly LNC programs (`kernel[2](...)`, the NKI 0.3+ LNC launch) puts
  program i on core i;
* any other grid (no nc axis) runs on core 0: NKI lets the compiler choose there, and the
  simulator does not guess a distribution (the result says so in `compiler_effects`);
* with LNC=1 every program runs on core 0, one after another as on one core.

Timing: the scheduler's queues (engine timelines, DMA queues and the core's DMA bandwidth) are
per core; `Cores.select` swaps them in when a program starts. Storage and its dependency
times are shared (HBM is shared; on-chip tiles belong to the program that allocated them),
and so are the statistics. HBM-side transfers of every core also draw on one HBM-stack
timeline (`Scheduler.stack`). The launch's latency is the end of the slowest core.
"""
import math

from ..errors import compile_error

# LNC degree per target when none is asked for. The Neuron SDK defaults to LNC=2 on Trainium2
# and later; trn1/inf2 have no logical-core grouping (nki.md §4.1, §5: "LNC=2 groups 2 into
# one logical core; default").
DEFAULT_LNC = {"trn1": 1, "trn2": 2, "trn3": 2}
# Physical cores that share one HBM stack (trn2: "24 GB each shared by 2 cores", ~725 GB/s per
# stack; trn3: 4 stacks for 8 cores). nki.md §4.1.
CORES_PER_HBM_STACK = {"trn1": 1, "trn2": 2, "trn3": 2}


def lnc_for(target_name, lnc=None):
    """The LNC degree of a launch on `target_name`: `lnc` (1 or 2), or the target's default.
    An LNC the target does not have is an error naming both."""
    name = str(target_name)
    if lnc is None:
        return DEFAULT_LNC.get(name, 1)
    try:
        n = int(lnc)
    except (TypeError, ValueError):
        raise ValueError("lnc must be 1 or 2, got %r" % (lnc,)) from None
    if n not in (1, 2):
        raise ValueError("lnc must be 1 or 2, got %r" % (lnc,))
    if n > DEFAULT_LNC.get(name, 1):
        raise ValueError("target %s has no logical NeuronCore of degree %d: its NeuronCores are "
                         "not grouped (LNC=1 only); use --lnc 1 or target trn2/trn3"
                         % (name, n))
    return n


class SpmdDim(int):
    """A launch-grid axis built from factors, one of which may be `nl.nc(k)`: its size is the
    product of the factors; a program's id along it is read row-major over the factors, and
    its digit of the nc factor names its physical core. A plain int everywhere else."""

    def __new__(cls, factors, nc_pos=None):
        obj = int.__new__(cls, math.prod(factors))
        obj.factors = tuple(int(f) for f in factors)
        obj.nc_pos = nc_pos
        return obj

    @property
    def cores(self):
        return self.factors[self.nc_pos] if self.nc_pos is not None else 1

    def core_of(self, pid):
        if self.nc_pos is None:
            return 0
        inner = math.prod(self.factors[self.nc_pos + 1:])
        return (int(pid) // inner) % self.factors[self.nc_pos]

    def describe(self):
        """JSON form for traces: [factors, nc position or None]."""
        return [list(self.factors), self.nc_pos]

    def __repr__(self):
        return "spmd_dim(%s)" % ", ".join("nc(%d)" % f if i == self.nc_pos else str(f)
                                          for i, f in enumerate(self.factors))


def nc(n):
    """`nl.nc(n)`: a launch-grid axis of n programs, one per physical core."""
    try:
        k = int(n)
    except (TypeError, ValueError):
        raise compile_error("nl.nc expects a number of cores, got %r" % (n,)) from None
    if k not in (1, 2):
        raise compile_error("nl.nc(%r): a logical NeuronCore has 1 or 2 physical cores" % (n,))
    return SpmdDim((k,), 0)


def spmd_dim(*factors):
    """`nl.spmd_dim(a, b, ...)`: one launch-grid axis of a*b*... programs; at most one factor
    may be `nl.nc(k)` (the programs are sharded over the cores by that factor's digit)."""
    if not factors:
        raise compile_error("nl.spmd_dim needs at least one size")
    sizes, pos = [], None
    for i, f in enumerate(factors):
        if isinstance(f, SpmdDim):
            if f.nc_pos is not None:
                if pos is not None:
                    raise compile_error("nl.spmd_dim: at most one nl.nc factor per axis")
                pos = len(sizes) + f.nc_pos
            sizes.extend(f.factors)
            continue
        try:
            v = int(f)
        except (TypeError, ValueError):
            raise compile_error("nl.spmd_dim expects sizes and nl.nc(k), got %r" % (f,)) from None
        if v < 1:
            raise compile_error("nl.spmd_dim sizes must be positive, got %r" % (f,))
        sizes.append(v)
    return SpmdDim(sizes, pos)


def grid_layout(grid):
    """Per axis of a raw launch grid: [factors, nc position] for an nc axis, else None; None
    for a grid without any nc axis (the trace's `grid_cores`)."""
    if grid is None or isinstance(grid, int) and not isinstance(grid, SpmdDim):
        return None
    axes = (grid,) if isinstance(grid, int) else tuple(grid)
    out = [g.describe() if isinstance(g, SpmdDim) and g.nc_pos is not None else None
           for g in axes]
    return out if any(a is not None for a in out) else None


def _axes_from_layout(grid, layout):
    axes = []
    for i, n in enumerate(grid):
        spec = layout[i] if layout and i < len(layout) else None
        if spec is None:
            axes.append(None)
            continue
        factors, pos = spec
        d = SpmdDim(factors, pos)
        if int(d) != int(n):
            raise ValueError("grid axis %d: %d programs, but its nc layout %s has %d"
                             % (i, n, factors, int(d)))
        axes.append(d)
    return axes


class Placement:
    """Which physical core each program of a launch runs on, and the note that says how."""

    def __init__(self, grid, lnc, layout=None):
        self.grid = tuple(int(g) for g in grid)
        self.lnc = lnc
        self.axes = _axes_from_layout(self.grid, layout)
        self.note = None
        nc_axes = [d for d in self.axes if d is not None]
        asked = max([d.cores for d in nc_axes] or [1])
        if asked > 2:
            raise compile_error("nl.nc(%d): a logical NeuronCore has at most 2 physical cores"
                                % asked)
        self.mode = "single"
        if lnc > 1 and nc_axes:
            self.mode = "nc"
        elif lnc > 1 and self.grid == (lnc,):
            self.mode = "lnc"
        elif lnc > 1 and math.prod(self.grid) > 1:
            self.note = ("grid %s has no nl.nc axis: all its programs ran on physical core 0 "
                         "of the LNC=%d logical core (NKI lets the compiler distribute such a "
                         "grid; shard it with nl.spmd_dim(n, nl.nc(%d)) or launch "
                         "kernel[%d](...) to use both cores)" % (list(self.grid), lnc, lnc, lnc))
        elif lnc == 1 and nc_axes and asked > 1:
            self.note = ("grid %s shards over nl.nc(%d), but the launch is LNC=1: all its "
                         "programs ran on one physical core" % (list(self.grid), asked))

    def core_of(self, pid):
        if self.mode == "single":
            return 0
        if self.mode == "lnc":
            return int(pid[0])
        for i, d in enumerate(self.axes):
            if d is not None and d.nc_pos is not None:
                return d.core_of(pid[i]) % self.lnc
        return 0


# the Scheduler attributes that belong to one physical core (timing.Scheduler.__init__)
_STATE = ("free", "floor", "lines", "recent", "port", "qfree", "qgaps", "ngaps", "dma_recent",
          "dma_floor", "bw", "makespan")


def _fresh_state(sched):
    from .timing import Timeline
    return {"free": [0.0] * 4, "floor": [0.0] * 4,
            "lines": [Timeline(), Timeline(), Timeline(), Timeline()],
            "recent": [[], [], [], []], "port": Timeline(), "qfree": [0.0] * sched.nq,
            "qgaps": [[] for _ in range(sched.nq)], "ngaps": 0, "dma_recent": [],
            "dma_floor": 0.0, "bw": Timeline(keep_history=True), "makespan": 0.0}


class Cores:
    """The per-core queues of one scheduler: `select(c)` before a program of core c runs."""

    def __init__(self, sched, target, lnc):
        self.sched = sched
        self.n = lnc
        self.cur = 0
        self.used = [False] * lnc
        self.used[0] = True
        self.states = [None] + [_fresh_state(sched) for _ in range(1, lnc)]
        self.active = None  # per-core engine active ns, filled at finish
        if lnc > 1 and hasattr(sched, "bw"):
            from .timing import Timeline
            per_stack = CORES_PER_HBM_STACK.get(target.name, 1)
            # bytes/ns of the HBM stack the logical core's cores share
            sched.stack = Timeline()
            sched.stack_rate = per_stack * target.hbm_bytes_per_ns
            sched.stack_floor = 0.0
        self._active_at = [0.0] * lnc  # engine active ns per core, booked at each switch
        self._active_mark = list(getattr(sched, "active", [0.0] * 4))

    def _book(self):
        act = getattr(self.sched, "active", None)
        if act is None:
            return
        self._active_at[self.cur] += sum(act) - sum(self._active_mark)
        self._active_mark = list(act)

    def select(self, c):
        """Make core c's queues the scheduler's (pending instruction groups are issued on the
        core that made them first)."""
        c = int(c)
        if c == self.cur:
            return
        s = self.sched
        if hasattr(s, "bw"):
            s.flush_groups()
            self._book()
            self.states[self.cur] = {k: getattr(s, k) for k in _STATE}
            for k, v in self.states[c].items():
                setattr(s, k, v)
            self.states[c] = None
            if getattr(s, "stack", None) is not None:
                s.stack_floor = min(st["dma_floor"] for st in self.states if st is not None)
        self.cur = c
        self.used[c] = True

    def _state(self, c):
        s = self.sched
        return {k: getattr(s, k) for k in _STATE} if c == self.cur else self.states[c]

    def select_last(self):
        """Load the core that ends last (the spill model charges its idle DMA windows)."""
        ends = self.ends_ns()
        self.select(max(range(self.n), key=lambda c: ends[c]))

    def ends_ns(self):
        return [self._state(c)["makespan"] if self.used[c] else 0.0 for c in range(self.n)]

    def cores_used(self):
        return sum(self.used)

    def bandwidth_busy_ns(self):
        return sum(self._state(c)["bw"].busy for c in range(self.n) if self.used[c])

    def close(self):
        """After the run: the scheduler's makespan is the slowest core's end; returns the
        per-core ends in microseconds."""
        self._book()
        ends = self.ends_ns()
        if hasattr(self.sched, "bw"):
            self.sched.makespan = max(ends)
        self.active = list(self._active_at)
        return [e / 1000.0 for e in ends]


def attach(sim, grid, lnc, layout=None):
    """Give `sim` its launch's cores: `sim.placement` (program -> core) and `sim.cores`
    (the per-core queues of its scheduler). `grid` is the normalised grid (ints), `lnc` the
    launch's LNC degree (lnc_for), `layout` the grid's nc axes (grid_layout)."""
    sim.placement = Placement(grid, lnc, layout)
    sim.cores = Cores(sim.sched, sim.target, lnc)


def start_program(sim, pid):
    """Program `pid` starts: its core's queues take over."""
    cores = getattr(sim, "cores", None)
    if cores is not None:
        cores.select(sim.placement.core_of(pid))

