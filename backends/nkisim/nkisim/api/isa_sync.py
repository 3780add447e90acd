"""`nki.isa` synchronisation and device registers (not modelled: a call is a compile error).
"""

from ..machine import runtime
from ..data.buffers import Tensor
from ..errors import compile_error
from . import table as _table
from .isa_base import (_bind)


_CORE_BARRIER_ARGS = ["data", "cores", "engine", "name"]


@_table.unmodelled
def core_barrier(*args, **kw):
    """Barrier between the two NeuronCores of an HBM stack (cores=(0, 1) only; trn2/trn3)
    for shared-HBM `data` both write. Not simulated (nkisim runs one NeuronCore): a call is
    a compile error.

    Never a silent no-op: the simulator runs the programs of a grid one after another, so
    it cannot honour a barrier between them. (The private path's barrier of a single
    program is a no-op: private.py.)"""
    p = _bind("core_barrier", args, kw, _CORE_BARRIER_ARGS, False)
    sim = runtime.CUR
    if sim is not None and sim.target.name == "trn1":
        raise compile_error("nisa.core_barrier is available only on NeuronCore-v3 or newer "
                            "(trn2, trn3), not on trn1")
    missing = [n for n in ("data", "cores") if p.get(n) is None]
    if missing:
        raise compile_error("nisa.core_barrier needs %s" % " and ".join(missing))
    data, cores = p["data"], p["cores"]
    if not isinstance(data, Tensor) or data.st.kind != "hbm":
        raise compile_error("nisa.core_barrier: data must be a tensor in shared HBM")
    try:
        cores = tuple(int(c) for c in cores)
    except (TypeError, ValueError):
        raise compile_error("nisa.core_barrier: cores must be a tuple of core ids, got %r"
                            % (cores,)) from None
    if cores != (0, 1):
        raise compile_error("nisa.core_barrier supports only cores=(0, 1), got %r" % (cores,))
    raise compile_error("nisa.core_barrier between NeuronCores is not simulated by nkisim (it "
                        "simulates one NeuronCore; the programs of a grid run one after "
                        "another)")


@_table.unmodelled
def register_alloc(*args, **kw):
    raise compile_error("nisa.register_alloc (device registers) is not supported by nkisim")
