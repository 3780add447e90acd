"""Record mode (the untrusted side): run a kernel on placeholders and record its API calls.

The kernel imports proxy modules (`nki`, `nki.language`, ... and the `neuronxcc.nki` names)
whose API entries are `Proxy` objects. Every call, attribute read and operator on a proxy is
performed on the real simulator (numerics off: inputs are shape/dtype placeholders, no data
exists in this process) and appended to the trace as one event; results that are simulator
objects come back as new proxies. The trace, not anything the kernel computes, is what the
trusted side replays (`replay.py`). Rules for what may cross: `boundary.py`.

Events (JSON lists):
  ["pid", [i, j, ...]]                          start of one SPMD program
  ["ordered", 1 | -1]                           entering / leaving a sequential_range loop
  ["affine", trip | -1]                         entering / leaving a small affine_range loop
  ["affine_next"]                               next iteration of an open affine_range loop of
                                                at most GROUP_MAX_TRIP iterations
  ["c", line, callee, [args], {kwargs}, result]  call
  ["g", line, object, name, result]              attribute read
  ["o", line, operator, [args], result]          operator (boundary.OPERATORS)
Results: a value, {"$n": id} (new simulator object), {"$r": id} (an object seen before),
{"$x": 1} (StopIteration from next), or a tuple/list of those.
"""
import gc
import importlib
import itertools
import sys
import types

from . import boundary as B
from .. import errors as E
from ..machine import constants as C
from ..machine import runtime
from ..machine import sync as SYNC

_REC = None  # the active Recorder


class Proxy:
    """What kernel code holds instead of a simulator object."""
    __slots__ = ("_nkisim_id",)

    def __init__(self, pid):
        object.__setattr__(self, "_nkisim_id", pid)

    # -- attributes ----------------------------------------------------------------------
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _REC.getattr(self, name)

    def __setattr__(self, name, value):
        raise _forbidden("setting attribute %r on a simulator object" % (name,))

    def __delattr__(self, name):
        raise _forbidden("deleting attribute %r of a simulator object" % (name,))

    def __call__(self, *args, **kwargs):
        return _REC.call(self, args, kwargs)

    # -- protocols -----------------------------------------------------------------------
    def __getitem__(self, key):
        return _REC.op("getitem", (self, key))

    def __setitem__(self, key, value):
        _REC.op("setitem", (self, key, value))

    def __delitem__(self, key):
        raise _forbidden("deleting items of a simulator object")

    def __iter__(self):
        return _REC.op("iter", (self,))

    def __next__(self):
        return _REC.op("next", (self,))

    def __len__(self):
        return _REC.op("len", (self,))

    def __bool__(self):
        if _object_truth(self):
            return True
        return _REC.op("truth", (self,))

    def __index__(self):
        return _REC.op("index", (self,))

    def __int__(self):
        return _REC.op("int", (self,))

    def __float__(self):
        return _REC.op("float", (self,))

    def __contains__(self, item):
        return _REC.op("contains", (self, item))

    def __hash__(self):
        return object.__hash__(self)

    def __repr__(self):
        return _REC.describe(self)

    __str__ = __repr__

    # -- numpy must not see simulator objects --------------------------------------------
    def __array__(self, *a, **k):
        raise _forbidden("numpy applied to a kernel tensor or index (outside NKI "
                         "instructions)")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raise _forbidden("numpy function %r applied to a kernel tensor or index"
                         % (getattr(ufunc, "__name__", ufunc),))

    def __array_function__(self, func, types_, args, kwargs):
        raise _forbidden("numpy function %r applied to a kernel tensor or index"
                         % (getattr(func, "__name__", func),))

    def __reduce__(self):
        raise _forbidden("serializing a simulator object")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def _binary(name):
    def fwd(self, other):
        return _REC.op(name, (self, other))

    def rev(self, other):
        return _REC.op(name, (other, self))
    return fwd, rev


for _n, _op in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "truediv"),
                ("floordiv", "floordiv"), ("mod", "mod"), ("pow", "pow"),
                ("matmul", "matmul"), ("lshift", "lshift"), ("rshift", "rshift"),
                ("and", "and_"), ("or", "or_"), ("xor", "xor")):
    _f, _r = _binary(_op)
    setattr(Proxy, "__%s__" % _n, _f)
    setattr(Proxy, "__r%s__" % _n, _r)
    setattr(Proxy, "__i%s__" % _n, _binary("i" + _op.rstrip("_"))[0])
for _n in ("lt", "le", "gt", "ge"):
    setattr(Proxy, "__%s__" % _n, _binary(_n)[0])


def _by_identity(a, b):
    """`==` / `!=` that NKI evaluates as Python object comparison at trace time: with None
    (`bias != None` on an optional tensor), with an API entry (typing's `Optional[nl.ndarray]`
    compares its arguments), or with an object that is neither a simulator object nor a plain
    value (a type, a kernel-defined object). Such a comparison records no event."""
    for x in (a, b):
        if x is None:
            return True
        if type(x) is Proxy:
            if object.__getattribute__(x, "_nkisim_id") in _REC.names:
                return True
        elif not B.is_value(x):
            return True
    return False


def _compare(name):
    def f(self, other):
        if _by_identity(self, other):
            return (self is other) == (name == "eq")
        return _REC.op(name, (self, other))
    return f


for _n in ("eq", "ne"):
    setattr(Proxy, "__%s__" % _n, _compare(_n))


def _object_truth(proxy):
    """`if tensor:` in a kernel of the `nki` namespace: NKI 0.3+ traces kernels as Python and a
    tensor is an object, so it is true (the NKI Library writes `if params.expert_index:` for
    an optional tensor); no event is recorded. Legacy kernels keep the simulator's refusal."""
    from ..api import hwrules
    from ..data.buffers import Tensor
    obj = _REC.objs.get(object.__getattribute__(proxy, "_nkisim_id"))
    return isinstance(obj, Tensor) and hwrules.strict()


def _union(fwd):
    """`nl.ndarray | Tuple[nl.ndarray, nl.ndarray]` in an annotation: with an API entry or a
    typing object on one side `|` is Python's, not a simulator operation (typing answers)."""
    def f(self, other):
        if _by_identity(self, other):
            return NotImplemented
        return fwd(self, other)
    return f


Proxy.__or__ = _union(Proxy.__or__)
Proxy.__ror__ = _union(Proxy.__ror__)
for _n, _op in (("neg", "neg"), ("pos", "pos"), ("abs", "abs"), ("invert", "invert")):
    setattr(Proxy, "__%s__" % _n, (lambda o: lambda self: _REC.op(o, (self,)))(_op))
Proxy.__hash__ = object.__hash__


_FREEZE_EVERY = 5000
_PLAIN = frozenset((type(None), bool, int, str))
_SLICE_PARTS = frozenset((type(None), int))


def _forbidden(what):
    return B.NkiForbiddenAccess("forbidden: %s" % what, E.current_kernel_line())


class Recorder:
    """Holds the real objects behind proxies and the event list."""

    def __init__(self):
        self.objs = {}       # trace id -> real object
        self.names = {}      # trace id -> API name (static entries)
        self.ids = {}        # id(real object) -> trace id
        self.proxies = {}    # trace id -> Proxy
        self.events = []
        self.error = None    # first simulator error, even if the kernel caught it
        self.static_cache = {}
        self.static_ids = {}  # id(real object) -> trace id of its API entry
        self._next = itertools.count(1)

    # -- identities -------------------------------------------------------------------------
    def static(self, name, obj):
        pid = next(self._next)
        self.objs[pid] = obj
        self.names[pid] = name
        self.static_ids.setdefault(id(obj), pid)
        p = Proxy(pid)
        self.proxies[pid] = p
        return p

    def _bind(self, obj):
        key = id(obj)
        pid = self.static_ids.get(key)
        if pid is not None and self.objs[pid] is obj:
            # an API entry returned by the API (`t.buffer` is `nl.sbuf`): the kernel gets
            # the entry's own proxy, so `t.buffer == nl.sbuf` holds as in NKI
            return {"$s": self.names[pid]}, self.proxies[pid]
        pid = self.ids.get(key)
        if pid is not None and self.objs[pid] is obj and pid not in self.names:
            return {"$r": pid}, self.proxies[pid]
        pid = next(self._next)
        self.objs[pid] = obj
        self.ids[key] = pid
        p = Proxy(pid)
        self.proxies[pid] = p
        return {"$n": pid}, p

    def bind_input(self, obj):
        return self._bind(obj)

    # -- encoding ---------------------------------------------------------------------------
    def _ref(self, v):
        if type(v) is Proxy:
            pid = object.__getattribute__(v, "_nkisim_id")
            if pid in self.names:
                return {"$s": self.names[pid]}
            return {"$r": pid}
        if callable(v):
            raise _forbidden("a Python callable (%s) cannot be passed to the NKI API"
                             % getattr(v, "__name__", type(v).__name__))
        raise _forbidden("a value of type %s cannot be passed to the NKI API"
                         % type(v).__name__)

    def _real(self, e):
        return B.decode(e, self._deref)

    def _arg(self, v):
        """(encoding, what the simulator gets) of an argument: B.encode(v, self._ref) and
        its decoding. Immutable plain values (ints, strings, slices of ints, flat tuples of
        those and proxies) are passed as they are, which is what decoding gives back; the
        rest goes through encode and decode."""
        t = type(v)
        if t in _PLAIN:
            return v, v
        if t is Proxy:
            pid = object.__getattribute__(v, "_nkisim_id")
            name = self.names.get(pid)
            if name is not None:
                return {"$s": name}, B.api_table()[name]
            return {"$r": pid}, self.objs[pid]
        if t is slice:
            a, b, c = v.start, v.stop, v.step
            if type(a) in _SLICE_PARTS and type(b) in _SLICE_PARTS and type(c) in _SLICE_PARTS:
                return {"$sl": [a, b, c]}, v
        elif t is tuple:
            enc = []
            real = []
            for x in v:
                tx = type(x)
                if tx is tuple or tx is list or tx is dict:
                    break
                e, r = self._arg(x)
                enc.append(e)
                real.append(r)
            else:
                return {"$t": enc}, tuple(real)
        e = B.encode(v, self._ref)
        return e, self._real(e)

    def _deref(self, e):
        if "$r" in e:
            return self.objs[e["$r"]]
        return B.api_table()[e["$s"]]

    def _result(self, v, depth=0):
        """(encoding, what the kernel gets) of a real result."""
        t = type(v)
        if B.dynamic_object(v):
            return self._bind(v)
        if t in (tuple, list) and not B.is_value(v):
            if depth > B.MAX_DEPTH:
                raise _forbidden("result nested too deeply")
            parts = [self._result(x, depth + 1) for x in v]
            enc = [p[0] for p in parts]
            return ({"$t": enc} if t is tuple else enc), t(p[1] for p in parts)
        if B.is_value(v):
            if t is type(None) or t in (bool, int, float, str):
                return v, v
            enc = B.encode(v, self._ref)
            return enc, B.decode(enc, self._deref)  # the kernel gets a copy
        raise _forbidden("the NKI API returned %s, which kernel code may not hold"
                         % type(v).__name__)

    def _perform(self, event, fn):
        if len(self.events) >= B.MAX_EVENTS:
            raise B.NkiForbiddenAccess("the kernel issued more than %d API operations"
                                       % B.MAX_EVENTS, E.current_kernel_line())
        try:
            res = fn()
        except StopIteration:
            event.append({"$x": 1})
            self.events.append(event)
            raise
        except E.NkiError as e:
            if e.line is None:
                e.line = event[1]
                e.args = (str(e),)
            if self.error is None:
                self.error = e
            raise
        except Exception as e:
            if self.error is None:
                self.error = E.NkiCompileError("%s: %s" % (type(e).__name__, e), event[1])
            raise
        enc, out = self._result(res)
        event.append(enc)
        self.events.append(event)
        if len(self.events) % _FREEZE_EVERY == 0:
            # the trace only grows: keep the cyclic collector from re-walking it (it would
            # otherwise cost as much as the recording itself on large kernels)
            gc.freeze()
        return out

    # -- operations -------------------------------------------------------------------------
    def call(self, proxy, args, kwargs):
        line = E.current_kernel_line()
        fenc, f = self._arg(proxy)
        aenc = []
        a = []
        for x in args:
            e, r = self._arg(x)
            aenc.append(e)
            a.append(r)
        kenc = {}
        k = {}
        for n, x in kwargs.items():
            n = str(n)
            kenc[n], k[n] = self._arg(x)
        return self._perform(["c", line, fenc, aenc, kenc], lambda: f(*a, **k))

    def getattr(self, proxy, name):
        line = E.current_kernel_line()
        if name.startswith("_"):
            raise _forbidden("private attribute %r of a simulator object" % (name,))
        oenc = self._ref(proxy)
        obj = self._real(oenc)
        try:
            val = B.read_attr(obj, name)
        except AttributeError:
            raise AttributeError("%s has no attribute %r" % (self.describe(proxy), name))
        if not B.attr_allowed(obj, name, val):
            raise _forbidden("attribute %r of %s is not part of the NKI API"
                             % (name, type(obj).__name__))
        return self._perform(["g", line, oenc, name], lambda: val)

    def op(self, name, args):
        line = E.current_kernel_line()
        aenc = []
        a = []
        for x in args:
            e, r = self._arg(x)
            aenc.append(e)
            a.append(r)
        f = B.OPERATORS[name]
        return self._perform(["o", line, name, aenc], lambda: f(*a))

    def describe(self, proxy):
        pid = object.__getattribute__(proxy, "_nkisim_id")
        if pid in self.names:
            return "<nki %s>" % self.names[pid]
        obj = self.objs.get(pid)
        try:
            return repr(obj)
        except Exception:
            return "<nki object>"


# ---- proxy modules --------------------------------------------------------------------------
def _proxy_modules(rec):
    """{module name: proxy module} mirroring activate's module tree."""
    from ..api.activate import _build, _isa_constants
    real = _build()
    real.update(_isa_constants(real))  # `from neuronxcc.nki.isa.constants import oob_mode`
    table = B.api_table()
    out = {}
    by_real = {}
    for mname, m in real.items():
        if id(m) in by_real:
            out[mname] = by_real[id(m)]
            continue
        pm = types.ModuleType(mname, getattr(m, "__doc__", None))
        pm.__nkisim__ = True
        if hasattr(m, "__path__"):
            pm.__path__ = []
        by_real[id(m)] = pm
        out[mname] = pm
    for mname, m in real.items():
        pm = out[mname]
        canon = mname[len("neuronxcc."):] if mname.startswith("neuronxcc.nki") else mname
        for name, obj in list(vars(m).items()):
            if name == "__version__":
                setattr(pm, name, obj)
            if name.startswith("__"):
                continue
            if (canon, name) in _PROXY_TYPES:
                setattr(pm, name, Proxy)  # isinstance(x, nki.tensor) and annotations
                continue
            if isinstance(obj, types.ModuleType):
                for n2, m2 in real.items():
                    if m2 is obj:
                        setattr(pm, name, out[n2])
                        break
                continue
            full = "%s.%s" % (canon, name)
            if full in table:
                if full not in rec.static_cache:
                    rec.static_cache[full] = rec.static(full, table[full])
                setattr(pm, name, rec.static_cache[full])
            elif _raw_ok(canon, name, obj):
                setattr(pm, name, obj)
    return out


# Types of simulator objects kernel code names (annotations, isinstance): on this side, what
# it holds is a Proxy.
_PROXY_TYPES = {("nki", "tensor"), ("nki.compiler.backends.neuron.indexing", "TileIndex")}


def _raw_ok(mname, name, obj):
    if name.startswith("_"):
        return False
    if name in B.RAW_NAMES or B.is_value(obj):
        return True
    if mname in ("nki", "nki.typing") or (mname == "nki.compiler" and callable(obj)):
        return not isinstance(obj, type)  # decorators and annotations (pure Python)
    if mname in ("nki.isa", "nki.isa.constants") and isinstance(obj, type) \
            and obj.__module__ in ("nkisim.api.isa", "nkisim.api.isa_base"):
        return True  # enum namespaces of ints
    return False


# ---- the child's main routines -------------------------------------------------------------
class Loaded:
    """A kernel imported (through proxy modules) and selected in this process."""

    def __init__(self, rec, name, kernel, config):
        self.rec = rec
        self.name = name
        self.kernel = kernel
        self.config = config


def _fail(e):
    kind = ("forbidden_access" if isinstance(e, B.NkiForbiddenAccess) else
            "runtime_error" if isinstance(e, E.NkiRuntimeError) else "compile_error")
    line = e.line if e.line is not None else E.traceback_kernel_line(e.__traceback__)
    return {"ok": False, "kind": kind, "message": e.message, "line": line}


def prepare():
    """Import what every kernel needs before the kernel is known."""
    from ..machine import simulator
    B.api_table()
    return simulator


def load(config):
    """Install proxy modules, import the kernel file, select the kernel. A `Loaded`, or a
    failure answer dict."""
    global _REC
    rec = Recorder()
    _REC = rec
    path = config["kernel_path"]
    E.set_kernel_files({path})
    for name, mod in _proxy_modules(rec).items():
        sys.modules[name] = mod
    load_kernel = _loader(config.get("loader"))
    try:
        kname, kernel = load_kernel(config, (E.NkiError,))
    except Exception as f:
        if not all(hasattr(f, a) for a in ("kind", "message", "line")):
            raise
        kind = f.kind
        cause = f.__context__
        if isinstance(cause, B.NkiForbiddenAccess):
            kind = "forbidden_access"
        return {"ok": False, "kind": kind, "message": f.message, "line": f.line}
    return Loaded(rec, kname, kernel, config)


def _loader(spec):
    """The caller's kernel loader: `spec` {"path", "module"} names a module whose
    `load(config, compile_errors)` imports the kernel file and selects the kernel, returning
    (name, kernel) or raising an exception with `kind`, `message` and `line`. The simulator
    knows nothing of who loads kernels (the harness passes its own, harnesslib/simchild.py)."""
    if (type(spec) is not dict or type(spec.get("path")) is not str
            or type(spec.get("module")) is not str):
        raise ValueError("the kernel process needs a loader {path, module} in its config")
    if spec["path"] not in sys.path:
        sys.path.insert(0, spec["path"])
    return importlib.import_module(spec["module"]).load


def trace(loaded, request):
    """Run the loaded kernel on placeholders for `request["inputs"]`; the answer dict."""
    from ..machine import constants as C
    from ..machine.simulator import TensorSpec, _norm_grid, _spec_tensor, unwrap

    rec = loaded.rec
    fn, g = unwrap(loaded.kernel)
    grid = request.get("grid")
    if grid is None:
        grid = g
    try:
        from ..machine.cores import grid_layout
        layout = grid_layout(grid)  # the nc axes of the launch, for the replay's cores
        grid = _norm_grid(grid)
        tgt = C.get_target(loaded.config["target"])
    except Exception as e:
        return {"ok": False, "kind": "compile_error", "message": "%s: %s" % (type(e).__name__, e),
                "line": None}
    # the trusted replay times the trace and checks its capacity; recording it needs neither
    sim = runtime.Sim(tgt, numerics=False, timing=False, liveness=False)
    sim.grid = grid
    sim.sync = SYNC.RECORDING  # sync calls are matched by the replay, not here
    close_loops = _record_ordering(sim, rec)
    runtime.CUR = sim
    inputs = {}
    kwargs = {}
    dts = request.get("input_dtypes") or {}
    try:
        for name, s in request["inputs"].items():
            if "shape" in s:
                t = _spec_tensor(TensorSpec(s["shape"], s["dtype"]), dts.get(name))
                enc, p = rec.bind_input(t)
                inputs[name] = enc["$n"]
                kwargs[name] = p
            else:
                kwargs[name] = B.decode(s["value"], rec._deref)
        if request.get("grid") is None and getattr(loaded.kernel, "launched_by_hook", False):
            grid, layout = _hook_grid(sim, rec, fn, kwargs, grid, layout)
            sim.grid = grid
        ret = None
        for pid in itertools.product(*[range(n) for n in grid]):
            rec.events.append(["pid", list(pid)])
            sim.program_id = pid
            sim.shared_index = 0
            r = fn(**kwargs)
            close_loops()
            if ret is None:
                ret = r
        if rec.error is not None:
            raise rec.error
        ret_enc = B.encode(ret, rec._ref)
    except E.NkiError as e:
        return _fail(e)
    except RecursionError as e:
        return {"ok": False, "kind": "runtime_error", "message": "RecursionError: %s" % e,
                "line": E.traceback_kernel_line(e.__traceback__)}
    except Exception as e:
        return {"ok": False, "kind": "compile_error", "message": "%s: %s" % (type(e).__name__, e),
                "line": E.traceback_kernel_line(e.__traceback__)}
    finally:
        runtime.CUR = None
    return {"ok": True, "format": B.TRACE_FORMAT, "kernel_name": loaded.name,
            "grid": list(grid), "grid_cores": layout, "inputs": inputs, "events": rec.events,
            "ret": ret_enc}


def _hook_grid(sim, rec, fn, kwargs, grid, layout):
    """The launch grid a problem's call_kernel chooses (`kernel[2](...)`): its code runs up to
    the kernel's launch, which reports the grid instead of running (frontend.GridProbe); what
    the hook recorded before it is dropped. (grid, layout) unchanged when it launches plainly."""
    from ..api.frontend import GridProbe
    from ..machine.cores import grid_layout
    from ..machine.simulator import _norm_grid
    mark = len(rec.events)
    sim.grid_probe = True
    try:
        fn(**kwargs)
    except GridProbe as probe:
        if probe.grid is not None:
            layout = grid_layout(probe.grid)
            grid = _norm_grid(probe.grid)
    finally:
        sim.grid_probe = False
        del rec.events[mark:]
    return grid, layout


def _record_ordering(sim, rec):
    """sequential_range switches the scheduler to program order from inside its iterator, not
    through an API call; record those switches so the replay schedules the same way."""
    begin, end = sim.sched.begin_ordered, sim.sched.end_ordered

    def begin_ordered():
        rec.events.append(["ordered", 1])
        begin()

    def end_ordered():
        rec.events.append(["ordered", -1])
        end()

    sim.sched.begin_ordered = begin_ordered
    sim.sched.end_ordered = end_ordered
    abegin, aend = sim.sched.begin_affine, sim.sched.end_affine
    trips = []  # trip counts of the affine loops open now

    def begin_affine(trip):
        trips.append(int(trip))
        rec.events.append(["affine", int(trip)])
        abegin(trip)

    def next_iteration():
        # only loops whose narrow instructions may be grouped need their iterations
        if trips and trips[-1] <= C.GROUP_MAX_TRIP:
            rec.events.append(["affine_next"])

    def end_affine():
        if not trips:
            return  # an iterator finalised after its program closed the loop
        trips.pop()
        rec.events.append(["affine", -1])
        aend()

    def close():
        """Program end: close the loops the kernel left open (iterators kept alive)."""
        while trips:
            end_affine()

    sim.sched.begin_affine = begin_affine
    sim.sched.end_affine = end_affine
    sim.sched.next_iteration = next_iteration
    return close
