"""Loading a kernel file and choosing the kernel function.

Selection order: an explicit name (--kernel-name), then the problem's KERNEL, then the single
function defined in the kernel file whose parameters match the input names (required
parameters all named in the inputs, every input accepted); when several match, the decorated
ones (objects that are not plain functions, or carry __wrapped__) win; still ambiguous is an
error asking for KERNEL or --kernel-name.
"""
import inspect
import os

from harnesslib.failures import HarnessFailure, describe_exception, line_in_file, same_file
from harnesslib.problem import exec_file_as, load_module


def underlying_function(obj):
    """The plain Python function behind a (possibly decorated) kernel object, or None."""
    seen = 0
    while obj is not None and seen < 8:
        seen += 1
        if inspect.isfunction(obj):
            return obj
        nxt = None
        for attr in ("nkisim_func", "__wrapped__", "func", "fn", "kernel", "function", "_func", "_fn"):
            try:
                cand = getattr(obj, attr, None)
            except Exception:  # an object that refuses the read (an NKI API proxy) wraps nothing
                cand = None
            if cand is not None and cand is not obj and callable(cand):
                nxt = cand
                break
        obj = nxt
    return None


def defined_functions(module, path):
    """[(name, obj, plain_fn)] for callables whose code lives in the kernel file `path`."""
    out = []
    for name, obj in vars(module).items():
        if name.startswith("__") or not callable(obj) or inspect.isclass(obj):
            continue
        fn = underlying_function(obj)
        if fn is None or not same_file(fn.__code__.co_filename, path):
            continue
        out.append((name, obj, fn))
    return out


def params_match(fn, input_names):
    """True when fn can be called with exactly these keyword arguments."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    names = set(input_names)
    accepted = set()
    var_kw = False
    for p in sig.parameters.values():
        if p.kind == p.VAR_KEYWORD:
            var_kw = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            accepted.add(p.name)
            if p.default is p.empty and p.name not in names:
                return False
        elif p.kind == p.POSITIONAL_ONLY and p.default is p.empty:
            return False
    return var_kw or names <= accepted


def select_kernel(module, path, input_names, explicit=None, problem_name=None):
    """Return (name, callable) following the selection order in the module docstring."""
    funcs = defined_functions(module, path)
    wanted = explicit or problem_name
    if wanted:
        obj = getattr(module, wanted, None)
        if obj is None or not callable(obj):
            origin = "kernel_name / --kernel-name" if explicit else "the problem's KERNEL"
            raise HarnessFailure(
                "compile_error",
                "kernel file defines no function %r (named by %s); functions found: %s"
                % (wanted, origin, ", ".join(n for n, _, _ in funcs) or "none"))
        return wanted, obj
    if not funcs:
        # Decorator objects that hide the function (e.g. an SDK's jit wrapper without
        # __wrapped__) still carry the defining module's name.
        funcs = [(n, o, o) for n, o in vars(module).items()
                 if callable(o) and not inspect.isclass(o) and not inspect.ismodule(o)
                 and not n.startswith("__") and getattr(o, "__module__", None) == module.__name__]
    matching = [f for f in funcs if params_match(f[2], input_names)]
    if len(matching) > 1:
        decorated = [f for f in matching if f[1] is not f[2]]
        if decorated:
            matching = decorated
    if len(matching) == 1:
        return matching[0][0], matching[0][1]
    names = ", ".join(sorted(input_names))
    if not matching:
        raise HarnessFailure(
            "compile_error",
            "no function in the kernel file takes parameters matching the inputs (%s); functions "
            "found: %s" % (names, ", ".join("%s%s" % (n, _sig(f)) for n, _, f in funcs) or "none"))
    raise HarnessFailure(
        "compile_error",
        "several functions match the inputs (%s): %s; set KERNEL in the problem file or pass "
        "the kernel_name argument (--kernel-name on the command line)" % (names, ", ".join(n for n, _, _ in matching)))


def _sig(fn):
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(?)"


class KernelHandle:
    """A loaded and selected kernel as a device hands it back from `load_kernel`.

    name: the selected function's name; path: the kernel file; fn: the callable when the kernel
    lives in the harness process (a device that loads it elsewhere may leave it None and keep
    its own reference in `ref`)."""

    def __init__(self, name, path, fn=None, ref=None):
        self.name = name
        self.path = path
        self.fn = fn
        self.ref = ref

    def __repr__(self):
        return "KernelHandle(%s in %s)" % (self.name, self.path)


def load_in_process(path, input_names, explicit=None, problem_name=None, error_types=()):
    """Import the kernel file in this process and select the kernel: a KernelHandle."""
    module = load_kernel_module(path, error_types)
    name, fn = select_kernel(module, path, list(input_names), explicit=explicit,
                             problem_name=problem_name)
    return KernelHandle(name, path, fn)


MAX_PACKAGE_LEVELS = 4


def _relative_imports(path):
    """How many folders the kernel's package spans upwards (as the sandbox's
    `confine.relative_levels`): the deepest package-relative import of the kernel file and,
    transitively, of the package modules it reaches (`from ..util import f`: 2), at most
    MAX_PACKAGE_LEVELS."""
    import ast  # noqa: PLC0415
    kernel = os.path.realpath(path)
    here = os.path.dirname(kernel)
    todo, seen, top = [kernel], {kernel}, 0
    while todo and len(seen) <= 256:
        cur = todo.pop()
        try:
            with open(cur, encoding="utf-8", errors="replace") as f:
                tree = ast.parse(f.read(), cur)
        except (OSError, SyntaxError, ValueError):
            continue  # the import reports it
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            base = os.path.dirname(cur)
            for _ in range(node.level - 1):
                base = os.path.dirname(base)
            up, at = 1, here
            while at != base and at.startswith(base + os.sep) and up <= MAX_PACKAGE_LEVELS:
                at, up = os.path.dirname(at), up + 1
            if at != base or up > MAX_PACKAGE_LEVELS:
                continue
            top = max(top, up)
            stem = os.path.join(base, *((node.module or "").split(".") if node.module else []))
            for c in [stem + ".py", os.path.join(stem, "__init__.py")] + [
                    os.path.join(stem, a.name + ".py") for a in node.names]:
                c = os.path.realpath(c)
                if c not in seen and os.path.isfile(c):
                    seen.add(c)
                    todo.append(c)
    return top


MAX_PACKAGE_NAME_DEPTH = 8


def package_names(path, levels):
    """[(dotted name, folder)] from the top package down to the kernel's folder, when the
    kernel lives in a package with a name of its own: its folder and the ones above it hold
    __init__.py (at least `levels` of them), the names are identifiers, and the top name is
    no module Python already finds (a folder named `numpy` stays anonymous). Else None."""
    import importlib.util  # noqa: PLC0415
    import keyword  # noqa: PLC0415
    import sys  # noqa: PLC0415
    folders = []
    at = os.path.dirname(os.path.abspath(path))
    while len(folders) < MAX_PACKAGE_NAME_DEPTH and os.path.isfile(
            os.path.join(at, "__init__.py")):
        folders.append(at)
        at = os.path.dirname(at)
    if not folders or len(folders) < levels:
        return None
    parts = [os.path.basename(f) for f in reversed(folders)]
    if not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        return None
    top = parts[0]
    known = sys.modules.get(top)
    if known is not None and getattr(known, "__path__", None) != [folders[-1]]:
        return None
    if known is None:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return None
        if spec is not None and [os.path.realpath(p) for p in (
                spec.submodule_search_locations or ())] != [os.path.realpath(folders[-1])]:
            return None  # another module of that name (the package itself is fine)
    return [(".".join(parts[:i + 1]), f) for i, f in enumerate(reversed(folders))]


def _load_in_package(path, levels, named=None):
    """Import the kernel file as a module of packages standing for its folder and, for
    `from ..x` imports, the folders above it (`levels` in all, at most MAX_PACKAGE_LEVELS), so
    that its package-relative imports find the modules there. No folder's __init__.py is run.
    A kernel inside a named package (`package_names`) is imported under its own dotted name
    (`nkilib.core.cumsum.cumsum`), so code that imports the package by name (a problem's
    call_kernel) gets the very classes and Enums the kernel uses."""
    import hashlib  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import types  # noqa: PLC0415
    path = os.path.abspath(path)
    if named is None:
        named = package_names(path, levels)
    if not named:
        folders = [os.path.dirname(path)]
        for _ in range(min(levels, MAX_PACKAGE_LEVELS) - 1):
            folders.append(os.path.dirname(folders[-1]))
        base = "autocomp_package_%s" % hashlib.sha1(path.encode()).hexdigest()[:10]
        named = []
        for depth, folder in enumerate(reversed(folders)):
            base += ".level%d" % depth if depth else ""
            named.append((base, folder))
        leaf = "autocomp_kernel"
    else:
        leaf = os.path.splitext(os.path.basename(path))[0]
        if not leaf.isidentifier():
            leaf = "autocomp_kernel"
    parent = None
    for name, folder in named:
        package = sys.modules.get(name)
        if package is None:
            package = types.ModuleType(name)
            package.__path__ = [folder]
            package.__package__ = name
            sys.modules[name] = package
            if parent is not None:
                setattr(parent, name.rsplit(".", 1)[1], package)
        parent = package
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return exec_file_as(named[-1][0] + "." + leaf, path)


def load_kernel_module(path, error_types=(), as_package=False, names=None):
    """Import the kernel file; import-time failures become compile_error with the line.

    error_types: device-specific compile error classes whose `.line`/`.message` are trusted.
    as_package: import a kernel that lives in a named package under its dotted name even
    without relative imports (a problem's call_kernel imports the package by name).
    names: `package_names` as computed where the whole folder tree is visible (the sandbox
    shows only the modules the kernel imports, not every __init__.py above them).
    """
    if not os.path.isfile(path):
        raise HarnessFailure("harness_error", "kernel file not found: %s" % path)
    try:
        levels = _relative_imports(path)
        if names is not None:
            names = [(str(n), str(f)) for n, f in names] if len(names) >= levels else None
        elif as_package or levels:
            names = package_names(path, levels)
        if levels or (as_package and names):
            return _load_in_package(path, levels, names)
        return load_module(path, "autocomp_kernel")
    except SyntaxError as e:
        if same_file(e.filename or path, path):
            raise HarnessFailure("compile_error", "syntax error: %s" % e.msg, line=e.lineno)
        # a module of the kernel's package that does not parse: name it and its line (the
        # kernel's line is the import that reached it)
        where = e.filename or "?"
        try:
            rel = os.path.relpath(where, os.path.dirname(os.path.abspath(path)))
            where = rel if len(rel) < len(where) else where
        except ValueError:
            pass
        raise HarnessFailure("compile_error", "syntax error in the package module %s, line "
                             "%s: %s (the module does not parse in Python; fix it there)"
                             % (where, e.lineno, e.msg),
                             line=line_in_file(e.__traceback__, path))
    except error_types as e:
        raise HarnessFailure("compile_error", getattr(e, "message", str(e)),
                             line=getattr(e, "line", None) or line_in_file(e.__traceback__, path))
    except ImportError as e:
        message = "import failed in the kernel file: %s" % e
        if type(e) is ModuleNotFoundError and e.name and "." not in e.name \
                and not os.path.exists(os.path.join(os.path.dirname(path), e.name + ".py")):
            from harnesslib.hostlibs import missing_module_message  # noqa: PLC0415
            message = missing_module_message(e.name)
        raise HarnessFailure("compile_error", message, line=line_in_file(e.__traceback__, path))
    except Exception as e:
        raise HarnessFailure("compile_error", "importing the kernel file raised %s"
                             % describe_exception(e), line=line_in_file(e.__traceback__, path))
