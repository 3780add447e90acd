"""What the hardware rejects although a simulator would run it (the `nki` namespace only).

The NKI 0.3.0 release notes (SDK 2.29) list, as working in simulation but failing on
hardware: `nl.divide`, `nl.fmod` / `nl.mod`, `nl.power` with a scalar exponent, broadcasting
binary ops, `nl.softmax`, `nl.rms_norm`, `nl.matmul` without `transpose_x=True` and `nl.store`
from PSUM; the same release makes `dma_copy` refuse to read PSUM. Kernels written against the
`nki` namespace (SDK 2.29+) get these as compile errors. Kernels written against the legacy
`neuronxcc.nki` namespace keep what that compiler accepted.

The namespace is the one the kernel's own file imported: `activate` installs distinct module
objects for the two namespaces (same functions), and `strict()` looks at the globals of the
innermost kernel-file frame. A kernel file that imports anything from `neuronxcc` is legacy.
With no kernel frame on the stack (a replayed trace: its recording already ran these checks)
nothing is rejected.
"""
import sys
import types

from .. import errors as E

REASON = "works in simulation but fails on hardware (NKI 0.3.0 release notes)"

# globals dict id -> (the dict, strict?) for kernel files already classified
_seen = {}


def _kernel_globals():
    if not E._kernel_files:
        return None
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_filename in E._kernel_files:
            return f.f_globals
        f = f.f_back
    return None


def namespace_of(g):
    """'nki', 'legacy' or None: which NKI namespace the module globals `g` imported."""
    found = None
    for v in list(g.values()):
        if isinstance(v, types.ModuleType):
            name = getattr(v, "__name__", "") or ""
            if name == "neuronxcc" or name.startswith("neuronxcc."):
                return "legacy"
            if name == "nki" or name.startswith("nki."):
                found = "nki"
    return found


def strict():
    """True when the running kernel was written against the `nki` namespace."""
    g = _kernel_globals()
    if g is None:
        return False
    hit = _seen.get(id(g))
    if hit is not None and hit[0] is g:
        return hit[1]
    s = namespace_of(g) == "nki"
    _seen[id(g)] = (g, s)
    return s


def reject(what, instead):
    """Raise the hardware's refusal of `what` (with the supported alternative) when the
    kernel is in the `nki` namespace; otherwise do nothing."""
    if strict():
        raise E.compile_error("%s %s; in the nki namespace use %s" % (what, REASON, instead))
