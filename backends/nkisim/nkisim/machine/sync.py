"""Synchronisation between the programs of a launch: `nisa.sendrecv` and `nisa.core_barrier`.

The trusted replay (sandbox/replay.py) runs a launch's programs one at a time. A program that
reaches a sync call before its partner is suspended right after the call (`Rendezvous.suspend`
is set; the replay saves its place and runs another program); the partner's arrival completes
the call for both, and the suspended program resumes where it stopped. Without sync calls the
programs run one after another exactly as before. MODEL.md "Logical NeuronCores".

Ranks: a program's rank is its flat (row-major) index in the launch grid; for the LNC launch
`kernel[2](...)` that is `nl.program_id(0)`, the physical core it runs on.

* sendrecv(src, dst, send_to_rank=p, recv_from_rank=p, pipe_id): the exchange with peer p.
  The n-th call of a program on a pipe with peer p meets the peer's n-th call on that pipe
  with this program as its peer; the second arrival performs both transfers (the first
  program's `src` into the second's `dst` and the other way round), each a DMA on the sending
  program's core. The data dependences order them: a transfer starts once its source is
  written and its destination is free, and the receiver's later reads of `dst` wait for it.
  send_to_rank == own rank copies src into dst without waiting.
* core_barrier(data, cores=(0, 1)): the n-th barrier of each listed program meets the others'
  n-th; when the last arrives, every participant's engines and DMA queues start nothing
  before all participants' work issued so far has ended, plus K_BARRIER_NS (uncalibrated).

A call that never meets its partner (the other program finished, or every program waits) is
a runtime error naming the program and the call's line: on hardware the launch would hang.
"""
from ..errors import NkiRuntimeError, compile_error, current_kernel_line

# One semaphore round trip between the two cores of a logical core. Not measured: a probe
# for the device calibration suite is named in MODEL.md; until then a small fixed cost.
K_BARRIER_NS = 200.0

# sim.sync of the untrusted recording side: sync calls are checked and recorded, never
# matched (no data exists there; the trusted replay matches them)
RECORDING = "recording"


class Arrival:
    """One program's call, waiting for its partner(s)."""
    __slots__ = ("program", "rank", "core", "line", "args")

    def __init__(self, program, rank, core, line, args):
        self.program = program
        self.rank = rank
        self.core = core
        self.line = line
        self.args = args


class Rendezvous:
    """The pending sync calls of one replay. `suspend` is set by a first arrival and cleared
    by the replay when it switches away; `waiting` holds the flat indices of the programs
    suspended until a partner arrives."""

    def __init__(self, grid):
        self.grid = tuple(int(g) for g in grid)
        self.pending = {}   # key -> [Arrival, ...]
        self.calls = {}     # (rank, kind, tag) -> calls so far
        self.waiting = set()
        self.suspend = False

    def count(self, rank, kind, tag):
        """The index of this program's call among its calls of the same kind and tag."""
        k = (rank, kind, tag)
        n = self.calls.get(k, 0)
        self.calls[k] = n + 1
        return n

    def meet(self, key, arrival, parties):
        """Register `arrival` under `key`; the list of all arrivals once `parties` have come
        (the last one is `arrival`), else None (the caller's program must wait)."""
        got = self.pending.setdefault(key, [])
        got.append(arrival)
        if len(got) < parties:
            self.waiting.add(arrival.rank)
            self.suspend = True
            return None
        del self.pending[key]
        for a in got[:-1]:
            self.waiting.discard(a.rank)
        return got

    def unmatched(self):
        """A description of one call still waiting, or None."""
        for key, got in self.pending.items():
            a = got[0]
            return "%s in program %s (line %s) never met %s" % (
                key[0], list(program_of(self.grid, a.rank)), a.line, _partner_text(key, a))
        return None


def _partner_text(key, a):
    if key[0] == "nisa.sendrecv":
        return "program rank %d's matching call (pipe_id %r, call %d on that pipe)" % (
            a.args["peer"], key[1], key[-1] + 1)
    return "the other cores' barrier %d" % (key[-1] + 1)


def program_of(grid, rank):
    """The program id (tuple) of flat index `rank` in `grid`."""
    out = []
    for n in reversed(grid):
        out.append(rank % n)
        rank //= n
    return tuple(reversed(out))


def rank_of(grid, pid):
    r = 0
    for n, i in zip(grid, pid):
        r = r * n + int(i)
    return r


def _state_of(sim, core):
    """The scheduler state dict of `core` (timing.Scheduler attributes), or None when the
    scheduler keeps no per-core queues."""
    cores = getattr(sim, "cores", None)
    if cores is None or not hasattr(sim.sched, "bw"):
        return None
    return cores._state(core)


def _set_state(sim, core, key, value):
    cores = sim.cores
    if core == cores.cur:
        setattr(sim.sched, key, value)
    else:
        cores.states[core][key] = value


def _core(sim):
    cores = getattr(sim, "cores", None)
    return cores.cur if cores is not None else 0


def sendrecv(sim, src, dst, peer, pipe, dma):
    """Meet the peer's matching call; `dma(dst, src)` performs one transfer on the current
    core. Returns without effect for the first arrival (its program is suspended)."""
    rz = sim.sync
    rank = rank_of(rz.grid, sim.program_id)
    if peer == rank:
        dma(dst, src)
        return
    n = rz.count(rank, "sendrecv", (pipe, peer))
    key = ("nisa.sendrecv", pipe, min(rank, peer), max(rank, peer), n)
    me = Arrival(sim.program_id, rank, _core(sim), current_kernel_line(),
                 {"src": src, "dst": dst, "peer": peer})
    got = rz.meet(key, me, 2)
    if got is None:
        return
    first = got[0]
    if first.args["peer"] != rank:
        raise compile_error("nisa.sendrecv: program rank %d exchanges with rank %d, but rank %d "
                            "sends to rank %d on pipe_id %r" % (rank, peer, first.rank,
                                                                first.args["peer"], pipe))
    for a, b in ((first, me), (me, first)):
        if a.args["src"].size != b.args["dst"].size:
            raise compile_error("nisa.sendrecv: rank %d sends %s (%d elements) into rank %d's "
                                "dst %s (%d elements)" % (
                                    a.rank, list(a.args["src"].shape), a.args["src"].size,
                                    b.rank, list(b.args["dst"].shape), b.args["dst"].size))
    cores = getattr(sim, "cores", None)
    if cores is not None:
        cores.select(first.core)
    dma(me.args["dst"], first.args["src"])
    if cores is not None:
        cores.select(me.core)
    dma(first.args["dst"], me.args["src"])


def core_barrier(sim, parties):
    """Meet the other participants' matching barrier; the last arrival holds every
    participant's queues until all work issued so far has ended."""
    rz = sim.sync
    rank = rank_of(rz.grid, sim.program_id)
    if rank not in parties:
        raise compile_error("nisa.core_barrier: program rank %d is not among cores=%s"
                            % (rank, tuple(parties)))
    if len(parties) == 1:
        return  # nothing to wait for
    if _programs(rz.grid) == 1:
        raise compile_error("nisa.core_barrier(cores=%s) in a launch of one program: its "
                            "partner would run in another launch (another logical core), "
                            "which nkisim does not simulate; launch kernel[2](...) to run "
                            "both programs" % (tuple(parties),))
    for r in parties:
        if not 0 <= r < _programs(rz.grid):
            raise compile_error("nisa.core_barrier: cores=%s names rank %d, but the launch has "
                                "%d programs" % (tuple(parties), r, _programs(rz.grid)))
    n = rz.count(rank, "barrier", tuple(parties))
    key = ("nisa.core_barrier", tuple(parties), n)
    got = rz.meet(key, Arrival(sim.program_id, rank, _core(sim), current_kernel_line(), {}),
                  len(parties))
    if got is None:
        return
    sched = sim.sched
    if hasattr(sched, "flush_groups"):
        sched.flush_groups()
    cores = sorted({a.core for a in got})
    states = [_state_of(sim, c) for c in cores]
    if any(s is None for s in states):
        return  # an untimed replay: values only
    t = max(s["makespan"] for s in states) + K_BARRIER_NS
    for c, s in zip(cores, states):
        _set_state(sim, c, "floor", [max(f, t) for f in s["floor"]])
        _set_state(sim, c, "free", [max(f, t) for f in s["free"]])
        _set_state(sim, c, "dma_floor", max(s["dma_floor"], t))
        _set_state(sim, c, "makespan", max(s["makespan"], t))


def _programs(grid):
    n = 1
    for g in grid:
        n *= g
    return n


def check_done(rz):
    """After the last program: a call still waiting is the kernel's error."""
    what = rz.unmatched()
    if what is not None:
        raise NkiRuntimeError("%s: every other program ended (on hardware the launch would "
                              "hang)" % what)
