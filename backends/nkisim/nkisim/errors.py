"""Errors raised by the simulator, shaped like the NKI compiler's.

`NkiCompileError` is for kernels the compiler would reject (constraint violations, bad
types, capacity overflow). `NkiRuntimeError` is for failures while the kernel runs (for
example an out-of-bounds tensor access). Both carry `.message` and `.line`: the line in
the kernel file where the failing call was made, or None when unknown.
"""
import sys

# Set by the simulator while a kernel runs: the absolute path of the kernel's source file.
_kernel_files = set()


class NkiError(Exception):
    """Base class; `str(e)` is `message` prefixed with the kernel line when known."""

    def __init__(self, message, line=None):
        self.message = str(message)
        self.line = line
        super().__init__(self.__str__())

    def __str__(self):
        if self.line is not None:
            return "line %d: %s" % (self.line, self.message)
        return self.message


class NkiCompileError(NkiError):
    """The kernel violates an NKI constraint (what the compiler would report)."""


class NkiRuntimeError(NkiError):
    """The kernel failed while executing (e.g. out-of-bounds access)."""


def set_kernel_files(paths):
    _kernel_files.clear()
    _kernel_files.update(p for p in paths if p)


def current_kernel_line():
    """Line number of the innermost stack frame that belongs to a kernel file, or None."""
    if not _kernel_files:
        return None
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename in _kernel_files:
            return f.f_lineno
        f = f.f_back
    return None


def traceback_kernel_line(tb):
    """Innermost line of a traceback that lies in a kernel file, or None."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in _kernel_files:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def compile_error(message):
    """Build an NkiCompileError located at the current kernel line."""
    return NkiCompileError(message, current_kernel_line())


def runtime_error(message):
    """Build an NkiRuntimeError located at the current kernel line."""
    return NkiRuntimeError(message, current_kernel_line())
