"""Failure values of the harness protocol.

A `HarnessFailure` is raised inside the harness and turned into the `failure` object of the
output JSON by the entry point; it is never shown to the user as a traceback.
"""
import os
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
