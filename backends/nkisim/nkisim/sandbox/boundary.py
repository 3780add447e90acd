"""The boundary between kernel code and the simulator, shared by the recorder and the replay.

A kernel run in the sandbox (`record.py`) never holds simulator objects: it holds proxies,
and every operation on a proxy becomes one trace event (callee, arguments, result). The
trusted side (`replay.py`) re-executes the events on its own simulator objects. Both sides
use the rules of this module, so a trace can only express what an honest kernel can do:

- API names: the public functions and objects of `nki.language`, `nki.isa`, `nki.compiler`
  (the `api_table()`), referenced by name;
- simulator objects created while the kernel runs (tensors, index expressions, buffers,
  iterators over them), referenced by trace id;
- values: None, bool, int, float, str, slices, ranges, Ellipsis, tuples/lists/dicts of
  values, numpy constant arrays and scalars, dtypes, numpy ufuncs, the numpy functions the
  simulator knows as operators (`np.max`, `np.sum`, `np.copy` ... as reduce or activation
  ops, by name);
- kernel-defined callables (functions, lambdas, `functools.partial`) where the API takes a
  callable it never calls in the simulator (`ncc.psum.alloc(allocator)`: addresses are not
  modelled): only their name crosses, as a `KernelCallable`;
- attribute reads of public names; objects (not plain values) and methods only through the
  documented surface `SURFACE`;
- the operators of `OPERATORS`.
Anything else (storages, numpy views of simulator data, modules, Python callables, private
attributes) is refused with `NkiForbiddenAccess`.
"""
import base64
import functools
import io
import math
import operator
import types

import numpy as np

from ..api import table as _api_table
from ..data import dtypes as D
from ..data.buffers import Buffer, IExpr, MGrid, ParDim, Tensor
from ..errors import NkiError

TRACE_FORMAT = "nkisim-trace/1"
MAX_DEPTH = 24
MAX_ARRAY_ELEMENTS = 1 << 24
MAX_EVENTS = 4_000_000
MAX_TRACE_BYTES = 512 << 20
MAX_GRID = 4096


class NkiForbiddenAccess(NkiError):
    """Kernel code reached outside the NKI API (simulator internals, data outside
    instructions, numpy applied to kernel tensors)."""


class NkiInputWritten(NkiError):
    """The kernel wrote into an input the caller passed as read-only (`replay(read_only=)`);
    `names` are the read-only inputs among the arguments of the refused instruction."""

    def __init__(self, message, line=None, names=()):
        super().__init__(message, line)
        self.names = tuple(names)


class Divergence(Exception):
    """A trace does not replay as recorded (tampered or data dependent)."""


# The documented NKI surface of the objects kernel code holds: the one table attribute reads
# are judged by (record and replay alike). Per simulator type, attribute name -> kind:
#   "value"   gives a plain value (shape, dtype, ...), copied across;
#   "object"  gives another simulator object (a tensor, a buffer, an index);
#   "method"  a method kernel code calls (`t.reshape(...)`, `t.broadcast_to(...)`), held as a
#             `BoundMethod` of that name.
# Tensor: the attributes and methods of `nki.tensor` and `nki.language.NkiTensor` in the NKI
# API reference (names the simulator does not implement give AttributeError, not a refusal).
# Any other public attribute whose value is a plain value may be read (no data exists on the
# recording side); objects only through this table.
TENSOR_SURFACE = {
    "shape": "value", "dtype": "value", "ndim": "value", "size": "value",
    "itemsize": "value", "nbytes": "value", "name": "value", "offset": "value",
    "strides": "value",
    "T": "object", "buffer": "object",
    "reshape": "method", "broadcast_to": "method", "view": "method", "ap": "method",
    "astype": "method", "expand_dims": "method", "assert_shape": "method",
    "broadcast": "method", "expand_dim": "method", "flatten_dims": "method",
    "permute": "method", "rearrange": "method", "reshape_dim": "method", "select": "method",
    "slice": "method", "squeeze_dim": "method", "get_pattern": "method",
    "is_contiguous": "method", "reinterpret_cast": "method", "vector_select": "method",
    "indirect": "method", "is_indirect": "method",
}
SURFACE = {
    "Tensor": TENSOR_SURFACE,
    "MGrid": {"p": "object", "x": "object", "y": "object", "z": "object"},
    "Buffer": {"view": "method"},
    "_AllocBuffer": {"alloc": "method", "mod_alloc": "method", "auto_alloc": "method"},
    "NkiTileGrid": {"data": "object", "buffer": "object"},
    "NkiBlockGrid": {"data": "object", "buffer": "object"},
}


def surface_of(obj):
    """The SURFACE entry of a simulator object's type (subclasses of Tensor share its)."""
    if isinstance(obj, Tensor):
        return TENSOR_SURFACE
    return SURFACE.get(type(obj).__name__, {})


class BoundMethod:
    """A documented method of a simulator object, as kernel code holds it (`f = t.reshape`):
    calling it calls the method by name."""
    __slots__ = ("obj", "name")

    def __init__(self, obj, name):
        self.obj = obj
        self.name = name

    def __call__(self, *args, **kwargs):
        return getattr(self.obj, self.name)(*args, **kwargs)

    def __repr__(self):
        return "<method %s of %s>" % (self.name, type(self.obj).__name__)


def read_attr(obj, name):
    """Attribute `name` of simulator object obj as kernel code sees it (methods of the
    surface as BoundMethod). AttributeError when obj has none."""
    val = getattr(obj, name)
    if surface_of(obj).get(name) == "method" and callable(val):
        return BoundMethod(obj, name)
    return val


# operator-module functions (plus len/iter/next/int/float/index) a trace may apply.
OPERATORS = {
    n: getattr(operator, n) for n in (
        "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lshift",
        "rshift", "and_", "or_", "xor", "neg", "pos", "abs", "invert", "lt", "le", "gt",
        "ge", "eq", "ne", "getitem", "setitem", "iadd", "isub", "imul", "itruediv",
        "ifloordiv", "imod", "ipow", "iand", "ior", "ixor", "ilshift", "irshift",
        "imatmul", "contains", "truth", "index")
}
OPERATORS.update({"len": len, "iter": iter, "next": next, "int": int, "float": float})

_TOKENS = (D.DTypeToken, D.MXDType)  # NKI dtypes numpy lacks (MX: trn3's microscaling types)
_ITER_TYPES = (type(iter(())), type(iter([])), type(iter(range(0))))


_ALLOC_BUFFER = []


def _alloc_buffer_type():
    """frontend._AllocBuffer (imported on first use: the front end imports this module)."""
    if not _ALLOC_BUFFER:
        from ..api.frontend import _AllocBuffer
        _ALLOC_BUFFER.append(_AllocBuffer)
    return _ALLOC_BUFFER[0]


def dynamic_object(v):
    """True when v is a simulator object a kernel may hold (through a proxy)."""
    t = type(v)
    if t in (Tensor, IExpr, MGrid, Buffer) or t in _ITER_TYPES:
        return True
    if isinstance(v, Tensor):  # ModularTensor (mod_alloc)
        return True
    if t is _alloc_buffer_type():
        return True
    if t.__name__ in ("NkiTileGrid", "NkiBlockGrid") and t.__module__ == "nkisim.api.grids":
        return True
    if t is BoundMethod:
        return dynamic_object(v.obj) and surface_of(v.obj).get(v.name) == "method"
    return False


def attr_allowed(obj, name, value):
    """May kernel code read attribute `name` of simulator object obj (giving value, as
    `read_attr` returns it)?"""
    if not isinstance(name, str) or not name or name.startswith("_"):
        return False
    if dynamic_object(value):
        kind = surface_of(obj).get(name)
        if type(value) is BoundMethod:
            return kind == "method" and value.obj is obj and value.name == name
        return kind in ("object", "method")
    return is_value(value)


# ---- the API table --------------------------------------------------------------------------
# The names come from the one API table (nkisim/api/table.json, written and checked by
# backends/nkisim/gen_api_table.py): "raw" names are objects the kernel receives as-is (pure
# Python, no simulator state: decorators, loop helpers, tile-size and enum namespaces), "api"
# names become named API proxies.
RAW_NAMES = _api_table.raw_names()
_API_MODULES = ("nki.language", "nki.isa", "nki.compiler")
# Underscore names that are public NKI operations under another name (nkisim/private.py):
# kernels reach them as `nisa._tiled_offloaded_memcpy(...)`.
PRIVATE_API = {"nki.isa": ("_tiled_offloaded_memcpy", "_tiled_offloaded_fma")}
# Modules of compiler-internal paths kernels import from: their functions (each an NKI
# operation under its private path, or raising when called: nkisim/private.py) are API
# entries too.
PRIVATE_MODULES = ("nki._private.private_api", "nki._private_kernels.RoPE",
                   "nki._private_kernels.qkv", "nki.compiler.backends.neuron.tensor")
_table = None


def _module_tree():
    from ..api.activate import _build
    return _build()


def api_table():
    """{'nki.language.exp': obj, ...}: the named API objects a trace may reference."""
    global _table
    if _table is not None:
        return _table
    table = {}
    mods = _module_tree()
    for mname in PRIVATE_MODULES:
        m = mods.get(mname) or mods.get("neuronxcc." + mname)
        for name, obj in vars(m).items() if m is not None else ():
            if isinstance(obj, types.FunctionType) and obj.__module__ == "nkisim.api.private":
                table["%s.%s" % (mname, name)] = obj
    for mname in _API_MODULES:
        m = mods[mname]
        for name in PRIVATE_API.get(mname, ()):
            if hasattr(m, name):
                table["%s.%s" % (mname, name)] = getattr(m, name)
        for name in _api_table.boundary_names(mname):
            obj = getattr(m, name, None)
            if obj is not None:
                table["%s.%s" % (mname, name)] = obj
    _table = table
    return table


# ---- values -----------------------------------------------------------------------------------
def is_value(v, depth=0):
    """A plain value that may cross the boundary by copy."""
    if depth > MAX_DEPTH:
        return False
    if v is None or v is Ellipsis or type(v) in (bool, int, float, str, complex, ParDim,
                                                   range) or type(v) in _TOKENS:
        return True
    if type(v) in (tuple, list):
        return all(is_value(x, depth + 1) for x in v)
    if type(v) is dict:
        return all(type(k) is str and is_value(x, depth + 1) for k, x in v.items())
    if type(v) is slice:
        return all(is_value(x, depth + 1) for x in (v.start, v.stop, v.step))
    if type(v) is np.ndarray:
        return v.dtype.kind in "biufc" and v.size <= MAX_ARRAY_ELEMENTS
    if isinstance(v, np.generic):
        return v.dtype.kind in "biufc"
    if isinstance(v, np.dtype):
        return v.kind in "biufc"
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v).kind in "biufc"
    if type(v) is np.ufunc:
        return getattr(np, v.__name__, None) is v
    return False


def _npy(a):
    buf = io.BytesIO()
    # np.array keeps a 0-d scalar 0-d (np.ascontiguousarray makes it 1-d)
    np.save(buf, np.array(a, order="C"), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _from_npy(text):
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
        a = np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, TypeError, OSError, EOFError) as e:
        raise Divergence("bad array constant: %s" % e)
    if type(a) is not np.ndarray or a.dtype.kind not in "biufc" or a.size > MAX_ARRAY_ELEMENTS:
        raise Divergence("bad array constant")
    return a


def encode(v, ref, depth=0):
    """JSON form of a value; `ref(obj)` encodes a non-value (proxy/simulator object) or raises
    NkiForbiddenAccess."""
    if depth > MAX_DEPTH:
        raise NkiForbiddenAccess("value nested too deeply to pass to the NKI API")
    t = type(v)
    if v is None or t is bool or t is str:
        return v
    if t is int:
        return v
    if t is float:
        return v if math.isfinite(v) else {"$f": repr(v)}
    if t is ParDim:
        return {"$pd": int(v)}
    if t is tuple:
        return {"$t": [encode(x, ref, depth + 1) for x in v]}
    if t is list:
        return [encode(x, ref, depth + 1) for x in v]
    if t is dict:
        if not all(type(k) is str for k in v):
            raise NkiForbiddenAccess("dict keys passed to the NKI API must be strings")
        return {"$d": {k: encode(x, ref, depth + 1) for k, x in v.items()}}
    if t is slice:
        return {"$sl": [encode(x, ref, depth + 1) for x in (v.start, v.stop, v.step)]}
    if v is Ellipsis:
        return {"$el": 0}
    if t is range:
        return {"$rg": [v.start, v.stop, v.step]}
    if t is complex:
        return {"$c": [repr(v.real), repr(v.imag)]}
    if t in _TOKENS:
        return {"$tok": v.name}
    if t is np.ndarray and is_value(v):
        return {"$nd": _npy(v)}
    if isinstance(v, np.generic) and is_value(v):
        return {"$ng": _npy(np.asarray(v))}
    if isinstance(v, np.dtype) and is_value(v):
        return {"$dt": v.str}
    if isinstance(v, type) and issubclass(v, np.generic) and is_value(v):
        return {"$ty": np.dtype(v).str}
    if t is np.ufunc and is_value(v):
        return {"$uf": v.__name__}
    name = numpy_operator_name(v)
    if name is not None:
        return {"$npf": name}
    if t is KernelCallable:
        return {"$cb": v.name}
    if t in (types.FunctionType, functools.partial):
        return {"$cb": _callable_name(v)}
    return ref(v)


class KernelCallable:
    """What the simulator receives for a function the kernel passes to the NKI API (an
    allocator for `ncc.sbuf.alloc` / `ncc.psum.alloc`): its name only. The simulator does
    not model addresses, so it never needs to call one; calling it is an error."""
    __slots__ = ("name", "__name__")

    def __init__(self, name):
        self.name = str(name)[:200]
        self.__name__ = self.name

    def __call__(self, *a, **k):
        raise NkiError("the function %r passed to the NKI API is not called by the simulator"
                       % self.name)

    def __eq__(self, other):
        return type(other) is KernelCallable and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return "<kernel function %s>" % self.name


def _callable_name(v):
    if type(v) is functools.partial:
        return "partial(%s)" % _callable_name(v.func)
    return getattr(v, "__qualname__", None) or getattr(v, "__name__", None) or "function"


def numpy_operator_name(v):
    """`np.<name>` when v is a numpy function (not a ufunc) the simulator knows as an
    operator (`np.max`, `np.sum`, `np.copy` ...), else None."""
    if type(v) is np.ufunc or not callable(v) or isinstance(v, type):
        return None
    name = getattr(v, "__name__", None)
    if type(name) is not str or getattr(np, name, None) is not v:
        return None
    from ..data import ops
    try:
        known = v in ops._OP_NAMES
    except TypeError:
        return None
    return name if known else None


_SCALARS = (bool, int, float, str)


def decode(e, deref, depth=0):
    """Inverse of `encode`; `deref(dict)` resolves references ({'$r': id} / {'$s': name})."""
    if depth > MAX_DEPTH:
        raise Divergence("value nested too deeply")
    t = type(e)
    if e is None or t in _SCALARS:
        return e
    if t is list:
        return [decode(x, deref, depth + 1) for x in e]
    if t is not dict or len(e) != 1:
        raise Divergence("malformed value %r" % (str(e)[:80],))
    (k, x), = e.items()
    if k == "$r" or k == "$s":
        return deref(e)
    f = _DECODERS.get(k)
    if f is None:
        raise Divergence("unknown value tag %r" % (k,))
    return f(x, deref, depth)


def _decode_tuple(x, deref, depth):
    return tuple(decode(y, deref, depth + 1) for y in _list(x))


def _decode_dict(x, deref, depth):
    if type(x) is not dict:
        raise Divergence("malformed dict")
    return {str(a): decode(b, deref, depth + 1) for a, b in x.items()}


def _decode_slice(x, deref, depth):
    a = _list(x)
    if len(a) != 3:
        raise Divergence("malformed slice")
    return slice(*(decode(y, deref, depth + 1) for y in a))


def _decode_float(x, deref, depth):
    if x not in ("nan", "inf", "-inf"):
        raise Divergence("malformed float")
    return float(x)


def _decode_range(x, deref, depth):
    a = _list(x)
    if len(a) != 3:
        raise Divergence("malformed range")
    return range(*(_int(y) for y in a))


def _decode_complex(x, deref, depth):
    a = _list(x)
    return complex(float(a[0]), float(a[1]))


def _decode_token(x, deref, depth):
    tok = getattr(D, str(x), None)
    if type(tok) not in _TOKENS:
        raise Divergence("unknown dtype %r" % (x,))
    return tok


def _decode_scalar(x, deref, depth):
    a = _from_npy(str(x))
    if a.ndim != 0:
        raise Divergence("malformed scalar")
    return a[()]


def _decode_dtype(as_type):
    def f(x, deref, depth):
        dt = np.dtype(str(x))
        if dt.kind not in "biufc":
            raise Divergence("unsupported dtype %r" % (x,))
        return dt.type if as_type else dt
    return f


def _decode_numpy_operator(x, deref, depth):
    f = getattr(np, str(x), None)
    if f is None or numpy_operator_name(f) != str(x):
        raise Divergence("unknown numpy operator %r" % (x,))
    return f


def _decode_ufunc(x, deref, depth):
    f = getattr(np, str(x), None)
    if type(f) is not np.ufunc:
        raise Divergence("unknown ufunc %r" % (x,))
    return f


_DECODERS = {
    "$t": _decode_tuple,
    "$d": _decode_dict,
    "$sl": _decode_slice,
    "$el": lambda x, deref, depth: Ellipsis,
    "$f": _decode_float,
    "$pd": lambda x, deref, depth: ParDim(_int(x)),
    "$rg": _decode_range,
    "$c": _decode_complex,
    "$tok": _decode_token,
    "$nd": lambda x, deref, depth: _from_npy(str(x)),
    "$ng": _decode_scalar,
    "$dt": _decode_dtype(False),
    "$ty": _decode_dtype(True),
    "$uf": _decode_ufunc,
    "$npf": _decode_numpy_operator,
    "$cb": lambda x, deref, depth: KernelCallable(x),
}


def _list(x):
    if type(x) is not list:
        raise Divergence("malformed value")
    return x


def _int(x):
    if type(x) is not int:
        raise Divergence("malformed integer")
    return x
