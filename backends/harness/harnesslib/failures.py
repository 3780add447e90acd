"""Failure values of the harness protocol.

A `HarnessFailure` is raised inside the harness and turned into the `failure` object of the
output JSON by the entry point; it is never shown to the user as a traceback.
"""
import ast
import os
import re
import traceback

KINDS = (
    "compile_error",
    "runtime_error",
    "mismatch",
    "timeout",
    "problem_error",
    "unavailable",
    "harness_error",
    "forbidden_access",
    "implausible",
)
STAGES = ("load", "verify", "benchmark", "profile")


class HarnessFailure(Exception):
    """A failure with a protocol kind; `stage` may be filled in by the caller later."""

    def __init__(self, kind, message, line=None, stage=None):
        if kind not in KINDS:
            raise ValueError("unknown failure kind %r" % (kind,))
        super().__init__(message)
        self.kind = kind
        self.message = str(message)
        self.line = line
        self.stage = stage

    def to_json(self, default_stage="load"):
        return {
            "kind": self.kind,
            "stage": self.stage or default_stage,
            "message": self.message,
            "line": self.line,
        }


class HarnessTimeout(BaseException):
    """Raised by the --timeout alarm; a BaseException so kernel code cannot swallow it."""


def same_file(a, b):
    """True when two paths name the same file (by normalised absolute path)."""
    if not a or not b:
        return False
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def line_in_file(tb, path):
    """Innermost traceback line located in `path`, or None."""
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if same_file(frame.f_code.co_filename, path):
            line = lineno
    return line


def describe_exception(exc, limit=1200):
    """One-paragraph text for an exception: type, message and the innermost frames."""
    text = "%s: %s" % (type(exc).__name__, exc)
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    if frames:
        where = "; ".join("%s:%d in %s" % (os.path.basename(f.filename), f.lineno, f.name)
                          for f in frames)
        text += " (at %s)" % where
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


_UNEXPECTED_KEYWORD = re.compile(r"(\w+)\(\) got an unexpected keyword argument '(\w+)'")
_MISSING_ARGUMENT = re.compile(r"(\w+)\(\) missing (\d+) required (?:positional|keyword-only) "
                               r"arguments?: ([^()]*?)(?: \(at |$)")
_EXPLAINED = "(how inputs reach the kernel:"


def explain_binding(message, kernel_name, passed):
    """`message` with what to do appended when it is Python's TypeError for a call of the
    kernel function `kernel_name` with keyword arguments `passed` (the problem's input names)
    that do not fit its parameters; other messages (e.g. an NKI call inside the kernel with an
    unknown keyword) are returned unchanged."""
    if _EXPLAINED in message:
        return message
    names = ", ".join(passed) or "none"
    m = _UNEXPECTED_KEYWORD.search(message)
    if m and m.group(1) == kernel_name:
        return ("%s %s the harness passes each input as a keyword argument named like the "
                "problem's input (%s), and kernel %s() has no parameter %r. Name the kernel's "
                "parameters after the problem's inputs, or bind by position: BIND = "
                "\"position\" in the problem file (reference modules with get_inputs()/"
                "forward() are bound by position already))"
                % (message, _EXPLAINED, names, kernel_name, m.group(2)))
    m = _MISSING_ARGUMENT.search(message)
    if m and m.group(1) == kernel_name:
        return ("%s %s kernel %s() needs %s, which the problem's inputs (%s) do not provide "
                "by that name. Give the parameter a default, name it after an input, or bind "
                "by position: BIND = \"position\" in the problem file; a config object, an "
                "Enum member or a helper object is built by the problem's "
                "call_kernel(kernel, **inputs), PROTOCOL.md \"Binding real entry points\")"
                % (message, _EXPLAINED, kernel_name, m.group(3).strip(), names))
    return message


_ALLOCATORS = ("ndarray", "empty")


def _call_name(node):
    """'ndarray' for nl.ndarray(...) / ndarray(...), else None."""
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute):
            return f.attr
        if isinstance(f, ast.Name):
            return f.id
    return None


def _target_name(node):
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def uninitialised_accumulators(kernel_path):
    """[(line, tile name, allocation line, what)] for accumulations into tiles allocated
    without initial values: `t[...] += x` where t came from nl.ndarray(...), and no whole-tile
    initialisation precedes it (an nl.loop_reduce there is right: it starts from its first
    value). Found by
    reading the source (the kernel is not run); [] when the file cannot be parsed."""
    try:
        with open(kernel_path, encoding="utf-8", errors="replace") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return []
    allocated = {}    # name -> allocation line
    written = set()   # names plainly assigned (t[...] = value) after allocation
    found = []
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AugAssign))),
                       key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(node, ast.Assign):
            value_call = _call_name(node.value)
            for target in node.targets:
                name = _target_name(target)
                if name is None:
                    continue
                if isinstance(target, ast.Name):
                    if value_call in _ALLOCATORS:
                        allocated[name] = node.lineno
                        written.discard(name)
                    else:
                        allocated.pop(name, None)
                elif name in allocated:
                    # an nl.loop_reduce into unwritten elements starts from its first value
                    # (MODEL.md "Reductions into uninitialised tensors"): a write, not a hint
                    written.add(name)
        else:
            name = _target_name(node.target)
            if name in allocated and name not in written and not isinstance(node.target,
                                                                            ast.Name):
                found.append((node.lineno, name, allocated[name], "+="))
    return found


def unwritten_output_hint(kernel_path):
    """(text, line) explaining NaN outputs by an accumulation into uninitialised memory, or
    (\"\", None) when the kernel has none."""
    found = uninitialised_accumulators(kernel_path)
    if not found:
        return "", None
    line, name, alloc_line, what = found[0]
    more = " (and %d more)" % (len(found) - 1) if len(found) > 1 else ""
    return ("line %d accumulates into %s with %s%s, but %s was allocated with nl.ndarray "
            "(line %d), which holds no values: the accumulation's first step reads memory "
            "nothing wrote (the simulator fills it with NaN). Initialise %s before the loop "
            "(nl.zeros(...), or nisa.memset / nl.full with the reduction's identity: 0 for add, "
            "-inf or the dtype's lowest value for max), or assign the first iteration's value "
            "instead of accumulating it" % (line, name, what, more, name, alloc_line, name),
            line)
