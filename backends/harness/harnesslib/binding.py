"""Binding a problem's inputs to a kernel entry point (PROTOCOL.md "Binding real entry points").

By default the harness calls the selected kernel with the inputs as keyword arguments. Entry
points of a kernel library take more than arrays and scalars: a config object
(`RmsNormQuantKernelArgs(eps=1e-6)`), an Enum member (`ActFnType.SiLU`), a helper object, or
they are launched with a logical-core count (`kernel[2](...)`). Such objects must be built
where the kernel runs, from the kernel's own package (the same classes the kernel compares
against), so the problem file may define

    def call_kernel(kernel, **inputs):
        from nkilib.core.rmsnorm.rmsnorm_quant import RmsNormQuantKernelArgs
        return kernel[2](inputs["hidden"], inputs["ln_w"], RmsNormQuantKernelArgs(eps=1e-6))

The harness never calls it in its own process: `hook_source` reads the function's source
from the problem file (nothing of the file runs for that) and the kernel's process runs it,
inside the sandbox, with `kernel` the selected entry point (a `Launcher`) and the inputs as
the kernel sees them (tensors, scalars). Its imports go inside the function and resolve as
the kernel file's own do: `from ..utils.config import ScaleConfig` relative to the kernel's
folder, and, when the kernel's package is a named package on disk (`__init__.py` up to its top
folder), also by that name (`from nkilib.core... import ...`). The problem's folder is not
importable there.

Binding that does not fit (a parameter no input and no hook provides, an unexpected one) is
a compile_error naming the parameter and what to do.
"""
import ast
import inspect

HOOK_NAME = "call_kernel"


def hook_source(problem_path):
    """{"name", "source", "line"} of the problem file's top-level `call_kernel`, or None.
    Only the function's text is taken (module-level names of the problem do not exist where
    it runs)."""
    try:
        with open(problem_path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        tree = ast.parse(text, problem_path)
    except (OSError, SyntaxError, ValueError):
        return None  # loading the problem reports it
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == HOOK_NAME:
            lines = text.splitlines()[node.lineno - 1:node.end_lineno]
            return {"name": HOOK_NAME, "source": "\n" * (node.lineno - 1) + "\n".join(lines)
                    + "\n", "line": node.lineno, "path": problem_path}
    return None


def check_hook(fn):
    """Problem-side validation of a `call_kernel` (raises ValueError saying what is wrong)."""
    if not callable(fn):
        raise ValueError("call_kernel must be a function call_kernel(kernel, **inputs)")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise ValueError("call_kernel has no inspectable signature")
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY,
                                             params[0].POSITIONAL_OR_KEYWORD):
        raise ValueError("call_kernel must take the kernel as its first parameter: "
                         "call_kernel(kernel, **inputs)")


def binding_problem(fn, name, args, kwargs):
    """None when fn accepts these arguments, else a sentence naming the parameter."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*args, **kwargs)
        return None
    except TypeError as e:
        text = str(e)
    missing = [p.name for p in list(sig.parameters.values())[len(args):]
               if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               and p.name not in kwargs]
    accepted = {p.name for p in sig.parameters.values()}
    var_kw = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    extra = [k for k in kwargs if k not in accepted and not var_kw]
    if missing:
        p = sig.parameters[missing[0]]
        ann = "" if p.annotation is p.empty else " (annotated %s)" % _ann(p.annotation)
        return ("kernel %s: parameter %r%s gets no value: no input of the problem is named "
                "so. Add it to inputs(seed) when it is an array or a scalar; a config object, "
                "an Enum member or a helper object is built by the problem's "
                "call_kernel(kernel, **inputs), which runs where the kernel runs "
                "(PROTOCOL.md \"Binding real entry points\")" % (name, missing[0], ann))
    if extra:
        return ("kernel %s: the problem passes %r, which is no parameter of the kernel "
                "(parameters: %s); rename the input, or call the kernel yourself in "
                "call_kernel(kernel, **inputs)" % (name, extra[0], ", ".join(accepted)))
    return "kernel %s: %s" % (name, text)


def _ann(a):
    return getattr(a, "__name__", None) or repr(a)


class Launcher:
    """The entry point as `call_kernel` receives it: `kernel(...)` or `kernel[lnc](...)` /
    `kernel[grid](...)`. A call that does not bind raises `error_type` naming the parameter.
    The launch grid is passed on to the kernel object (the simulator's LNC support decides
    how a logical-core launch runs)."""

    def __init__(self, kernel, fn, name, error_type, grid=None):
        self._kernel = kernel
        self._fn = fn
        self._name = name
        self._error = error_type
        self._grid = grid

    def __getitem__(self, grid):
        return Launcher(self._kernel, self._fn, self._name, self._error, grid)

    def __call__(self, *args, **kwargs):
        why = binding_problem(self._fn, self._name, args, kwargs)
        if why:
            raise self._error(why)
        target = self._kernel
        if self._grid is not None:
            if not hasattr(target, "__getitem__"):
                target = _launchable(target)
            target = target[self._grid]
        return target(*args, **kwargs)

    def __repr__(self):
        return "<kernel %s%s>" % (self._name, "" if self._grid is None else "[%r]" % (
            self._grid,))


def _launchable(fn):
    """An undecorated sub-kernel (the NKI Library's router_topk) launched on a grid, as its
    caller's `nki.jit` would launch it: the simulator's kernel wrapper where the simulator runs,
    else the installed `nki.jit`. Never a silently dropped grid."""
    import sys  # noqa: PLC0415
    frontend = sys.modules.get("nkisim.api.frontend")
    if frontend is not None:
        return frontend.Kernel(fn)
    import nki  # noqa: PLC0415
    return nki.jit(fn)


def _plain(obj):
    """The Python function behind a decorated kernel (for its signature)."""
    from harnesslib.kernel import underlying_function  # noqa: PLC0415
    return underlying_function(obj) or obj


def select_for_hook(module, path, explicit):
    """(name, kernel) for a problem with call_kernel: the named kernel, else the one decorated
    kernel (NKI launcher) defined in the file; compile_error otherwise."""
    from harnesslib.failures import HarnessFailure  # noqa: PLC0415
    from harnesslib.kernel import defined_functions  # noqa: PLC0415
    funcs = defined_functions(module, path)
    if explicit:
        obj = getattr(module, explicit, None)
        if obj is None or not callable(obj):
            raise HarnessFailure("compile_error", "kernel file defines no function %r (named by "
                                 "KERNEL or kernel_name / --kernel-name); functions found: %s"
                                 % (explicit, ", ".join(n for n, _, _ in funcs) or "none"))
        return explicit, obj
    decorated = [(n, o) for n, o, f in funcs if o is not f]
    if len(decorated) == 1:
        return decorated[0]
    raise HarnessFailure("compile_error", "the problem calls the kernel through call_kernel and "
                         "the kernel file has %s; set KERNEL in the problem file" % (
                             "no decorated kernel" if not decorated else
                             "several decorated kernels (%s)" % ", ".join(
                                 n for n, _ in decorated)))


def bind(config, name, kernel, error_type):
    """The callable the kernel's process calls with the inputs as keyword arguments: the
    problem's hook around the kernel (config["call_hook"]), else the kernel itself. `grid`
    of the kernel object is kept (an SPMD launch)."""
    fn = _plain(kernel)
    hook = config.get("call_hook")
    if hook:
        import sys  # noqa: PLC0415
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        package = getattr(module, "__package__", None) or ""
        # relative imports in the hook resolve from the kernel file's folder, as the kernel's
        namespace = {"__name__": (package + "." if package else "") + "autocomp_call_hook",
                     "__package__": package}
        code = compile(hook["source"], hook.get("path") or "<call_kernel>", "exec")
        exec(code, namespace)  # noqa: S102 - the problem's own function, in the sandbox
        user = namespace[hook["name"]]
        launcher = Launcher(kernel, fn, name, error_type)

        def bound(**inputs):
            return user(launcher, **inputs)
        bound.grid = getattr(kernel, "grid", None)
        bound.launched_by_hook = True  # the hook may choose the grid: kernel[2](...)
        return bound

    return kernel  # bound by name or position as before (failures.explain_binding)
