"""Thread policy of a harness run.

The simulator multiplies one small tile at a time (a 128 x 128 by 128 x 512 product per
matmul instruction). A multi-threaded BLAS gains little on products that small, and its
worker threads spin (and yield) between the calls, which on a small host costs CPU time
without finishing any sooner. `single_threaded_blas()` has the BLAS libraries numpy may load
use one thread, unless the caller chose a number. It works only before numpy is imported.
"""
import os
import sys

_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "BLIS_NUM_THREADS")


def single_threaded_blas():
    """Set the BLAS thread-count variables the caller left unset to 1. True when numpy was
    not imported yet (so the setting takes effect)."""
    if any(os.environ.get(name) for name in _VARIABLES):
        return "numpy" not in sys.modules
    for name in _VARIABLES:
        os.environ[name] = "1"
    return "numpy" not in sys.modules
