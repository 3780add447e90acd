"""Static scan of a kernel file before it is imported, for every device.

An NKI kernel describes instructions; it has no use for the interpreter's machinery, the host
operating system, or the storage behind its tensors. Code that reaches for those is refused as
`forbidden_access` with the rule and the line, before the file is imported, so it is never run
and never timed. Only code the selected kernel reaches is judged (`unreached_lines`): the
code that runs at import, the kernels the harness may select, and what they name,
transitively. The rules (ids as they appear in failure messages):

  import        modules that reach the interpreter, processes or files: inspect, gc,
                ctypes, cffi, builtins, importlib, types, weakref, threading, _thread,
                multiprocessing, concurrent, asyncio, subprocess, signal, pty, socket, fcntl,
                mmap, io, pathlib, shutil, tempfile, pickle, marshal, dis, code,
                runpy, atexit, faulthandler, resource, trace, unittest.mock, nkisim and the
                harness itself, when code that runs uses the name the import binds;
                relative imports that name no module in the kernel's folder. Helper modules
                in that folder (`import common`, `from .utils import f`) are scanned with the
                same rules
  os / sys      importable, but only os.environ, os.getenv, os.path, os.sep, os.getcwd,
                os.cpu_count and sys.argv, sys.version(_info), sys.platform, sys.maxsize,
                sys.float_info, sys.byteorder, sys.exit, sys.stdout, sys.stderr, sys.path may
                be used (no os.write/system/dup2/kill..., no sys.modules, sys.settrace ...)
  private       dunder names and attributes (`__dict__`, `__class__`, `__subclasses__`,
                `__globals__`, `__closure__`, `__builtins__`, `object.__setattr__` ...) except
                harmless ones (`__init__`, `__name__`, `__doc__`, `__file__`, `__version__`,
                `__call__`, `__getitem__` ...); single-underscore names of code that is not the
                kernel's: attributes of a module or name imported from outside the kernel's
                package (nki, numpy, the standard library: `np._core`, `os._exit`, also through
                an alias `m = np`), of the problem's tensors and of names bound to NKI results
                (`out._data`), and imports of such names or modules (`from numpy import _x`)
                except the compiler's `nki._private` / `nki._private_kernels` modules. The
                kernel's package (its folder and the folders its relative imports reach) is
                the kernel's code: its private modules, names and attributes are its own
                (`from .qkv_cte import _build_config`, `cfg._pmax`). Format strings reaching
                private attributes (`"{0.__class__}"`). Two forms the NKI Library uses are
                not refused: `f"{cfg.__dict__}"` (the attributes as text, nothing more) and
                `object.__setattr__(cfg, "_name", v)` with a constant name that is no dunder
                and no simulator attribute, on an object that is the package's own (not an
                import, a problem tensor or an NKI result)
  builtin       eval, exec, compile, __import__, open, breakpoint, globals, locals,
                vars, dir, setattr, delattr, memoryview; getattr/hasattr with a name that is
                not a plain string constant, except on an imported NKI or numpy module
                (`getattr(nl, config["op"])`); operator.attrgetter / methodcaller
  frame         interpreter frames and code objects: f_back, f_globals, f_locals, f_builtins,
                f_code, gi_frame, cr_frame, ag_frame, tb_frame, tb_next, co_code, mro
  internals     simulator internals through an NKI module (`nl.runtime`, `nl.core`, `nl.np`,
                `nl.sys`, ...) and assignments to attributes of any imported module
                (`nl.add = ...`, `np.copyto = ...`)
  internals     also the simulator tensor's own attributes, on any object (`.st`, `.arr`,
                `.mark_written`, `.vd`, `.dep` ...)
  tensor-numpy  numpy applied to kernel tensors (an array parameter of the selected kernel
                or, with no selection known, a parameter of a kernel function, i.e. one
                that calls the NKI API or carries an NKI decorator; a name bound to an NKI
                call's result or to a tensor) — `np.asarray(a)`, `np.copyto(out, ...)`,
                `a.data`, `a[0:4].read()`, `a.tolist()`, or a kernel tensor passed to a
                function of the file in a parameter it applies numpy to; numpy reference
                functions that no kernel calls with tensors are fine;
                shape math stays legal (`np.prod(a.shape)`, `np.float32(1e-5)`, `np.sqrt(d)`
                of a Python number); parameters annotated int/float/bool or with a numeric
                default are not tensors
  forged-result string constants naming the harness schema (`autocomp-harness/`)

Code under `if __name__ == "__main__":` never runs in the harness and is not scanned.
"""
import ast
import os
import re

DENIED_IMPORTS = frozenset((
    "inspect", "gc", "ctypes", "cffi", "builtins", "__builtin__", "importlib", "imp", "types",
    "weakref", "threading", "_thread", "multiprocessing", "concurrent", "asyncio", "subprocess",
    "signal", "pty", "socket", "fcntl", "posix", "nt", "mmap", "io", "_io", "pathlib", "shutil",
    "tempfile", "pickle", "cPickle", "dill", "shelve", "marshal", "copyreg", "dis",
    "code", "codeop", "runpy", "atexit", "faulthandler", "resource", "trace", "tracemalloc",
    "sysconfig", "site", "nkisim", "autocomp_harness", "harnesslib", "mock",
))
DENIED_IMPORT_PREFIXES = ("unittest.mock", "os.", "sys.")
ALLOWED_MODULE_ATTRS = {
    "os": frozenset(("environ", "getenv", "path", "sep", "getcwd", "cpu_count", "linesep",
                     "pathsep")),
    "sys": frozenset(("argv", "version", "version_info", "platform", "maxsize", "float_info",
                      "byteorder", "exit", "stdout", "stderr", "path")),
}
ALLOWED_DUNDERS = frozenset((
    "__init__", "__name__", "__doc__", "__qualname__", "__file__", "__version__", "__call__",
    "__module__", "__len__", "__getitem__", "__setitem__", "__iter__", "__next__", "__enter__",
    "__exit__", "__repr__", "__str__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
    "__ge__", "__hash__", "__bool__", "__contains__", "__add__", "__sub__", "__mul__",
    "__truediv__", "__floordiv__", "__mod__", "__neg__", "__post_init__", "__future__",
))
FORBIDDEN_BUILTINS = frozenset((
    "eval", "exec", "compile", "__import__", "open", "breakpoint", "globals", "locals",
    "vars", "dir", "setattr", "delattr", "memoryview",
))
NAMED_ATTR_BUILTINS = frozenset(("getattr", "hasattr"))
# `from neuronxcc import nki`, `from nki import language as nl`: names that are NKI modules
NKI_SUBMODULES = frozenset(("nki", "language", "isa", "compiler", "typing", "collectives",
                            "nccl"))
# Documented submodules whose names are also simulator internals' (`from nki.isa import
# constants`: the ISA's enums)
NKI_PUBLIC_SUBMODULES = frozenset((("nki.isa", "constants"), ("neuronxcc.nki.isa", "constants"),
                                   ("nki.language", "constants"),
                                   ("neuronxcc.nki.language", "constants")))
# Compiler modules with a leading underscore that kernels import from (their functions are
# NKI operations under other names, or raise when called: nkisim/api/private.py)
NKI_PRIVATE_MODULES = frozenset(("_private", "_private_kernels"))
# ... and underscore names of NKI modules that are NKI operations (`nisa._tiled_offloaded_fma`)
NKI_PRIVATE_OPS = frozenset(("_tiled_offloaded_memcpy", "_tiled_offloaded_fma"))
# operator-module functions that read attributes by a computed name (like getattr)
COMPUTED_ATTR_FUNCS = frozenset(("attrgetter", "methodcaller"))
FRAME_ATTRS = frozenset((
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "gi_frame", "gi_code", "cr_frame",
    "cr_code", "ag_frame", "tb_frame", "tb_next", "co_code", "co_consts", "mro",
))
SIM_INTERNALS = frozenset((
    "runtime", "core", "np", "numpy", "sys", "os", "C", "D", "O", "E", "contextlib", "math",
    "simulator", "buffers", "timing", "ops", "frontend", "activate", "errors", "dtypes",
    "constants", "builtins", "nkisim",
))
TENSOR_DATA_ATTRS = frozenset((
    "data", "base", "ctypes", "flat", "tobytes", "tolist", "numpy", "item", "itemset",
    "setflags", "tofile", "dump", "dumps", "read", "write", "root", "box", "valid", "sim",
    "alias",
))
# Attributes of the simulator's tensor and storage objects that are no NKI API (refused on any
# object: the names are unambiguous).
SIM_TENSOR_ATTRS = frozenset((
    "st", "arr", "mark_written", "written_state", "vd", "sk", "adv", "advanced", "dep",
    "check_valid",
))
# Attributes of the simulator's storage objects (never set through object.__setattr__)
SIM_STORAGE_ATTRS = frozenset(("dt", "kind", "pp", "written", "pdim", "shape", "size"))
# NKI entry points that launch or wrap a kernel: calling them does not make a function a kernel.
LAUNCHERS = frozenset(("jit", "baremetal", "benchmark", "profile", "simulate_kernel", "simulate",
                       "trace", "compile"))
SHAPE_ATTRS = frozenset(("shape", "dtype", "ndim", "size", "itemsize", "buffer", "name"))
SCALAR_ANNOTATIONS = frozenset(("int", "float", "bool", "str"))
SCHEMA_MARK = "autocomp-harness/"
_FORMAT_PRIVATE = re.compile(r"\{[^{}]*\.\s*_")


class Finding:
    """One refused construct: rule id, line and a short reason."""

    def __init__(self, rule, line, reason):
        self.rule = rule
        self.line = line
        self.reason = reason

    def __repr__(self):
        return "Finding(%s, line %s: %s)" % (self.rule, self.line, self.reason)

    def text(self):
        return "rule %s, line %s: %s" % (self.rule, self.line, self.reason)


def _dunder(name):
    """`__x__` (the interpreter's names); `__x` alone is a class-private name of the code."""
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _top(module_name):
    return (module_name or "").split(".")[0]


def _is_main_guard(node):
    """`if __name__ == "__main__":`"""
    t = node.test
    return (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name)
            and t.left.id == "__name__" and len(t.comparators) == 1
            and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value == "__main__")


def _root_name(node):
    """The Name at the root of an attribute/subscript/call chain, or None."""
    while True:
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            break
    return node.id if isinstance(node, ast.Name) else None


def _names_outside_shape(node):
    """Names used in an expression, except under `.shape`/`.dtype`/... and in indices into a
    shape (shape math)."""
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Attribute) and n.attr in SHAPE_ATTRS:
            continue
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) \
                and n.value.attr in SHAPE_ATTRS:
            continue  # `a.shape[:dim]`: the index picks dimensions, it is no tensor data
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len":
            continue
        if isinstance(n, ast.Name):
            out.append(n.id)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _is_scalar_param(arg, default):
    ann = arg.annotation
    if isinstance(ann, ast.Name) and ann.id in SCALAR_ANNOTATIONS:
        return True
    if isinstance(default, ast.Constant) and (default.value is None
                                              or isinstance(default.value, (bool, int, float, str))):
        return True
    return False


class _Scanner(ast.NodeVisitor):
    def __init__(self, tensor_names=(), entries=()):
        self.findings = []
        self.entries = frozenset(entries)  # functions the harness may select as the kernel
        self.loads = []              # (name, line) of every name read
        self.deferred = []           # (names an import binds, Finding): refused only if used
        self.operator_modules = set()  # names bound to the operator module
        self.api_modules = set()     # names bound to an NKI or numpy module (not a member)
        self.tensor_names = frozenset(tensor_names)  # the problem's array inputs and outputs
        self.numpy_modules = set()   # names bound to numpy (np)
        self.numpy_funcs = set()     # names imported from numpy (from numpy import asarray)
        self.nki_modules = set()     # names bound to nki / neuronxcc modules or their members
        self.module_names = set()    # every name bound by an import
        self.tensors = [set()]       # stack of tensor-name scopes
        self.kernel_stack = [False]  # inside a kernel function (or a function nested in one)
        self.receivers = [frozenset()]  # `self`/`cls` of the file's own methods in scope
        self.foreign = set()         # names bound to modules/objects from outside the package
        self.results = [set()]       # names bound to NKI results (tensors) in this scope
        self.folder = None           # the kernel's folder (local absolute imports are its own)
        self.in_class = False        # visiting a class body (its functions are methods)
        self.imported = []           # (module name, node) of accepted imports (local modules)
        self.relative = []           # (ImportFrom node, module) of relative imports
        self.restricted = {}         # name bound to os/sys -> module name
        self.numpy_param_funcs = {}  # non-kernel function name -> the parameter numpy touches
        self.calls_to_check = []     # (call node, tensor names in scope) inside kernel functions
        self.granted = set()         # id() of dunder attribute nodes in a harmless form (below)

    def add(self, rule, node, reason):
        self.findings.append(Finding(rule, getattr(node, "lineno", None), reason))

    # -- module structure
    def visit_If(self, node):
        if _is_main_guard(node):
            for n in node.orelse:
                self.visit(n)
            return
        self.generic_visit(node)

    def _check_module(self, node, name, bound=()):
        """bound: the names the import binds; a denied module is refused only when one of
        them is read by code that runs (an import alone reaches nothing)."""
        if node is not None and getattr(node, "level", 0):
            # judged in _scan_tree: a module of the kernel's package is scanned like any helper
            # (its private modules are the package's own)
            if any(part.startswith("__") and part not in ALLOWED_DUNDERS
                   for part in (name or "").split(".") if part):
                self.add("private", node, "import of private module %r" % name)
                return False
            self.relative.append((node, name or ""))
            return True
        if _top(name) in DENIED_IMPORTS or name in DENIED_IMPORTS \
                or any(name.startswith(p) and name != p.rstrip(".") for p in DENIED_IMPORT_PREFIXES):
            self.deferred.append((frozenset(bound), Finding(
                "import", getattr(node, "lineno", None),
                "import of %r has no place in an NKI kernel" % name)))
            return False
        local = _local_module(name, self.folder) is not None
        if any(part.startswith("_") and part not in ALLOWED_DUNDERS
               and not (part in NKI_PRIVATE_MODULES and _top(name) in ("nki", "neuronxcc"))
               and not (local and not part.startswith("__"))
               for part in name.split(".")):
            self.add("private", node, "import of private module %r" % name)
            return False
        self.imported.append((name, node))
        if not local:
            self.foreign.update(bound)
        return True

    def _own_import(self, node):
        """A relative import, or one of a module beside the kernel file: the package's code."""
        return bool(getattr(node, "level", 0)) or (
            _local_module(node.module or "", self.folder) is not None)

    def visit_Import(self, node):
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            if not self._check_module(node, alias.name, (bound,)):
                continue
            if alias.name == "operator":
                self.operator_modules.add(bound)
            self.module_names.add(bound)
            if alias.name in ALLOWED_MODULE_ATTRS:
                self.restricted[bound] = alias.name
            if _top(alias.name) == "numpy":
                self.numpy_modules.add(bound)
                self.api_modules.add(bound)
            elif _top(alias.name) in ("nki", "neuronxcc"):
                self.nki_modules.add(bound)
                self.api_modules.add(bound)

    def visit_ImportFrom(self, node):
        if not self._check_module(node, node.module or "",
                                  [a.asname or a.name for a in node.names]):
            return
        for alias in node.names:
            if alias.name == "*":
                self.add("import", node, "star import from %r" % node.module)
                continue
            if alias.name.startswith("_") and alias.name not in ALLOWED_DUNDERS \
                    and (alias.name.startswith("__") or not self._own_import(node)):
                self.add("private", node, "import of private name %r" % alias.name)
                continue
            if alias.name in SIM_INTERNALS and _top(node.module) in ("nki", "neuronxcc") \
                    and (node.module, alias.name) not in NKI_PUBLIC_SUBMODULES:
                self.add("internals", node, "import of %r from %s" % (alias.name, node.module))
                continue
            bound = alias.asname or alias.name
            if node.module == "operator" and alias.name in COMPUTED_ATTR_FUNCS:
                self.add("builtin", node, "operator.%s reads attributes by a computed name"
                         % alias.name)
                continue
            if node.module in ALLOWED_MODULE_ATTRS \
                    and alias.name not in ALLOWED_MODULE_ATTRS[node.module]:
                self.add("import", node, "%s.%s has no place in an NKI kernel"
                         % (node.module, alias.name))
                continue
            self.module_names.add(bound)
            if _top(node.module) == "numpy":
                self.numpy_funcs.add(bound)
            elif _top(node.module) in ("nki", "neuronxcc"):
                self.nki_modules.add(bound)
                if alias.name in NKI_SUBMODULES:
                    self.api_modules.add(bound)

    # -- functions and tensor names
    def _nki_op_call(self, call):
        """A call of the NKI API that is not a launcher (`nki.jit(...)`, `nki.baremetal()`)."""
        if _root_name(call.func) not in self.nki_modules:
            return False
        n = call.func
        while isinstance(n, (ast.Attribute, ast.Call, ast.Subscript)):
            if isinstance(n, ast.Attribute) and n.attr in LAUNCHERS:
                return False
            n = n.func if isinstance(n, ast.Call) else n.value
        return not (isinstance(n, ast.Name) and n.id in LAUNCHERS)

    def _is_kernel_function(self, node):
        """Calls the NKI API, or carries a decorator from an NKI module."""
        for dec in node.decorator_list:
            if _root_name(dec) in self.nki_modules:
                return True
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and self._nki_op_call(n):
                return True
        return False

    def visit_ClassDef(self, node):
        for n in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(n)
        outer, self.in_class = self.in_class, True
        for stmt in node.body:
            self.visit(stmt)
        self.in_class = outer

    def _visit_function(self, node):
        method = self.in_class
        self.in_class = False
        for dec in node.decorator_list:
            self.visit(dec)
        args = node.args
        positional = list(args.posonlyargs) + list(args.args)
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
        kernel = self._is_kernel_function(node)
        # A parameter named like one of the problem's arrays is a tensor in a kernel function,
        # whatever its annotation or default says.
        params = [arg.arg for arg, default in pairs if not _is_scalar_param(arg, default)
                  or (kernel and arg.arg in self.tensor_names)]
        if node.name in self.entries and self.tensor_names and len(self.tensors) == 1:
            # the selected kernel is called with the problem's inputs: only its array
            # parameters hold tensors (an int or a shape tuple is shape math)
            params = [n for n in params if n in self.tensor_names]
        scope = set(self.tensors[-1])
        # With the selected kernel known, another function's parameters are tensors only
        # where a caller passes one (checked at the calls, as for host functions).
        helper = kernel and self.entries and node.name not in self.entries \
            and len(self.tensors) == 1
        if kernel and not helper:
            scope.update(params)
        else:
            touched = self._numpy_on(node, set(params))
            if touched:
                self.numpy_param_funcs[node.name] = (
                    [a.arg for a in positional], [a.arg for a in args.kwonlyargs], touched)
        for d in list(args.defaults) + [d for d in args.kw_defaults if d is not None]:
            self.visit(d)
        self.tensors.append(scope)
        self.results.append(set(self.results[-1]))
        self.kernel_stack.append(kernel or self.kernel_stack[-1])
        receivers = self.receivers[-1]
        if method and positional:
            receivers = receivers | {positional[0].arg}
        self.receivers.append(receivers)
        for stmt in node.body:
            self.visit(stmt)
        self.receivers.pop()
        self.kernel_stack.pop()
        self.results.pop()
        self.tensors.pop()
        self.in_class = method

    def _numpy_on(self, func, names):
        """The `names` a function applies numpy to (or reads storage of), in order of use."""
        out = []
        for n in ast.walk(func):
            if isinstance(n, ast.Call) and self._is_numpy_call(n.func):
                for a in list(n.args) + [k.value for k in n.keywords]:
                    out += [x for x in _names_outside_shape(a) if x in names and x not in out]
            if isinstance(n, ast.Attribute) and n.attr in TENSOR_DATA_ATTRS \
                    and _root_name(n) in names and _root_name(n) not in out:
                out.append(_root_name(n))
        return out

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    def _nki_valued(self, value):
        """True when an expression calls into NKI or indexes a tensor (its result is a tensor);
        shape math (`x.shape[1]`, `x.dtype`) is not."""
        stack = [value]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Attribute) and n.attr in SHAPE_ATTRS:
                continue
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len":
                continue
            if isinstance(n, ast.Name) and n.id in self.tensors[-1]:
                return True
            if isinstance(n, ast.Call) and self._nki_op_call(n):
                return True
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) \
                    and n.value.id in self.tensors[-1]:
                return True
            stack.extend(ast.iter_child_nodes(n))
        return False

    def _bind(self, targets, value):
        if value is not None and (
                (isinstance(value, ast.Attribute) and _root_name(value) in self.numpy_modules)
                or (isinstance(value, ast.Name) and value.id in self.numpy_funcs)):
            for t in targets:
                if isinstance(t, ast.Name):
                    self.numpy_funcs.add(t.id)
        if value is not None and _root_name(value) in self.foreign \
                and not isinstance(value, ast.Call):
            for t in targets:  # `m = np`, `core = np.core`: an alias of foreign code
                if isinstance(t, ast.Name):
                    self.foreign.add(t.id)
        if value is not None and isinstance(value, ast.Call) and self._nki_op_call(value):
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        self.results[-1].add(n.id)
        if not self.kernel_stack[-1] or value is None or not self._nki_valued(value):
            return
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    self.tensors[-1].add(n.id)

    def visit_Assign(self, node):
        for t in node.targets:
            self._check_store(t)
        self._bind(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._check_store(node.target)
        self._bind([node.target], node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._check_store(node.target)
        self.generic_visit(node)

    def _check_store(self, target):
        """Refuse stores into imported modules (`nl.load = ...`, `np.x[0] = ...`); indices
        inside the target (`t[nl.arange(4)] = ...`) are reads and are not checked here."""
        node, through_attribute = target, False
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            through_attribute = through_attribute or isinstance(node, ast.Attribute)
            node = node.value
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute) \
                and target.value.attr == "environ" and isinstance(target.value.value, ast.Name) \
                and self.restricted.get(target.value.value.id) == "os":
            return  # os.environ["X"] = "1": setting an environment variable
        if through_attribute and isinstance(node, ast.Name) and node.id in self.module_names:
            self.add("internals", target, "assignment to an attribute of the imported module %r"
                     % node.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_store(elt)

    def visit_Delete(self, node):
        for t in node.targets:
            self._check_store(t)
        self.generic_visit(node)

    # -- names, attributes, calls, constants
    def visit_Name(self, node):
        if not isinstance(node.ctx, ast.Store):
            self.loads.append((node.id, node.lineno))
        if _dunder(node.id) and node.id not in ALLOWED_DUNDERS:
            self.add("private", node, "use of %r" % node.id)
        elif node.id in FORBIDDEN_BUILTINS:
            self.add("builtin", node, "use of the builtin %r" % node.id)

    def visit_FormattedValue(self, node):
        # f"{cfg.__dict__}": the object's attributes become text and nothing else (no
        # subscript, call or further attribute can reach through them)
        v = node.value
        if isinstance(v, ast.Attribute) and v.attr == "__dict__":
            self.granted.add(id(v))
        self.generic_visit(node)

    def _settable_name(self, name):
        """An attribute `object.__setattr__` may set: a plain name that is no dunder, no name
        of the sandbox's proxies (`_nkisim_*`) and no simulator tensor/storage attribute."""
        return (isinstance(name, ast.Constant) and isinstance(name.value, str)
                and name.value.isidentifier() and not _dunder(name.value)
                and not name.value.startswith("_nkisim")
                and name.value not in SIM_TENSOR_ATTRS and name.value not in TENSOR_DATA_ATTRS
                and name.value not in FRAME_ATTRS and name.value not in SHAPE_ATTRS
                and name.value not in SIM_STORAGE_ATTRS)

    def _grant_object_setattr(self, node):
        """`object.__setattr__(cfg, "_cache", v)` on the package's own object (the NKI
        Library sets a field of its frozen config so): judged as the assignment
        `cfg._cache = v` of the kernel's own code, with the attribute a constant name
        outside the simulator's (the call bypasses the class's __setattr__, so a simulator
        object's guard would not run)."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "__setattr__"
                and isinstance(func.value, ast.Name) and func.value.id == "object"
                and "object" not in self.module_names and "object" not in self.foreign):
            return
        if len(node.args) != 3 or node.keywords \
                or any(isinstance(a, ast.Starred) for a in node.args):
            return
        target, name = node.args[0], node.args[1]
        root = _root_name(target)
        if self._settable_name(name) and not self._foreign_receiver(target) \
                and root not in self.tensors[-1]:
            self.granted.add(id(func))

    def visit_Attribute(self, node):
        attr = node.attr
        root = _root_name(node)
        own = not _dunder(attr) and not self._foreign_receiver(node.value)
        if id(node) in self.granted:
            pass
        elif attr.startswith("_") and attr not in ALLOWED_DUNDERS and not own \
                and not (attr in NKI_PRIVATE_OPS and root in self.nki_modules):
            self.add("private", node, "access to the private attribute %r" % attr)
        elif attr in FRAME_ATTRS:
            self.add("frame", node, "access to interpreter internals (%r)" % attr)
        elif isinstance(node.value, ast.Name) and node.value.id in self.restricted \
                and attr not in ALLOWED_MODULE_ATTRS[self.restricted[node.value.id]]:
            self.add("import", node, "%s.%s has no place in an NKI kernel"
                     % (self.restricted[node.value.id], attr))
        elif attr in COMPUTED_ATTR_FUNCS and isinstance(node.value, ast.Name) \
                and node.value.id in self.operator_modules:
            self.add("builtin", node, "operator.%s reads attributes by a computed name" % attr)
        elif attr in SIM_INTERNALS and root in self.nki_modules and not (
                attr == "constants" and isinstance(node.value, ast.Name)
                and node.value.id in self.nki_modules):
            self.add("internals", node, "access to %r through the NKI module %r" % (attr, root))
        elif attr in SIM_TENSOR_ATTRS:
            self.add("internals", node, "access to the simulator's tensor internals (.%s)" % attr)
        elif attr in TENSOR_DATA_ATTRS and root in self.tensors[-1]:
            self.add("tensor-numpy", node, "reaching the storage of the kernel tensor %r (.%s)"
                     % (root, attr))
        self.generic_visit(node)

    def _foreign_receiver(self, value):
        """May `value` (the object whose single-underscore attribute is read) be code that is
        not the kernel's: rooted at a name imported from outside the package (or an alias of
        one), a problem tensor or a name bound to an NKI result, or read through an attribute
        named like such a module (`helpers.np._core`)?"""
        root = _root_name(value)
        if root is None:
            return True  # `(...)._x`, `f()._x` of no name: judged as foreign
        n = value
        while isinstance(n, (ast.Attribute, ast.Subscript, ast.Call)):
            if isinstance(n, ast.Attribute) and (n.attr in self.foreign
                                                 or n.attr in SIM_INTERNALS):
                return True
            n = n.func if isinstance(n, ast.Call) else n.value
        if root in self.receivers[-1]:
            return False  # `self._helper` in the file's class
        return root in self.foreign or root in self.tensor_names or root in self.results[-1]

    def _is_numpy_call(self, func):
        if isinstance(func, ast.Name):
            return func.id in self.numpy_funcs
        return _root_name(func) in self.numpy_modules

    def visit_Call(self, node):
        func = node.func
        self._grant_object_setattr(node)
        if isinstance(func, ast.Name) and func.id in NAMED_ATTR_BUILTINS:
            name = node.args[1] if len(node.args) > 1 else None
            target = node.args[0] if node.args else None
            on_api = isinstance(target, ast.Name) and target.id in self.api_modules
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                if not on_api:  # an NKI or numpy function chosen by name is API use
                    self.add("builtin", node, "%s() with a computed attribute name" % func.id)
            elif name.value.startswith("_") and name.value not in ALLOWED_DUNDERS:
                self.add("private", node, "%s() of the private attribute %r"
                         % (func.id, name.value))
            elif name.value in FRAME_ATTRS or name.value in TENSOR_DATA_ATTRS \
                    or name.value in SIM_TENSOR_ATTRS:
                self.add("frame" if name.value in FRAME_ATTRS else "tensor-numpy", node,
                         "%s() of %r" % (func.id, name.value))
        if isinstance(func, ast.Name) and len(self.tensors) > 1 and self.tensors[-1]:
            self.calls_to_check.append((node, frozenset(self.tensors[-1])))
        if self._is_numpy_call(func) and len(self.tensors) > 1:
            args = list(node.args) + [k.value for k in node.keywords]
            for a in args:
                hit = [n for n in _names_outside_shape(a) if n in self.tensors[-1]]
                if hit:
                    self.add("tensor-numpy", node, "numpy applied to the kernel tensor %r"
                             % hit[0])
                    break
        self.generic_visit(node)

    def visit_Constant(self, node):
        if isinstance(node.value, str):
            if SCHEMA_MARK in node.value:
                self.add("forged-result", node, "text naming the harness result schema")
            elif _FORMAT_PRIVATE.search(node.value):
                self.add("private", node, "format string reaching a private attribute")


# ---- what the selected kernel reaches ----------------------------------------------------------
def _nki_import_names(tree):
    """Names the file's top-level imports bind to NKI modules or their members."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if _top(a.name) in ("nki", "neuronxcc"):
                    out.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and _top(node.module) in ("nki", "neuronxcc"):
            out.update(a.asname or a.name for a in node.names)
    return out


def _accepts(fn, names):
    """The static form of harnesslib.kernel.params_match: fn can be called with exactly these
    keyword arguments."""
    args = fn.args
    positional = list(args.posonlyargs) + list(args.args)
    n_required = len(positional) - len(args.defaults)
    for i, a in enumerate(positional):
        if i < n_required and (i < len(args.posonlyargs) or a.arg not in names):
            return False
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        if d is None and a.arg not in names:
            return False
    accepted = {a.arg for a in list(args.args) + list(args.kwonlyargs)}
    return args.kwarg is not None or set(names) <= accepted


def selected_entries(tree, kernel_name=None, params=None):
    """Names of the top-level functions the harness may select as the kernel (the module
    docstring of harnesslib.kernel: the explicit name, else every function whose parameters
    match the inputs), or None when that cannot be told (everything counts as reached)."""
    defs = {n.name for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if kernel_name:
        return {kernel_name}  # a def of that name, or a module-level binding (always reached)
    if params is None:
        return None
    found = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and _accepts(n, set(params))}
    return found if found and found <= defs else None


def _loaded_names(nodes, skip_main=False):
    out = set()
    stack = list(nodes)
    while stack:
        n = stack.pop()
        if skip_main and isinstance(n, ast.If) and _is_main_guard(n):
            stack.extend(n.orelse)
            continue
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store):
            out.add(n.id)
        stack.extend(ast.iter_child_nodes(n))
    return out


def unreached_lines(tree, entries):
    """Line ranges [(first, last)] of function bodies the selected kernel never reaches.

    Reached: code that runs at import (top-level statements outside `if __name__ ==
    "__main__":`, decorators, default values, class bodies), the entry functions, and every
    top-level function or class a reached part names, transitively. A function with a
    decorator of the file's own (not NKI) counts as reached: the decorator may call it."""
    if entries is None:
        return []
    nki = _nki_import_names(tree)
    defs = {}
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs.setdefault(n.name, []).append(n)
    runs = []      # nodes that run at import
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            runs += n.decorator_list + list(n.args.defaults) \
                + [d for d in n.args.kw_defaults if d is not None]
        elif isinstance(n, ast.ClassDef):
            runs += n.decorator_list + n.bases + [k.value for k in n.keywords]
            for b in n.body:
                if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    runs += b.decorator_list + list(b.args.defaults)
                else:
                    runs.append(b)
        else:
            runs.append(n)
    reached = set()
    todo = set(entries)
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _root_name(d) not in nki for d in n.decorator_list):
            todo.add(n.name)
    todo |= _loaded_names(runs, skip_main=True)
    while todo:
        name = todo.pop()
        if name in reached or name not in defs:
            continue
        reached.add(name)
        for d in defs[name]:
            todo |= _loaded_names([d]) - reached
    out = []
    for n in tree.body:
        if n.name in reached if hasattr(n, "name") else True:
            continue
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((n.body[0].lineno, n.end_lineno))
        elif isinstance(n, ast.ClassDef):
            out += [(b.body[0].lineno, b.end_lineno) for b in n.body
                    if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return out


def _local_module(name, folder):
    """Path of a helper module `name` that lives next to the kernel file, or None."""
    if not folder:
        return None
    parts = name.split(".")
    base = os.path.join(folder, *parts)
    for cand in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(cand):
            return cand
    return None


def _relative_modules(node, name, here, folder):
    """Paths of the modules a relative import (`from .m import x`, `from ..util import f`,
    `from . import m`) in a file of folder `here` names; [] when it names nothing there or
    climbs more than 4 levels (what the harness can import)."""
    if not here or not folder or node.level > 4:
        return []
    base = here
    for _ in range(node.level - 1):
        base = os.path.dirname(base)
    if name:
        path = _local_module(name, base)
        return [path] if path else []
    found = [_local_module(a.name, base) for a in node.names if a.name != "*"]
    return [p for p in found if p]


def _scan_tree(source, filename, folder, seen, depth, tensor_names=(), kernel_name=None,
               params=None):
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return []
    entries = selected_entries(tree, kernel_name, params) if depth == 0 else None
    skip = unreached_lines(tree, entries)
    scanner = _Scanner(tensor_names, entries or ())
    scanner.folder = folder
    scanner.visit(tree)

    def reached(line):
        return line is None or not any(a <= line <= b for a, b in skip)

    used = {name for name, line in scanner.loads if reached(line)}
    for names, finding in scanner.deferred:
        if names & used:
            scanner.findings.append(finding)
    for call, tensors in scanner.calls_to_check:
        helper = scanner.numpy_param_funcs.get(call.func.id)
        if helper is None:
            continue
        positional, kwonly, touched = helper
        bound = []  # (parameter, argument); a *args spread may land anywhere
        for i, a in enumerate(call.args):
            spread = isinstance(a, ast.Starred)
            bound.append((None if spread or i >= len(positional) else positional[i], a))
        bound += [(k.arg, k.value) for k in call.keywords]
        for param, a in bound:
            hit = [n for n in _names_outside_shape(a) if n in tensors]
            if hit and (param is None or param in touched):
                scanner.add("tensor-numpy", call, "the kernel tensor %r is passed to %r, which "
                            "applies numpy to its parameter %r"
                            % (hit[0], call.func.id, param or touched[0]))
                break
    here = os.path.dirname(filename) if filename and os.path.isfile(filename) else folder
    local = [(_local_module(name, folder), node) for name, node in scanner.imported
             if not getattr(node, "level", 0)]
    for node, name in scanner.relative:
        paths = _relative_modules(node, name, here, folder)
        if not paths:
            scanner.add("import", node, "relative import of %r names no module beside the "
                        "kernel file" % ("." * node.level + name))
        local += [(p, node) for p in paths]
    findings = sorted((f for f in scanner.findings if reached(f.line)),
                      key=lambda f: (f.line or 0))
    if depth < 4:
        for path, node in local:
            if path is None or path in seen:
                continue
            seen.add(path)
            with open(path, encoding="utf-8", errors="replace") as f:
                inner = _scan_tree(f.read(), path, folder, seen, depth + 1, tensor_names)
            for x in inner:
                findings.append(Finding(x.rule, getattr(node, "lineno", None), "in the helper "
                                        "module %s (line %s): %s" % (os.path.basename(path),
                                                                     x.line, x.reason)))
    return findings


def scan_source(source, filename="<kernel>", folder=None, tensor_names=(), kernel_name=None,
                params=None):
    """Findings for kernel source text (empty list: nothing refused). Helper modules imported
    from `folder` (the kernel file's folder) are scanned too; their findings point at the
    import line. tensor_names: the problem's array inputs and outputs (kernel parameters of
    these names are tensors even when annotated as scalars). kernel_name / params: how the
    harness selects the kernel (an explicit name; the names it passes): only code the
    selected kernel can reach is judged; with neither, the whole file is. A file that does not
    parse yields no findings: the import reports it."""
    seen = set()
    if filename and os.path.isfile(filename):
        seen.add(os.path.abspath(filename))
    return _scan_tree(source, filename, folder, seen, 0, tensor_names, kernel_name, params)


def scan_file(path, tensor_names=(), kernel_name=None, params=None):
    with open(path, encoding="utf-8", errors="replace") as f:
        return scan_source(f.read(), os.path.abspath(path),
                           os.path.dirname(os.path.abspath(path)), tensor_names, kernel_name,
                           params)


def refusal_message(findings, limit=3):
    """One message naming the first few findings."""
    head = "; ".join(f.text() for f in findings[:limit])
    more = len(findings) - limit
    return "kernel refused before running (static scan): %s%s" % (
        head, "; and %d more" % more if more > 0 else "")
