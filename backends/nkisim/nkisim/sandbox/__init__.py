"""Record/replay in the OS sandbox: the kernel runs confined (confine.py) in its own process
(process.py) on proxies (boundary.py), which record its API calls (record.py); the trusted
side re-executes the trace on real inputs (replay.py)."""
from .process import KernelProcess, record_trace  # noqa: F401  (the parent side)
