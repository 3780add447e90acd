"""Stand-ins for host libraries a kernel file imports but the selected kernel never uses.

Public kernel files often import host libraries at the top (torch, torch_xla, scipy) for
their own tests or for kernels other than the one evaluated. Where such a library is not
installed, the import alone would refuse every kernel of the file. `install(...)` adds an
import finder that runs after every real one: a missing module whose names no code the
selected kernel reaches reads (the static scan's reachability: import-time code, the
selected kernel and what it names; `if __name__ == "__main__":` never runs; annotations, read
only as attributes, do not count) gets an inert stand-in. Touching a stand-in (calling it,
reading a value from it, iterating, ordering, arithmetic) raises `HostLibraryMissing` naming
the module; it equals only itself (typing's checks of annotations compare). A missing module
that reached code does use is left alone: the import fails as usual
(`missing_module_message`).
"""
import ast
import importlib.abc
import importlib.machinery
import os
import sys
import types

from harnesslib import scan


class HostLibraryMissing(ImportError):
    """Kernel code touched a stand-in for a host library that is not installed."""


def missing_module_message(name):
    return ("the kernel file imports %r, which is not installed where the kernel runs, and "
            "code the selected kernel reaches uses it" % name)


def _touched(name):
    raise HostLibraryMissing("%r belongs to a host library that is not installed where the "
                             "kernel runs (a stand-in let the file import; the kernel may not "
                             "use it)" % name, name=name.split(".")[0])


class _Absent:
    """A value read from a stand-in module: inert until touched."""

    __slots__ = ("_absent_name",)

    def __init__(self, name):
        object.__setattr__(self, "_absent_name", name)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent("%s.%s" % (self._absent_name, attr))

    def __repr__(self):
        return "<stand-in for %s (not installed)>" % self._absent_name

    def __mro_entries__(self, bases):
        _touched(self._absent_name)


def _raiser(method):
    def touched(self, *args, **kwargs):
        _touched(object.__getattribute__(self, "_absent_name"))
    touched.__name__ = method
    return touched


for _m in ("__call__", "__iter__", "__len__", "__bool__", "__getitem__", "__setitem__",
           "__contains__", "__int__", "__float__", "__index__", "__lt__",
           "__le__", "__gt__", "__ge__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
           "__rmul__", "__truediv__", "__rtruediv__", "__floordiv__", "__mod__", "__pow__",
           "__neg__", "__matmul__", "__rmatmul__", "__enter__", "__setattr__"):
    setattr(_Absent, _m, _raiser(_m))


class _AbsentModule(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent("%s.%s" % (self.__name__, attr))


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, tops):
        self.tops = frozenset(tops)

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in self.tops:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _AbsentModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def _bindings(node):
    """(top-level module, names the import binds) of an absolute import statement."""
    if isinstance(node, ast.Import):
        return [(a.name.split(".")[0], a.asname or a.name.split(".")[0]) for a in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        return [(node.module.split(".")[0], a.asname or a.name) for a in node.names]
    return []


def _main_guard_lines(tree):
    return [(n.lineno, n.end_lineno) for n in tree.body
            if isinstance(n, ast.If) and scan._is_main_guard(n)]


def _annotations(tree):
    """Nodes of annotations (`x: torch.Tensor`, `-> torch.Tensor`): evaluated at import, but
    only as attribute reads, which a stand-in answers."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = n.args
            out += [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
                    if x is not None and x.annotation is not None]
            if n.returns is not None:
                out.append(n.returns)
        elif isinstance(n, ast.AnnAssign):
            out.append(n.annotation)
    return {id(m) for a in out for m in ast.walk(a)}


def _reads(tree, skip):
    def reached(line):
        return not any(a <= line <= b for a, b in skip)
    annotations = _annotations(tree)
    return {n.id for n in ast.walk(tree)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)
            and id(n) not in annotations and reached(n.lineno)}


def _file_imports(path, entries):
    """({top-level module: used?}, [(local module path, entries)]) for one file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return {}, []
    skip = scan.unreached_lines(tree, entries) + _main_guard_lines(tree)
    used = _reads(tree, skip)
    tops = {}
    helpers = []
    folder = os.path.dirname(os.path.abspath(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and scan._is_main_guard(node):
            continue
        for top, bound in _bindings(node):
            tops[top] = tops.get(top, False) or bound in used
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            helpers += _local(node, folder)
    return tops, helpers


def _local(node, folder):
    if isinstance(node, ast.Import):
        return [(p, None) for p in (scan._local_module(a.name, folder) for a in node.names) if p]
    names = {a.name for a in node.names}
    if node.level:
        return [(p, names) for p in scan._relative_modules(node, node.module or "", folder,
                                                            folder)]
    path = scan._local_module(node.module or "", folder)
    return [(path, names)] if path else []


def unused_missing(kernel_path, kernel_name=None, params=None):
    """Top-level modules the kernel file (and the local modules it imports) import that are
    not installed here and that no reached code reads."""
    import importlib.util  # noqa: PLC0415
    tree_entries = None
    try:
        with open(kernel_path, encoding="utf-8", errors="replace") as f:
            tree_entries = scan.selected_entries(ast.parse(f.read()), kernel_name, params)
    except (OSError, SyntaxError, ValueError):
        return set()
    used = {}
    todo = [(os.path.abspath(kernel_path), tree_entries)]
    seen = set()
    while todo and len(seen) < 64:
        path, entries = todo.pop()
        key = (path, frozenset(entries) if entries is not None else None)
        if key in seen:
            continue
        seen.add(key)
        tops, helpers = _file_imports(path, entries)
        for top, is_used in tops.items():
            used[top] = used.get(top, False) or is_used
        todo += helpers
    out = set()
    folder = os.path.dirname(os.path.abspath(kernel_path))
    for top, is_used in used.items():
        if is_used or top in sys.modules or scan._local_module(top, folder):
            continue
        try:
            if importlib.util.find_spec(top) is None:
                out.add(top)
        except (ImportError, ValueError):
            out.add(top)
    return out


def install(kernel_path, kernel_name=None, params=None):
    """Add the stand-in finder for `unused_missing(...)`; the set of module names it covers."""
    tops = unused_missing(kernel_path, kernel_name, params)
    if tops:
        sys.meta_path.append(_Finder(tops))
    return tops
