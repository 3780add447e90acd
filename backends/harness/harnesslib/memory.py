"""Process memory policy of a harness run.

An evaluation allocates and frees arrays of hundreds of megabytes per seed (inputs, the
kernel's outputs, the reference). glibc serves each of those with a fresh mmap and unmaps it
on free, so every seed faults in new zero pages; on virtualised hosts a fresh page costs
more CPU than the arithmetic done on it. `reuse_freed_memory()` has glibc keep large blocks
in the heap instead: a freed seed's pages serve the next seed's arrays. Peak memory does not
grow (the same sizes are reused); the process simply keeps its peak until it exits.
"""
import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
# mallopt takes an int: the largest trim threshold it accepts (2 GiB - 1)
_TRIM_THRESHOLD = (1 << 31) - 1

_done = []


def reuse_freed_memory():
    """Ask glibc's malloc to serve every block from the heap (no per-block mmap) and not to
    return freed heap memory to the system. True when applied; False where there is no glibc
    (other C libraries keep their own policy). Applies to the whole process, once."""
    if _done:
        return _done[0]
    ok = False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt.restype = ctypes.c_int
        ok = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
    except (OSError, AttributeError):
        ok = False
    _done.append(ok)
    return ok
