"""Collective communication across ranks: a group of simulated NeuronCores.

    results = nkisim.simulate_ranks(kernel, [inputs_rank0, inputs_rank1, ...], target="trn2")

`simulate_ranks` runs the kernel once per rank (each with its own inputs, e.g. its own
`rank_id` argument) and lets the ranks exchange data through the collective operations:

- `nki.collectives` (current API): `collective_permute(srcs, dsts, source_target_pairs)`,
  `all_reduce(srcs, dsts, replica_group, op)`, `all_gather(srcs, dsts, replica_group,
  collective_dim)`, `reduce_scatter(srcs, dsts, replica_group, op, collective_dim)`,
  `rank_id()`, `ReplicaGroup`;
- `neuronxcc.nki.nccl` (legacy API): `collective_permute(dst, src, source_target_pairs)`,
  `all_reduce(op, srcs, dsts, replica_groups, dtype)`, `all_gather(op, srcs, dsts,
  replica_groups, all_gather_dim, dtype)`, `reduce_scatter(op, srcs, dsts, replica_groups,
  reduce_scatter_dim, dtype)`.

Execution: one thread per rank, and exactly one of them runs at a time (a baton passed at
each collective), so the simulator's per-process state (`runtime.CUR`) is swapped at each
hand-over and never shared. The k-th collective a rank issues matches the k-th collective of
every other participant (SPMD order). A rank blocks in a collective until every participant
has reached it; each participant's source is snapshot when it arrives, and each rank then
writes its own destination from the snapshots. A participant that ends, or a group where
every waiting rank waits for another, is an error (a hang on hardware).

Rank ids: rank i of the group has id `rank_ids[i]` (default i). A collective naming a rank
outside the simulated group is an error: the data of a rank that is not simulated is unknown.

Timing (an estimate, see MODEL.md "Collectives"): each rank's collective is charged on its
own DMA queues as an HBM transfer of the bytes that rank sends over a ring (all-reduce
2(n-1)/n of the tensor, all-gather / reduce-scatter (n-1)/n of the larger side, permute the
tensor) at the core's HBM-side DMA bandwidth plus the fixed DMA latency. Waiting for the
slowest rank is not modelled (the ranks are assumed to arrive together); each rank's result
reports its own makespan, and the group's latency is the largest of them.
"""
import threading

import numpy as np

from ..machine import constants as C
from ..data import dtypes as D
from .. import errors as E
from ..data import ops as O
from ..machine import runtime
from ..data.buffers import Tensor
from ..errors import compile_error

_local = threading.local()


class _Abort(BaseException):
    """Unwinds a rank's kernel when another rank failed (not an NkiError: nothing catches it)."""


class _Group:
    """The ranks of one `simulate_ranks` call and the baton that lets one of them run."""

    def __init__(self, rank_ids):
        self.rank_ids = list(rank_ids)
        self.index = {r: i for i, r in enumerate(self.rank_ids)}
        self.cv = threading.Condition()
        self.turn = 0
        self.done = [False] * len(self.rank_ids)
        self.seq = [0] * len(self.rank_ids)
        self.waiting = [None] * len(self.rank_ids)  # (seq, participant indices) or None
        self.calls = {}  # seq -> {rank index: contribution}
        self.aborted = False
        self.hang = None  # the error of a group that cannot make progress

    # -- baton ----------------------------------------------------------------------------
    def _runnable(self, i):
        if self.done[i]:
            return False
        w = self.waiting[i]
        if w is None:
            return True
        seq, members = w
        got = self.calls.get(seq, {})
        return all(m in got for m in members)

    def _next(self, i):
        """Index of the next rank to run after i (round robin), or None if none can."""
        n = len(self.rank_ids)
        for k in range(1, n + 1):
            j = (i + k) % n
            if self._runnable(j):
                return j
        return None

    def wait_turn(self, i):
        with self.cv:
            while self.turn != i and not self.aborted:
                self.cv.wait()
            if self.aborted:
                raise _Abort()

    def pass_baton(self, i):
        """Let another runnable rank run; return when rank i may run again. Raises when no
        rank can make progress (the collective would hang)."""
        with self.cv:
            j = self._next(i)
            if j is None:
                self.aborted = True
                self.cv.notify_all()
                raise self._hang_error(i)
            self.turn = j
            self.cv.notify_all()
            while self.turn != i and not self.aborted:
                self.cv.wait()
            if self.aborted:
                raise _Abort()

    def finish(self, i, failed):
        with self.cv:
            self.done[i] = True
            if failed:
                self.aborted = True
            else:
                j = self._next(i)
                if j is not None:
                    self.turn = j
                elif not all(self.done):
                    # the others wait for a collective rank i never made
                    k = next(k for k in range(len(self.done)) if not self.done[k])
                    self.hang = self._hang_error(k)
                    self.hang.line = None
                    self.aborted = True
            self.cv.notify_all()

    def _hang_error(self, i):
        seq, members = self.waiting[i]
        got = self.calls.get(seq, {})
        missing = [self.rank_ids[m] for m in members if m not in got]
        ended = [r for r in missing if self.done[self.index[r]]]
        why = ("rank(s) %s ended without it" % ended) if ended else \
            "the ranks wait for each other"
        return E.NkiRuntimeError(
            "collective #%d on rank %d never completes: rank(s) %s do not reach it (%s); on "
            "hardware this hangs" % (seq, self.rank_ids[i], missing, why),
            E.current_kernel_line())

    # -- one collective -------------------------------------------------------------------
    def exchange(self, i, kind, members, payload):
        """Deposit rank i's contribution to its next collective and block until every
        participant (group indices `members`) has deposited; returns {index: contribution}."""
        seq = self.seq[i]
        self.seq[i] += 1
        got = self.calls.setdefault(seq, {})
        got[i] = (kind, payload)
        self.waiting[i] = (seq, members)
        if not all(m in got for m in members):
            sim, files = runtime.CUR, set(E._kernel_files)
            runtime.CUR = None
            try:
                self.pass_baton(i)
            finally:
                runtime.CUR = sim
                E.set_kernel_files(files)
        self.waiting[i] = None
        for m in members:
            if got[m][0] != kind:
                raise compile_error(
                    "collective #%d: rank %d issues %s but rank %d issues %s (every rank must "
                    "issue the same collectives in the same order)"
                    % (seq, self.rank_ids[i], kind, self.rank_ids[m], got[m][0]))
        return {m: got[m][1] for m in members}


def _member(opname):
    g = getattr(_local, "group", None)
    if g is None or runtime.CUR is None:
        raise compile_error(
            "%s: collective communication needs a group of ranks; run the kernel with "
            "nkisim.simulate_ranks(kernel, [inputs of each rank], ...)" % opname)
    return g, _local.index


def _indices(g, ranks, opname):
    out = []
    for r in ranks:
        r = int(r)
        if r not in g.index:
            raise compile_error("%s: rank %d is not in the simulated group (ranks %s); its data "
                                "is unknown" % (opname, r, g.rank_ids))
        out.append(g.index[r])
    return out


def _tensor(x, opname, what):
    if not isinstance(x, Tensor):
        raise compile_error("%s: %s must be a tensor, got %r" % (opname, what, type(x).__name__))
    if x.st.kind == "psum":
        raise compile_error("%s: %s is in PSUM; collectives read and write HBM or SBUF"
                            % (opname, what))
    return x


def _one(lst, opname, what):
    if isinstance(lst, Tensor):
        return _tensor(lst, opname, what)
    lst = list(lst)
    if len(lst) != 1:
        raise compile_error("%s: coalesced collectives (%d %s tensors) are not supported by "
                            "nkisim; pass one tensor" % (opname, len(lst), what))
    return _tensor(lst[0], opname, what)


def _snapshot(t):
    s = runtime.CUR
    if t.valid is not None:
        t.check_valid()
    if not s.numerics:
        return None
    return np.array(t.read(), dtype=np.float32 if t.st.dt.is_float else None, copy=True)


def _charge(src, dst, nbytes):
    """Timing and traffic of one rank's part of a collective (see the module docstring)."""
    s = runtime.CUR
    s.kept_loads.clear()  # data arrives in this rank's tensors: no load is kept
    for t, rd in ((src, True), (dst, False)):
        b = t.size * t.st.dt.itemsize
        if t.st.kind == "hbm":
            if rd:
                s.hbm_read += b
            else:
                s.hbm_write += b
        elif rd:
            s.sbuf_read += b
        else:
            s.sbuf_write += b
    s.dma_bytes += nbytes
    data_ns = nbytes / s.dma_bw
    s.sched.dma(data_ns, C.DMA_FIXED_NS, [(src.st.dep, src.box)], [(dst.st.dep, dst.box)],
                data_ns)
    s.last_st = dst.st


def _write(dst, value, opname):
    if runtime.CUR.numerics and value is not None:
        v = np.asarray(value)
        if v.size != dst.size:
            raise compile_error("%s: destination %s holds %d elements, the result %d"
                                % (opname, list(dst.shape), dst.size, v.size))
        dst.write(v.reshape(dst.shape))


def _group_of(g, i, groups, opname):
    """Group indices of the replica group (list of rank lists) that holds rank i, in order."""
    me = g.rank_ids[i]
    if groups is None:
        return list(range(len(g.rank_ids)))
    if hasattr(groups, "groups"):
        groups = groups.groups
    groups = [list(x) for x in groups]
    if groups and not isinstance(groups[0], list):
        groups = [groups]
    for grp in groups:
        if me in [int(r) for r in grp]:
            return _indices(g, grp, opname)
    raise compile_error("%s: rank %d is in none of the replica groups %s" % (opname, me, groups))


# ---- the operations ---------------------------------------------------------------------
def _permute(opname, dst, src, pairs):
    g, i = _member(opname)
    me = g.rank_ids[i]
    pairs = [(int(a), int(b)) for a, b in pairs]
    members = sorted(set(_indices(g, [r for p in pairs for r in p], opname)) | {i})
    senders = [a for a, b in pairs if b == me]
    if len(senders) > 1:
        raise compile_error("%s: rank %d receives from several ranks %s" % (opname, me, senders))
    if src.size != dst.size:
        raise compile_error("%s: source %s and destination %s differ in size"
                            % (opname, list(src.shape), list(dst.shape)))
    got = g.exchange(i, "collective_permute", members, _snapshot(src))
    if senders or any(a == me for a, b in pairs):
        # one transfer on this rank's queues: its send, its receive (ordering later reads of
        # dst after it), or both at once
        _charge(src, dst, src.size * src.st.dt.itemsize)
    if senders:
        _write(dst, got[g.index[senders[0]]], opname)


def _reduce(op, vals, opname):
    name = O.op_name(op)
    if name not in ("add", "maximum", "minimum", "multiply"):
        raise compile_error("%s: reduction op %r is not supported (add, maximum, minimum)"
                            % (opname, name))
    acc = None
    for v in vals:
        acc = v if acc is None else O.BINARY[name](acc, v)
    return acc


def _all_reduce(opname, dst, src, groups, op):
    g, i = _member(opname)
    members = _group_of(g, i, groups, opname)
    got = g.exchange(i, "all_reduce", members, _snapshot(src))
    n = len(members)
    _charge(src, dst, int(2 * (n - 1) / n * src.size * src.st.dt.itemsize) if n > 1 else 0)
    if runtime.CUR.numerics:
        _write(dst, _reduce(op, [got[m] for m in members], opname), opname)


def _all_gather(opname, dst, src, groups, dim):
    g, i = _member(opname)
    members = _group_of(g, i, groups, opname)
    got = g.exchange(i, "all_gather", members, _snapshot(src))
    n = len(members)
    if dst.size != n * src.size:
        raise compile_error("%s: destination %s must hold the %d sources %s"
                            % (opname, list(dst.shape), n, list(src.shape)))
    _charge(src, dst, int((n - 1) / n * dst.size * dst.st.dt.itemsize))
    if runtime.CUR.numerics:
        _write(dst, np.concatenate([got[m] for m in members], axis=int(dim)), opname)


def _reduce_scatter(opname, dst, src, groups, op, dim):
    g, i = _member(opname)
    members = _group_of(g, i, groups, opname)
    got = g.exchange(i, "reduce_scatter", members, _snapshot(src))
    n = len(members)
    if src.size != n * dst.size:
        raise compile_error("%s: source %s must split into %d destinations %s"
                            % (opname, list(src.shape), n, list(dst.shape)))
    _charge(src, dst, int((n - 1) / n * src.size * src.st.dt.itemsize))
    if runtime.CUR.numerics:
        total = _reduce(op, [got[m] for m in members], opname)
        dim = int(dim)
        if total.shape[dim] % n:
            raise compile_error("%s: dimension %d (%d) does not split into %d ranks"
                                % (opname, dim, total.shape[dim], n))
        _write(dst, np.split(total, n, axis=dim)[members.index(i)], opname)


# ---- nki.collectives (current API) ------------------------------------------------------
class ReplicaGroup:
    """The ranks a collective runs on: a list of disjoint rank lists (one list alone is
    accepted as a single group)."""

    def __init__(self, groups):
        groups = [list(x) for x in groups] if groups and not isinstance(groups[0], int) \
            else [list(groups)]
        self.groups = [[int(r) for r in x] for x in groups]

    def __repr__(self):
        return "ReplicaGroup(%r)" % (self.groups,)


def rank_id():
    """Id of the rank running this kernel."""
    g, i = _member("nki.collectives.rank_id")
    return g.rank_ids[i]


def collective_permute(srcs, dsts, source_target_pairs, priority=None, name=None):
    op = "nki.collectives.collective_permute"
    _permute(op, _one(dsts, op, "destination"), _one(srcs, op, "source"), source_target_pairs)


def all_reduce(srcs, dsts, replica_group, op, priority=None, name=None):
    o = "nki.collectives.all_reduce"
    _all_reduce(o, _one(dsts, o, "destination"), _one(srcs, o, "source"), replica_group, op)


def all_gather(srcs, dsts, replica_group, collective_dim, priority=None, name=None):
    o = "nki.collectives.all_gather"
    _all_gather(o, _one(dsts, o, "destination"), _one(srcs, o, "source"), replica_group,
                collective_dim)


def reduce_scatter(srcs, dsts, replica_group, op, collective_dim, priority=None, name=None):
    o = "nki.collectives.reduce_scatter"
    _reduce_scatter(o, _one(dsts, o, "destination"), _one(srcs, o, "source"), replica_group,
                    op, collective_dim)


def _unsupported(name):
    def f(*a, **k):
        raise compile_error("nki.collectives.%s is not supported by nkisim" % name)
    f.__name__ = name
    return f


CURRENT_API = {
    "ReplicaGroup": ReplicaGroup, "rank_id": rank_id,
    "collective_permute": collective_permute, "all_reduce": all_reduce,
    "all_gather": all_gather, "reduce_scatter": reduce_scatter,
    "all_to_all": _unsupported("all_to_all"),
    "collective_permute_implicit": _unsupported("collective_permute_implicit"),
    "collective_permute_implicit_reduce": _unsupported("collective_permute_implicit_reduce"),
}


# ---- neuronxcc.nki.nccl (legacy API: one tensor each, replica_groups as lists) ------------
def _check_dtype(opname, dst, dtype):
    if dtype is not None and D.lookup(dtype) is not dst.st.dt:
        raise compile_error("%s: dtype=%r differs from the destination's %s (nkisim does not "
                            "model a conversion here)" % (opname, dtype, dst.st.dt.name))


def nccl_collective_permute(dst, src, source_target_pairs, **kw):
    op = "nccl.collective_permute"
    _permute(op, _tensor(dst, op, "dst"), _tensor(src, op, "src"), source_target_pairs)


def nccl_all_reduce(op, srcs, dsts, replica_groups, dtype=None, **kw):
    o = "nccl.all_reduce"
    dst = _one(dsts, o, "destination")
    _check_dtype(o, dst, dtype)
    _all_reduce(o, dst, _one(srcs, o, "source"), replica_groups, op)


def nccl_all_gather(op, srcs, dsts, replica_groups, all_gather_dim=0, dtype=None, **kw):
    o = "nccl.all_gather"
    dst = _one(dsts, o, "destination")
    _check_dtype(o, dst, dtype)
    _all_gather(o, dst, _one(srcs, o, "source"), replica_groups, all_gather_dim)


def nccl_reduce_scatter(op, srcs, dsts, replica_groups, reduce_scatter_dim=0, dtype=None, **kw):
    o = "nccl.reduce_scatter"
    dst = _one(dsts, o, "destination")
    _check_dtype(o, dst, dtype)
    _reduce_scatter(o, dst, _one(srcs, o, "source"), replica_groups, op, reduce_scatter_dim)


LEGACY_API = {
    "collective_permute": nccl_collective_permute, "all_reduce": nccl_all_reduce,
    "all_gather": nccl_all_gather, "reduce_scatter": nccl_reduce_scatter,
}


# ---- the group runner -------------------------------------------------------------------
def simulate_ranks(kernel_fn, rank_inputs, target="trn2", grid=None, numerics=True,
                   input_dtypes=None, hotspots=False, rank_ids=None):
    """Run `kernel_fn` once per rank, rank i on `rank_inputs[i]` (parameter -> value, as for
    `nkisim.simulate`), with the ranks' collectives exchanging data. Returns one SimResult per
    rank. Raises the first rank's NkiError (by rank order) when any rank fails."""
    from ..machine.simulator import simulate
    rank_inputs = list(rank_inputs)
    if not rank_inputs:
        raise ValueError("simulate_ranks needs at least one rank")
    ids = list(range(len(rank_inputs))) if rank_ids is None else [int(r) for r in rank_ids]
    if len(ids) != len(rank_inputs) or len(set(ids)) != len(ids):
        raise ValueError("rank_ids must name each rank once")
    if runtime.CUR is not None:
        raise RuntimeError("nkisim.simulate_ranks is not reentrant")
    g = _Group(ids)
    results = [None] * len(ids)
    errors = [None] * len(ids)

    def body(i):
        _local.group, _local.index = g, i
        failed = False
        try:
            g.wait_turn(i)
            results[i] = simulate(kernel_fn, rank_inputs[i], target=target, grid=grid,
                                  numerics=numerics, input_dtypes=input_dtypes,
                                  hotspots=hotspots)
        except _Abort:
            failed = True
        except BaseException as e:  # reported to the caller below
            errors[i] = e
            failed = True
        finally:
            _local.group = None
            g.finish(i, failed)

    threads = [threading.Thread(target=body, args=(i,), name="nkisim-rank-%d" % r, daemon=True)
               for i, r in enumerate(ids)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, e in enumerate(errors):
        if e is not None:
            if isinstance(e, E.NkiError) and len(ids) > 1:
                e.message = "rank %d: %s" % (ids[i], e.message)
                e.args = (str(e),)
            raise e
    if any(r is None for r in results):
        raise g.hang or E.NkiRuntimeError("the ranks' collectives never complete")
    return results
