"""Replay mode (the trusted side): re-execute a recorded trace on real inputs.

`replay(trace, inputs, ...)` validates a trace made by `record.py` (known API names, ids it
has bound, operators and attribute reads the boundary allows, bounded sizes) and performs
each event on this process's simulator with fresh storage holding the real inputs. Outputs,
latency, metrics and hotspots all come from this replay; values the trace says an operation
returned are checked against what it returns here, so a trace that does not match its own
events (tampered, or one whose kernel looked at data) is refused. A trace can express only
NKI API calls: a forged one is just another kernel.
"""
from bisect import bisect_left, bisect_right
import gc
import itertools
import math

import numpy as np

from . import boundary as B
from ..machine import constants as C
from .. import errors as E
from ..machine import runtime
from ..data.buffers import Tensor
from ..machine import cores as CORES
from ..machine import sync as SYNC
from ..machine.simulator import TensorSpec, _input_tensor, _norm_grid, _spec_tensor, finish


class _Lines:
    """Per-line trampolines whose frames lie in the kernel file, so the simulator's
    kernel-line lookups (errors, allocation sites, hotspots) see the recorded line."""

    def __init__(self, path):
        self.path = path
        self.funcs = {}

    def at(self, line):
        f = self.funcs.get(line)
        if f is None:
            if type(line) is not int or line < 1 or line > 10_000_000:
                f = _plain
            elif line == 1:
                f = self._compile("def _at(f, a, k): return f(*a, **k)\n")
            else:
                f = self._compile("\n" * (line - 2) + "def _at(f, a, k):\n    return f(*a, **k)\n")
            self.funcs[line] = f
        return f

    def _compile(self, src):
        ns = {}
        exec(compile(src, self.path, "exec"), ns)  # noqa: S102 - our own two-line source
        return ns["_at"]


def _plain(f, a, k):
    return f(*a, **k)


class _Replayer:
    def __init__(self, table, lines):
        self.table = table
        self.objs = {}
        self.lines = lines
        self.read_only = {}  # storage id -> name of a read-only input

    def deref(self, e):
        if "$r" in e:
            pid = e["$r"]
            if type(pid) is not int or pid not in self.objs:
                raise B.Divergence("reference to unknown object %r" % (pid,))
            return self.objs[pid]
        name = e["$s"]
        if type(name) is not str or name not in self.table:
            raise B.Divergence("unknown API name %r" % (name,))
        return self.table[name]

    def val(self, e):
        """B.decode(e, self.deref), with the shapes most events carry (scalars, references,
        slices of integers, flat tuples of those) decoded here; anything else, malformed
        values included, goes through B.decode."""
        t = type(e)
        if t in _SCALARS:
            return e
        if t is dict and len(e) == 1:
            v = self._simple(e)
            if v is not _MISSING:
                return v
            x = e.get("$t")
            if type(x) is list:
                out = []
                for y in x:
                    ty = type(y)
                    if ty in _SCALARS:
                        out.append(y)
                        continue
                    v = self._simple(y) if ty is dict and len(y) == 1 else _MISSING
                    if v is _MISSING:
                        return B.decode(e, self.deref)
                    out.append(v)
                return tuple(out)
        return B.decode(e, self.deref)

    def _simple(self, e):
        """A one-key dict that is a bound reference, an API name or a slice of integers
        (None), decoded; _MISSING for anything else."""
        x = e.get("$r", _MISSING)
        if x is not _MISSING:
            return self.objs.get(x, _MISSING) if type(x) is int else _MISSING
        x = e.get("$s", _MISSING)
        if x is not _MISSING:
            return self.table.get(x, _MISSING) if type(x) is str else _MISSING
        x = e.get("$sl", _MISSING)
        if type(x) is list and len(x) == 3:
            a, b, c = x
            if type(a) in _SLICE_PARTS and type(b) in _SLICE_PARTS and type(c) in _SLICE_PARTS:
                return slice(a, b, c)
        return _MISSING

    def bind(self, rec, actual, depth=0):
        """Check the recorded result `rec` against `actual`, binding new object ids."""
        if depth > B.MAX_DEPTH:
            raise B.Divergence("result nested too deeply")
        if type(rec) is dict and len(rec) == 1:
            (k, x), = rec.items()
            if k == "$n":
                if type(x) is not int or x in self.objs:
                    raise B.Divergence("bad new object id %r" % (x,))
                if not B.dynamic_object(actual):
                    raise B.Divergence("operation returned %s, not a kernel object"
                                       % type(actual).__name__)
                self.objs[x] = actual
                return
            if k == "$r":
                if self.objs.get(x, _MISSING) is not actual:
                    raise B.Divergence("operation returned a different object than recorded")
                return
            if k == "$s":  # an API entry (`t.buffer` is `nl.sbuf`)
                if type(x) is not str or self.table.get(x, _MISSING) is not actual:
                    raise B.Divergence("operation returned a different object than recorded")
                return
            if k == "$t" and type(actual) is tuple and type(x) is list and not B.is_value(actual):
                if len(x) != len(actual):
                    raise B.Divergence("tuple length differs")
                for r, a in zip(x, actual):
                    self.bind(r, a, depth + 1)
                return
        if type(rec) is list and type(actual) is list and not B.is_value(actual):
            if len(rec) != len(actual):
                raise B.Divergence("list length differs")
            for r, a in zip(rec, actual):
                self.bind(r, a, depth + 1)
            return
        if not B.is_value(actual):
            raise B.Divergence("operation returned %s, not a value" % type(actual).__name__)
        if B.encode(actual, _no_ref) != rec:
            raise B.Divergence("operation returned %s, the trace says %s"
                               % (_short(actual), _short(rec)))

    def _read_only_in(self, args, kwargs):
        """Names of the read-only inputs among an instruction's tensor arguments."""
        names = []
        for a in list(args) + list(kwargs.values()):
            st = getattr(a, "st", None) if isinstance(a, Tensor) else None
            name = self.read_only.get(id(st)) if st is not None else None
            if name is not None and name not in names:
                names.append(name)
        return names

    def event(self, ev):
        if type(ev) is not list or len(ev) < 2:
            raise B.Divergence("malformed event")
        kind = ev[0]
        line = ev[1]
        if kind == "c" and len(ev) == 6:
            f = self.val(ev[2])
            if not (callable(f) and (_is_api(self.table, f) or B.dynamic_object(f))):
                raise B.Divergence("call of something that is not an NKI API function")
            if type(ev[3]) is not list or type(ev[4]) is not dict:
                raise B.Divergence("malformed call")
            args = [self.val(a) for a in ev[3]]
            kwargs = {str(k): self.val(v) for k, v in ev[4].items()}
            res_rec = ev[5]
        elif kind == "g" and len(ev) == 5:
            obj = self.val(ev[2])
            name = ev[3]
            if not (B.dynamic_object(obj) or _is_api(self.table, obj)) or type(name) is not str \
                    or name.startswith("_"):
                raise B.Divergence("attribute read outside the NKI API")
            val = B.read_attr(obj, name)
            if not B.attr_allowed(obj, name, val):
                raise B.Divergence("attribute %r is not part of the NKI API" % (name,))
            f, args, kwargs, res_rec = _const, [val], {}, ev[4]
        elif kind == "o" and len(ev) == 5:
            f = B.OPERATORS.get(ev[2]) if type(ev[2]) is str else None
            if f is None or type(ev[3]) is not list:
                raise B.Divergence("unknown operator %r" % (ev[2],))
            args = [self.val(a) for a in ev[3]]
            if not args or not any(_is_api(self.table, a) or B.dynamic_object(a) for a in args):
                raise B.Divergence("operator %s without a simulator object" % ev[2])
            kwargs, res_rec = {}, ev[4]
        else:
            raise B.Divergence("unknown event %r" % (kind,))
        self.perform(self.lines.at(line), f, args, kwargs, line, res_rec)

    def perform(self, at, f, args, kwargs, line, res_rec):
        """Call f (through the line trampoline `at`) and check its result against the trace."""
        try:
            res = at(f, args, kwargs)
        except StopIteration:
            if res_rec != {"$x": 1}:
                raise B.Divergence("iteration ended early")
            return
        except E.NkiError as e:
            if e.line is None:
                e.line = line if type(line) is int else None
                e.args = (str(e),)
            raise
        except ValueError as e:
            if not self.read_only or "read-only" not in str(e):
                raise
            names = self._read_only_in(args, kwargs)
            raise B.NkiInputWritten(
                "the kernel writes into its input %s: inputs are read-only (return the results, "
                "or write them to the problem's OUTPUTS parameters)"
                % ", ".join(repr(n) for n in names or sorted(self.read_only.values())),
                line if type(line) is int else None, names) from None
        if res_rec is None:
            if res is not None:
                self.bind(res_rec, res)
            return
        if type(res_rec) is dict and len(res_rec) == 1:
            x = res_rec.get("$n", _MISSING)
            if type(x) is int and x not in self.objs and B.dynamic_object(res):
                self.objs[x] = res
                return
        if res_rec == {"$x": 1}:
            raise B.Divergence("iteration did not end where recorded")
        self.bind(res_rec, res)

    def run_plan(self, plan):
        """Perform a precompiled event (see _plan): its arguments are constants and bound
        references, decoded once per trace."""
        f, at, line, args_plan, kw_plan, res_rec = plan
        objs = self.objs
        try:
            if type(args_plan) is tuple:
                args = args_plan
            else:
                args = [objs[x] if r else x for r, x in args_plan]
            if kw_plan is None:
                kwargs = _NO_KWARGS
            else:
                kwargs = {k: (objs[x] if r else x) for k, (r, x) in kw_plan.items()}
        except KeyError:
            raise B.Divergence("reference to unknown object") from None
        self.perform(at, f, args, kwargs, line, res_rec)


_MISSING = object()
_SCALARS = frozenset((type(None), bool, int, float, str))
_SLICE_PARTS = frozenset((type(None), int))
_NO_KWARGS = {}


def _plan_value(e, table):
    """(is_reference, value or id) of an encoded argument when it is a constant that can be
    shared by every replay (a scalar, an API object, a slice of integers or a tuple of
    those) or a reference; None for anything else (decoded on every replay)."""
    t = type(e)
    if t in _SCALARS:
        return (False, e)
    if t is not dict or len(e) != 1:
        return None
    (k, x), = e.items()
    if k == "$r":
        return (True, x) if type(x) is int else None
    if k == "$t":
        v = _plan_tuple(x, table)
        return None if v is None else (False, v)
    if k == "$sl":
        v = _plan_slice(x)
        return None if v is None else (False, v)
    if k == "$s":
        v = table.get(x, _MISSING) if type(x) is str else _MISSING
        return None if v is _MISSING else (False, v)
    return None


def _plan_slice(x):
    """The slice an encoded `$sl` body stands for, or None."""
    if type(x) is list and len(x) == 3:
        a, b, c = x
        if type(a) in _SLICE_PARTS and type(b) in _SLICE_PARTS and type(c) in _SLICE_PARTS:
            return slice(a, b, c)
    return None


def _plan_tuple(x, table):
    """The constant tuple an encoded `$t` body stands for, or None (not a list, or an item
    that is not a constant). Indexing keys, tuples of scalars and slices, are the common
    case and are decoded here without recursion."""
    if type(x) is not list:
        return None
    out = []
    for y in x:
        ty = type(y)
        if ty in _SCALARS:
            out.append(y)
            continue
        if ty is dict and len(y) == 1:
            sl = y.get("$sl", _MISSING)
            if sl is not _MISSING:
                v = _plan_slice(sl)
                if v is None:
                    return None
                out.append(v)
                continue
        v = _plan_value(y, table)
        if v is None or v[0]:
            return None
        out.append(v[1])
    return tuple(out)


def _plan(ev, table, lines):
    """A call event of an API function named in the table, or an operator event, whose
    arguments all have plans (_plan_value): (f, trampoline, line, args, kwargs, result);
    args is a tuple when every argument is a constant. None for any other event, which
    the replay decodes as it goes (Replayer.event), with every check."""
    if type(ev) is not list or not ev:
        return None
    kind = ev[0]
    if kind == "c" and len(ev) == 6:
        fe = ev[2]
        if type(fe) is not dict or len(fe) != 1 or type(fe.get("$s")) is not str:
            return None
        f = table.get(fe["$s"], _MISSING)
        if f is _MISSING or not callable(f):
            return None
        if type(ev[3]) is not list or type(ev[4]) is not dict:
            return None
        args, kws, res_rec = ev[3], ev[4], ev[5]
    elif kind == "o" and len(ev) == 5:
        f = B.OPERATORS.get(ev[2]) if type(ev[2]) is str else None
        if f is None or type(ev[3]) is not list or not ev[3]:
            return None
        args, kws, res_rec = ev[3], {}, ev[4]
        # an operator needs a simulator object among its operands: a bound reference
        # (only kernel objects are bound) or an API object
        if not any(type(a) is dict and ("$r" in a or "$s" in a) for a in args):
            return None
    else:
        return None
    args_plan = []
    any_ref = False
    for a in args:
        v = _plan_value(a, table)
        if v is None:
            return None
        any_ref = any_ref or v[0]
        args_plan.append(v)
    kw_plan = {}
    for k, a in kws.items():
        v = _plan_value(a, table)
        if v is None:
            return None
        kw_plan[str(k)] = v
    if not any_ref:
        args_plan = tuple(x for _, x in args_plan)
    line = ev[1]
    return (f, lines.at(line), line, args_plan, kw_plan or None, res_rec)


def _const(v):
    return v


def _no_ref(v):
    raise B.Divergence("unexpected object %s" % type(v).__name__)


def _short(v):
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


_API_IDS = {}


def _is_api(table, obj):
    ids = _API_IDS.get(id(table))
    if ids is None:
        ids = _API_IDS[id(table)] = {id(v) for v in table.values()}
    return id(obj) in ids


def _refs(e, out, depth=0):
    """Trace ids an encoded value mentions."""
    if depth > B.MAX_DEPTH:
        return
    if type(e) is list:
        for x in e:
            _refs(x, out, depth + 1)
    elif type(e) is dict:
        for k, x in e.items():
            if k in ("$r", "$n") and type(x) is int:
                out.append(x)
            elif type(x) in (list, dict):
                _refs(x, out, depth + 1)


_PREPARED = []   # [(events list, kernel path, API table, _Prepared)] of the latest traces
_PREPARED_SIZE = 2


class _Prepared:
    """What a replay of one trace derives from its events alone, made once and reused by
    every replay of the same events list (a harness replays one trace once per seed):
    `drops` {event index: [ids whose last mention is there]} (the replay drops its
    reference to an object after its last use, as the kernel's variables would, so freed
    on-chip arrays are recycled as in a direct simulation), `plans` (per event, _plan or
    None) and the kernel-line trampolines."""

    def __init__(self, events, table, lines):
        self.lines = lines
        self.plans = plans = [_plan(ev, table, lines) for ev in events]
        self.drops = _compute_last_uses(events, plans)
        # index of each program's "pid" event (a planned event is a call, never one)
        self.starts = [i for i, ev in enumerate(events) if plans[i] is None
                       and type(ev) is list and ev and ev[0] == "pid"]


def _prepared(events, table, kernel_path):
    """The _Prepared of `events`, remembered for the latest traces; the cache holds the
    events list itself, so its identity stands for its contents as long as nobody edits it."""
    for ev, path, tab, prep in _PREPARED:
        if ev is events and path == kernel_path and tab is table:
            return prep
    prep = _Prepared(events, table, _Lines(kernel_path))
    _PREPARED.insert(0, (events, kernel_path, table, prep))
    del _PREPARED[_PREPARED_SIZE:]
    return prep


def _compute_last_uses(events, plans):
    """{event index: [ids whose last mention is there]}; a planned event's ids are read from
    its plan (the same ids _refs finds in the event) instead of walking the event again.
    An id mentioned by more than one program (or by a program and the import-time prelude)
    is never dropped: a program suspended at a sync call may use it after another program's
    last mention (machine/sync.py)."""
    last = {}
    starts = []  # indices of the "pid" events
    bounds = []  # per program: the highest id mentioned before its "pid" event
    hi = -1      # the record makes ids in increasing order: an id above bounds[k] is new
    for i, ev in enumerate(events):
        plan = plans[i]
        if plan is None:
            if type(ev) is list and ev and ev[0] == "pid":
                starts.append(i)
                bounds.append(hi)
                continue
            if type(ev) is list:
                ids = []
                _refs(ev[2:], ids)
                for x in ids:
                    last[x] = i
                if ids:
                    hi = max(hi, max(ids))
            continue
        args_plan, kw_plan, res_rec = plan[3], plan[4], plan[5]
        if type(args_plan) is list:
            for r, x in args_plan:
                if r:
                    last[x] = i
        if kw_plan is not None:
            for r, x in kw_plan.values():
                if r:
                    last[x] = i
        if type(res_rec) is dict and len(res_rec) == 1:
            x = res_rec.get("$n", res_rec.get("$r"))
            if type(x) is int:
                last[x] = i
                if x > hi:
                    hi = x
                continue
        if type(res_rec) in (list, dict):
            ids = []
            _refs(res_rec, ids, 1)
            for x in ids:
                last[x] = i
            if ids:
                hi = max(hi, max(ids))
    drops = {}
    for x, i in last.items():
        # the segment (0: prelude, k: program k) of its first and of its last mention
        if bisect_left(bounds, x) != bisect_right(starts, i):
            continue  # mentioned by more than one program
        drops.setdefault(i, []).append(x)
    return drops


def check_trace(trace):
    """Shape checks of an answer before replaying it; raises Divergence."""
    if type(trace) is not dict or trace.get("format") != B.TRACE_FORMAT:
        raise B.Divergence("not a %s trace" % B.TRACE_FORMAT)
    ev = trace.get("events")
    if type(ev) is not list or len(ev) > B.MAX_EVENTS:
        raise B.Divergence("missing or oversized event list")
    if type(trace.get("inputs")) is not dict or type(trace.get("grid")) is not list:
        raise B.Divergence("malformed trace header")


def _check_layout(grid, layout):
    """A trace's `grid_cores` checked against its grid (Divergence when malformed)."""
    Divergence = B.Divergence
    if type(layout) is not list or len(layout) != len(grid):
        raise Divergence("malformed grid_cores")
    for n, spec in zip(grid, layout):
        if spec is None:
            continue
        if (type(spec) is not list or len(spec) != 2 or type(spec[0]) is not list
                or not spec[0] or not all(type(f) is int and 0 < f <= 1 << 20 for f in spec[0])
                or type(spec[1]) is not int or not 0 <= spec[1] < len(spec[0])
                or math.prod(spec[0]) != n):
            raise Divergence("malformed grid_cores entry %r" % (spec,))
    return layout


def replay(trace, inputs, target="trn2", grid=None, numerics=True, input_dtypes=None,
           kernel_path="<kernel>", hotspots=True, timing=True, read_only=(), checked=False,
           lnc=None):
    """Re-execute `trace` with `inputs` (name -> numpy array / TensorSpec / scalar). Returns a
    SimResult like `simulate`; with timing=False only its outputs mean anything (no
    instruction is timed: latency and metrics are zero; for a trace already timed once).
    Raises NkiCompileError / NkiRuntimeError from the simulator, and NkiForbiddenAccess
    when the trace does not replay as recorded. read_only: names of inputs the kernel must
    not write (their arrays are used without a copy and never changed); an instruction that
    writes one raises NkiInputWritten. checked: the caller replayed this trace before, with
    timing, on inputs of the same shapes and dtypes; a replay without timing then skips the
    on-chip capacity check (a function of the trace alone) and the liveness it needs.
    lnc: the logical core's degree (default: the target's; machine/cores.py); ValueError for
    a degree the target lacks."""
    # A replay makes a few objects per event and no reference cycles: the cyclic collector
    # would only walk the trace and its plans again and again (a fifth of a first replay)
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _replay(trace, inputs, target, grid, numerics, input_dtypes, kernel_path,
                       hotspots, timing, read_only, checked, lnc)
    finally:
        if collecting:
            gc.enable()


def _replay(trace, inputs, target, grid, numerics, input_dtypes, kernel_path, hotspots,
            timing, read_only, checked, lnc=None):
    try:
        check_trace(trace)
        grid = _norm_grid(trace["grid"] if grid is None else grid)
        if list(grid) != trace["grid"] or math.prod(grid) > B.MAX_GRID:
            raise B.Divergence("grid %s differs from the recorded %s" % (list(grid), trace["grid"]))
        layout = trace.get("grid_cores")
        if layout is not None:
            layout = _check_layout(grid, layout)
    except B.Divergence as d:
        raise B.NkiForbiddenAccess("the kernel's instruction trace is invalid: %s" % d)
    tgt = C.get_target(target)
    degree = CORES.lnc_for(tgt.name, lnc)
    if runtime.CUR is not None:
        raise RuntimeError("nkisim.replay is not reentrant")
    table = B.api_table()
    events = trace["events"]
    prep = _prepared(events, table, kernel_path)
    rp = _Replayer(table, prep.lines)
    sim = runtime.Sim(tgt, numerics, timing, liveness=not checked)
    sim.grid = grid
    CORES.attach(sim, grid, degree, layout)
    if hotspots and timing:
        sim.sched.start_attribution(E.current_kernel_line)
    E.set_kernel_files({kernel_path})
    originals = {}
    bound = {}  # input name -> its tensor (which inputs an instruction read, see below)
    pids = [list(p) for p in itertools.product(*[range(n) for n in grid])]
    dts = input_dtypes or {}
    try:
        runtime.CUR = sim
        ids = trace["inputs"]
        for name, pid in ids.items():
            if name not in inputs or type(pid) is not int:
                raise B.Divergence("trace input %r is not an input of this problem" % (name,))
        for name, a in inputs.items():
            if name not in ids:
                continue
            if isinstance(a, TensorSpec):
                t = _spec_tensor(a, dts.get(name))
            else:
                arr = np.asarray(a)
                t = _input_tensor(arr, numerics, dts.get(name), read_only=name in read_only)
                if name in read_only:
                    rp.read_only[id(t.st)] = name
                elif isinstance(a, np.ndarray):
                    originals[name] = (a, t)
            rp.objs[ids[name]] = t
            bound[name] = t
        keep = list(ids.values())
        _refs(trace.get("ret"), keep)
        keep = set(keep)
        starts = prep.starts
        if len(starts) != len(pids):
            raise B.Divergence("the trace ran %d of %d programs" % (len(starts), len(pids)))
        for k, at in enumerate(starts):
            ev = events[at]
            if len(ev) != 2 or ev[1] != pids[k]:
                raise B.Divergence("programs out of order")
        ends = starts[1:] + [len(events)]
        rz = SYNC.Rendezvous(grid)
        sim.sync = rz
        with np.errstate(all="ignore"):
            # events before the first program ran at import time
            runtime.CUR = None
            prelude = _Program(0, starts[0] if starts else len(events))
            _run_events(rp, sim, events, prep, keep, prelude, rz)
            if prelude.pos < prelude.end or prelude.affine or prelude.ordered:
                raise B.Divergence("loop or sync events before the first program")
            progs = [None] * len(pids)
            done = [False] * len(pids)
            current = None
            while True:
                # the lowest program that has not ended and waits for no partner; without
                # sync calls, each program in turn from start to end
                k = next((j for j in range(len(pids))
                          if not done[j] and j not in rz.waiting), None)
                if k is None:
                    break
                ps = progs[k]
                if ps is None:
                    ps = progs[k] = _Program(starts[k] + 1, ends[k])
                if current is not k:
                    if current is not None and not done[current]:
                        progs[current].save(sim)
                    runtime.CUR = sim
                    ps.restore(sim, pids[k])
                    CORES.start_program(sim, sim.program_id)
                    current = k
                _run_events(rp, sim, events, prep, keep, ps, rz)
                if ps.pos >= ps.end:
                    done[k] = True
                    if ps.affine or ps.ordered:
                        raise B.Divergence(
                            "unbalanced loop events: program %s leaves %d affine_range and %d "
                            "sequential_range loops open" % (pids[k], len(ps.affine),
                                                             ps.ordered))
            SYNC.check_done(rz)
        runtime.CUR = sim
        ret = rp.val(trace.get("ret"))
        _check_ret(ret)
        res = finish(sim, ret, originals, numerics)
        # a timed replay records every access: the inputs some instruction read (a reshape
        # shares its original's access history); None when not timed
        res.inputs_read = sorted(n for n, t in bound.items()
                                 if t.st.dep.last >= 0 or t.st.dep.rd) if timing else None
        return res
    except B.Divergence as d:
        raise B.NkiForbiddenAccess("the kernel's instruction trace does not replay: %s" % d)
    except E.NkiError as e:
        if e.line is None:
            e.line = E.traceback_kernel_line(e.__traceback__)
            e.args = (str(e),)
        raise
    except RecursionError:
        raise
    except Exception as e:
        line = E.traceback_kernel_line(e.__traceback__)
        raise E.NkiCompileError("%s: %s" % (type(e).__name__, e), line) from None
    finally:
        runtime.CUR = None
        sim.last_st = None
        sim.pool = None
        E.set_kernel_files(())


class _Program:
    """Where one program of the launch stands in the trace: its next event, the end of its
    events, its open loops, and what the simulator keeps for it while another runs."""
    __slots__ = ("pos", "end", "affine", "ordered", "shared_index", "sched")

    def __init__(self, pos, end):
        self.pos = pos
        self.end = end
        self.affine = []   # trip counts of the affine loops open in this program
        self.ordered = 0   # sequential_range loops open in this program
        self.shared_index = 0
        self.sched = None  # the scheduler's loop state while suspended

    def save(self, sim):
        s = sim.sched
        if hasattr(s, "flush_groups"):
            s.flush_groups()
        self.shared_index = sim.shared_index
        self.sched = (getattr(s, "loops", None), getattr(s, "loop_iter", None),
                      getattr(s, "ordered", 0))

    def restore(self, sim, pid):
        sim.program_id = tuple(pid)
        sim.shared_index = self.shared_index
        s = sim.sched
        if self.sched is None:
            if hasattr(s, "loops"):
                s.loops, s.loop_iter, s.ordered = [], [], 0
        else:
            loops, loop_iter, ordered = self.sched
            if loops is not None:
                s.loops, s.loop_iter = loops, loop_iter
            if hasattr(s, "ordered"):
                s.ordered = ordered
            self.sched = None


def _run_events(rp, sim, events, prep, keep, ps, rz):
    """Replay `ps`'s events until its end, or until a sync call suspends its program (the
    call's partner has not arrived); `ps.pos` is then the event after that call."""
    plans, drops = prep.plans, prep.drops
    affine = ps.affine
    i, hi = ps.pos, ps.end
    while i < hi:
        ev = events[i]
        plan = plans[i]
        i += 1
        if plan is not None:
            rp.run_plan(plan)
        elif type(ev) is list and ev and ev[0] == "pid":
            raise B.Divergence("programs out of order")
        elif type(ev) is list and ev and ev[0] == "ordered":
            if len(ev) != 2 or ev[1] not in (1, -1):
                raise B.Divergence("malformed ordering event")
            if ev[1] == 1:
                ps.ordered += 1
                sim.sched.begin_ordered()
            else:
                if ps.ordered == 0:
                    raise B.Divergence("a sequential_range ends that never began")
                ps.ordered -= 1
                sim.sched.end_ordered()
            continue
        elif type(ev) is list and ev and ev[0] == "affine":
            if len(ev) != 2 or type(ev[1]) is not int or not (ev[1] == -1 or ev[1] >= 0):
                raise B.Divergence("malformed affine-loop event")
            if ev[1] == -1:
                if not affine:
                    raise B.Divergence("an affine_range ends that never began")
                affine.pop()
                sim.sched.end_affine()
            else:
                affine.append(ev[1])
                sim.sched.begin_affine(ev[1])
            continue
        elif type(ev) is list and ev == ["affine_next"]:
            if not affine or affine[-1] > C.GROUP_MAX_TRIP:
                raise B.Divergence("an iteration event outside a small affine_range")
            sim.sched.next_iteration()
            continue
        else:
            rp.event(ev)
        dropped = drops.get(i - 1)
        if dropped is not None:
            for x in dropped:
                if x not in keep:
                    rp.objs.pop(x, None)
        if rz.suspend:
            rz.suspend = False
            break
    ps.pos = i


def _check_ret(ret):
    from ..data.buffers import Tensor
    items = ret if isinstance(ret, (tuple, list)) else (ret,)
    for t in items:
        if t is not None and not isinstance(t, Tensor) and not B.is_value(t):
            raise B.Divergence("the kernel returned %s" % type(t).__name__)
