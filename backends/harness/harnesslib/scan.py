"""Static scan of a kernel file before it is imported, for every device.

An NKI kernel describes instructions; it has no use for the interpreter's machinery, the host
operating system, or the storage behind its tensors. Code that reaches for those is refused as
`forbidden_access` with the rule and the line, before the file is imported, so it is never run
and never timed. The rules (ids as they appear in failure messages):

  import        modules that reach the interpreter, processes or files: inspect, gc,
                ctypes, cffi, builtins, importlib, types, weakref, threading, _thread,
                multiprocessing, concurrent, asyncio, subprocess, signal, pty, socket, fcntl,
                mmap, io, pathlib, shutil, tempfile, pickle, marshal, operator, dis, code,
                runpy, atexit, faulthandler, resource, trace, unittest.mock, nkisim and the
                harness itself; relative imports. Helper modules next to the kernel file are
                scanned with the same rules
  os / sys      importable, but only os.environ, os.getenv, os.path, os.sep, os.getcwd,
                os.cpu_count and sys.argv, sys.version(_info), sys.platform, sys.maxsize,
                sys.float_info, sys.byteorder, sys.exit, sys.stdout, sys.stderr, sys.path may
                be used (no os.write/system/dup2/kill..., no sys.modules, sys.settrace ...)
  private       a name, attribute or imported name beginning with `_` (`_data`, `__dict__`,
                `__class__`, `__subclasses__`, `__globals__`, `__closure__`, `__builtins__`,
                `object.__setattr__` ...) except harmless dunders (`__init__`, `__name__`,
                `__doc__`, `__file__`, `__version__`, `__call__`, `__getitem__` ...); format
                strings reaching such attributes (`"{0.__class__}"`)
  builtin       eval, exec, compile, __import__, open, breakpoint, globals, locals,
                vars, dir, setattr, delattr, memoryview; getattr/hasattr with a name that is
                not a plain string constant
  frame         interpreter frames and code objects: f_back, f_globals, f_locals, f_builtins,
                f_code, gi_frame, cr_frame, ag_frame, tb_frame, tb_next, co_code, mro
  internals     simulator internals through an NKI module (`nl.runtime`, `nl.core`, `nl.np`,
                `nl.sys`, ...) and assignments to attributes of any imported module
                (`nl.add = ...`, `np.copyto = ...`)
  internals     also the simulator tensor's own attributes, on any object (`.st`, `.arr`,
                `.mark_written`, `.vd`, `.dep` ...)
  tensor-numpy  numpy applied to kernel tensors (a parameter of a kernel function, i.e. one
                that calls the NKI API or carries an NKI decorator, or a name bound to an NKI
                call's result or to a tensor) — `np.asarray(a)`, `np.copyto(out, ...)`,
                `a.data`, `a[0:4].read()`, `a.tolist()`, or a kernel tensor passed to a
                function of the file that applies numpy to its parameters; numpy reference
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
    "tempfile", "pickle", "cPickle", "dill", "shelve", "marshal", "copyreg", "operator", "dis",
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
    """Names used in an expression, except under `.shape`/`.dtype`/... (shape math)."""
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Attribute) and n.attr in SHAPE_ATTRS:
            continue
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
    def __init__(self, tensor_names=()):
        self.findings = []
        self.tensor_names = frozenset(tensor_names)  # the problem's array inputs and outputs
        self.numpy_modules = set()   # names bound to numpy (np)
        self.numpy_funcs = set()     # names imported from numpy (from numpy import asarray)
        self.nki_modules = set()     # names bound to nki / neuronxcc modules or their members
        self.module_names = set()    # every name bound by an import
        self.tensors = [set()]       # stack of tensor-name scopes
        self.kernel_stack = [False]  # inside a kernel function (or a function nested in one)
        self.imported = []           # (module name, node) of accepted imports (local modules)
        self.restricted = {}         # name bound to os/sys -> module name
        self.numpy_param_funcs = {}  # non-kernel function name -> the parameter numpy touches
        self.calls_to_check = []     # (call node, tensor names in scope) inside kernel functions

    def add(self, rule, node, reason):
        self.findings.append(Finding(rule, getattr(node, "lineno", None), reason))

    # -- module structure
    def visit_If(self, node):
        if _is_main_guard(node):
            for n in node.orelse:
                self.visit(n)
            return
        self.generic_visit(node)

    def _check_module(self, node, name):
        if node is not None and getattr(node, "level", 0):
            self.add("import", node, "relative import of %r" % ("." * node.level + (name or "")))
            return False
        if _top(name) in DENIED_IMPORTS or name in DENIED_IMPORTS \
                or any(name.startswith(p) and name != p.rstrip(".") for p in DENIED_IMPORT_PREFIXES):
            self.add("import", node, "import of %r has no place in an NKI kernel" % name)
            return False
        if any(part.startswith("_") and part not in ALLOWED_DUNDERS for part in name.split(".")):
            self.add("private", node, "import of private module %r" % name)
            return False
        self.imported.append((name, node))
        return True

    def visit_Import(self, node):
        for alias in node.names:
            if not self._check_module(node, alias.name):
                continue
            bound = alias.asname or alias.name.split(".")[0]
            self.module_names.add(bound)
            if alias.name in ALLOWED_MODULE_ATTRS:
                self.restricted[bound] = alias.name
            if _top(alias.name) == "numpy":
                self.numpy_modules.add(bound)
            elif _top(alias.name) in ("nki", "neuronxcc"):
                self.nki_modules.add(bound)

    def visit_ImportFrom(self, node):
        if not self._check_module(node, node.module or ""):
            return
        for alias in node.names:
            if alias.name == "*":
                self.add("import", node, "star import from %r" % node.module)
                continue
            if alias.name.startswith("_") and alias.name not in ALLOWED_DUNDERS:
                self.add("private", node, "import of private name %r" % alias.name)
                continue
            if alias.name in SIM_INTERNALS and _top(node.module) in ("nki", "neuronxcc"):
                self.add("internals", node, "import of %r from %s" % (alias.name, node.module))
                continue
            bound = alias.asname or alias.name
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

    def _visit_function(self, node):
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
        scope = set(self.tensors[-1])
        if kernel:
            scope.update(params)
        else:
            hit = self._numpy_on(node, set(params))
            if hit:
                self.numpy_param_funcs[node.name] = hit
        for d in list(args.defaults) + [d for d in args.kw_defaults if d is not None]:
            self.visit(d)
        self.tensors.append(scope)
        self.kernel_stack.append(kernel or self.kernel_stack[-1])
        for stmt in node.body:
            self.visit(stmt)
        self.kernel_stack.pop()
        self.tensors.pop()

    def _numpy_on(self, func, names):
        """The first of `names` a function applies numpy to (or reads storage of), or None."""
        for n in ast.walk(func):
            if isinstance(n, ast.Call) and self._is_numpy_call(n.func):
                for a in list(n.args) + [k.value for k in n.keywords]:
                    hit = [x for x in _names_outside_shape(a) if x in names]
                    if hit:
                        return hit[0]
            if isinstance(n, ast.Attribute) and n.attr in TENSOR_DATA_ATTRS \
                    and _root_name(n) in names:
                return _root_name(n)
        return None

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
        if node.id.startswith("__") and node.id not in ALLOWED_DUNDERS:
            self.add("private", node, "use of %r" % node.id)
        elif node.id in FORBIDDEN_BUILTINS:
            self.add("builtin", node, "use of the builtin %r" % node.id)

    def visit_Attribute(self, node):
        attr = node.attr
        root = _root_name(node)
        if attr.startswith("_") and attr not in ALLOWED_DUNDERS:
            self.add("private", node, "access to the private attribute %r" % attr)
        elif attr in FRAME_ATTRS:
            self.add("frame", node, "access to interpreter internals (%r)" % attr)
        elif isinstance(node.value, ast.Name) and node.value.id in self.restricted \
                and attr not in ALLOWED_MODULE_ATTRS[self.restricted[node.value.id]]:
            self.add("import", node, "%s.%s has no place in an NKI kernel"
                     % (self.restricted[node.value.id], attr))
        elif attr in SIM_INTERNALS and root in self.nki_modules:
            self.add("internals", node, "access to %r through the NKI module %r" % (attr, root))
        elif attr in SIM_TENSOR_ATTRS:
            self.add("internals", node, "access to the simulator's tensor internals (.%s)" % attr)
        elif attr in TENSOR_DATA_ATTRS and root in self.tensors[-1]:
            self.add("tensor-numpy", node, "reaching the storage of the kernel tensor %r (.%s)"
                     % (root, attr))
        self.generic_visit(node)

    def _is_numpy_call(self, func):
        if isinstance(func, ast.Name):
            return func.id in self.numpy_funcs
        return _root_name(func) in self.numpy_modules

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Name) and func.id in NAMED_ATTR_BUILTINS:
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
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


def _scan_tree(source, filename, folder, seen, depth, tensor_names=()):
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return []
    scanner = _Scanner(tensor_names)
    scanner.visit(tree)
    for call, tensors in scanner.calls_to_check:
        helper = scanner.numpy_param_funcs.get(call.func.id)
        if helper is None:
            continue
        for a in list(call.args) + [k.value for k in call.keywords]:
            hit = [n for n in _names_outside_shape(a) if n in tensors]
            if hit:
                scanner.add("tensor-numpy", call, "the kernel tensor %r is passed to %r, which "
                            "applies numpy to its parameter %r" % (hit[0], call.func.id, helper))
                break
    findings = sorted(scanner.findings, key=lambda f: (f.line or 0))
    if depth < 4:
        for name, node in scanner.imported:
            path = _local_module(name, folder)
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


def scan_source(source, filename="<kernel>", folder=None, tensor_names=()):
    """Findings for kernel source text (empty list: nothing refused). Helper modules imported
    from `folder` (the kernel file's folder) are scanned too; their findings point at the
    import line. tensor_names: the problem's array inputs and outputs (kernel parameters of
    these names are tensors even when annotated as scalars). A file that does not parse yields
    no findings: the import reports it."""
    seen = set()
    if filename and os.path.isfile(filename):
        seen.add(os.path.abspath(filename))
    return _scan_tree(source, filename, folder, seen, 0, tensor_names)


def scan_file(path, tensor_names=()):
    with open(path, encoding="utf-8", errors="replace") as f:
        return scan_source(f.read(), os.path.abspath(path),
                           os.path.dirname(os.path.abspath(path)), tensor_names)


def refusal_message(findings, limit=3):
    """One message naming the first few findings."""
    head = "; ".join(f.text() for f in findings[:limit])
    more = len(findings) - limit
    return "kernel refused before running (static scan): %s%s" % (
        head, "; and %d more" % more if more > 0 else "")
