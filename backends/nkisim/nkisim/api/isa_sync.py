"""`nki.isa` synchronisation and transfers between the programs of a launch (machine/sync.py);
device registers (not modelled: a call is a compile error).
"""

from ..machine import runtime
from ..data.buffers import Tensor
from ..errors import compile_error
from . import table as _table
from .isa_base import (_bind)
from ..machine import sync as SYNC
from ..machine.core import (dma as _dma)


_CORE_BARRIER_ARGS = ["data", "cores", "engine", "name"]
_SENDRECV_ARGS = ["src", "dst", "send_to_rank", "recv_from_rank", "pipe_id", "dma_engine",
                  "priority", "name"]


def core_barrier(*args, **kw):
    """Barrier between the two NeuronCores of an HBM stack (cores=(0, 1) only; trn2/trn3)
    for `data` both write: each program's later instructions start after both programs'
    earlier work has ended (machine/sync.py). The programs are the launch's ranks 0 and 1
    (`kernel[2](...)`). The documentation asks for shared-HBM `data`; the NKI Library's
    router_topk also passes an SBUF tile (its caller keeps the affinities on chip), so any
    HBM or SBUF tensor is accepted."""
    p = _bind("core_barrier", args, kw, _CORE_BARRIER_ARGS, False)
    sim = runtime.CUR
    if sim is not None and sim.target.name == "trn1":
        raise compile_error("nisa.core_barrier is available only on NeuronCore-v3 or newer "
                            "(trn2, trn3), not on trn1")
    missing = [n for n in ("data", "cores") if p.get(n) is None]
    if missing:
        raise compile_error("nisa.core_barrier needs %s" % " and ".join(missing))
    data, cores = p["data"], p["cores"]
    if not isinstance(data, Tensor) or data.st.kind == "psum":
        raise compile_error("nisa.core_barrier: data must be a tensor in HBM (the shared data "
                            "both cores write) or SBUF, not %s"
                            % ("a PSUM tile" if isinstance(data, Tensor) else
                               type(data).__name__))
    try:
        cores = tuple(int(c) for c in cores)
    except (TypeError, ValueError):
        raise compile_error("nisa.core_barrier: cores must be a tuple of core ids, got %r"
                            % (cores,)) from None
    if cores != (0, 1):
        raise compile_error("nisa.core_barrier supports only cores=(0, 1), got %r" % (cores,))
    _sync_call(sim, "nisa.core_barrier", lambda: SYNC.core_barrier(sim, cores))


@_table.unmodelled
def register_alloc(*args, **kw):
    raise compile_error("nisa.register_alloc (device registers) is not supported by nkisim")


def sendrecv(*args, **kw):
    """`nisa.sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine)`: this
    program sends `src` to program `send_to_rank`'s `dst` and receives that program's `src`
    into its own `dst` (machine/sync.py: the exchange of two programs; each transfer is a DMA
    on its sender's core). send_to_rank and recv_from_rank must name the same peer."""
    p = _bind("sendrecv", args, kw, _SENDRECV_ARGS, False)
    sim = runtime.CUR
    missing = [n for n in ("src", "dst", "send_to_rank", "recv_from_rank") if p.get(n) is None]
    if missing:
        raise compile_error("nisa.sendrecv needs %s" % " and ".join(missing))
    src, dst = p["src"], p["dst"]
    for n, t in (("src", src), ("dst", dst)):
        if not isinstance(t, Tensor):
            raise compile_error("nisa.sendrecv: %s must be a tensor, got %s"
                                % (n, type(t).__name__))
        if t.st.kind == "psum":
            raise compile_error("nisa.sendrecv: %s is in PSUM; DMA cannot access PSUM (copy it "
                                "to SBUF first)" % n)
    try:
        to, frm = int(p["send_to_rank"]), int(p["recv_from_rank"])
        pipe = int(p.get("pipe_id") or 0)
    except (TypeError, ValueError):
        raise compile_error("nisa.sendrecv: send_to_rank, recv_from_rank and pipe_id must be "
                            "integers, got %r, %r, %r" % (p["send_to_rank"],
                                                          p["recv_from_rank"],
                                                          p.get("pipe_id"))) from None
    if to != frm:
        raise compile_error("nisa.sendrecv: send_to_rank=%d and recv_from_rank=%d differ; "
                            "nkisim models the exchange between two programs only" % (to, frm))
    n_prog = _programs(sim.grid) if sim is not None else 1
    if not 0 <= to < n_prog:
        raise compile_error("nisa.sendrecv: send_to_rank=%d, but the launch has %d program%s "
                            "(ranks 0..%d)" % (to, n_prog, "" if n_prog == 1 else "s",
                                               n_prog - 1))
    if src.size != dst.size:
        raise compile_error("nisa.sendrecv: src %s (%d elements) and dst %s (%d elements) "
                            "differ in size" % (list(src.shape), src.size, list(dst.shape),
                                                dst.size))

    def transfer(d, s):
        _dma(d, s, None, opname="nisa.sendrecv")

    _sync_call(sim, "nisa.sendrecv", lambda: SYNC.sendrecv(sim, src, dst, to, pipe, transfer))


def _programs(grid):
    n = 1
    for g in grid:
        n *= int(g)
    return n


def _sync_call(sim, what, run):
    """Run a sync call's rendezvous where the replay can suspend programs; while recording
    (no data) the call is only checked; a direct `simulate` runs its programs straight
    through, so there a call that would wait for another program is an error."""
    sync = getattr(sim, "sync", None) if sim is not None else None
    if sync is SYNC.RECORDING:
        return
    if sync is None:
        if sim is None:
            return
        if _programs(sim.grid) > 1:
            raise compile_error("%s between programs needs the trusted replay, which can "
                                "suspend a program until its partner arrives (the harness, "
                                "autocomp-mcp); nkisim.simulate runs the programs straight "
                                "through" % what)
        sim.sync = SYNC.Rendezvous(sim.grid)  # one program: it can meet only itself
        try:
            run()
        finally:
            sim.sync = None
        return
    run()
