"""`nki.isa` synchronisation, device registers and transfers between NeuronCores (not modelled:
a call is a compile error).
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
                        "runs the programs of a launch one after another, so neither core "
                        "can wait for the other)")


@_table.unmodelled
def register_alloc(*args, **kw):
    raise compile_error("nisa.register_alloc (device registers) is not supported by nkisim")


@_table.unmodelled
def sendrecv(*args, **kw):
    """`nisa.sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine)`: a
    transfer between the NeuronCores of a logical core. Not modelled here: nkisim runs one
    NeuronCore per program. Hook for the multi-core model: it replaces this function (same
    signature, the API table's entry) and drops the `unmodelled` mark, after which
    gen_api_table.py records sendrecv as modelled."""
    raise compile_error("nisa.sendrecv between NeuronCores is not simulated by nkisim (it "
                        "runs the programs of a launch one after another, so neither core "
                        "can receive while the other sends)")
