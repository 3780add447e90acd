"""Modules outside the public `nki` namespaces that sample kernels import: collectives
(`nki.collectives`, legacy `neuronxcc.nki.nccl`), compiler-internal paths and underscore
functions that are public NKI operations under another name, and private APIs that have no
public equivalent (these import, and raise a clear error when called).

`modules(make_module, built)` returns the extra `sys.modules` entries for `activate` and
fills the modules it was given (`built`: name -> module of activate's table).

Mappings (each is the public operation's semantics, per the NKI API docs):
- `nisa._tiled_offloaded_memcpy(dst, src, dtype=None)` -> `nisa.dma_copy(dst, src)`: a copy
  done by the DMA engines ("offloaded"), split into transfers ("tiled"); dtype, when given,
  must be the destination's (the DMA converts through fp32 to it).
- `nisa._tiled_offloaded_fma(a, b, scales, dst)` -> `nisa.dma_compute(dst, [a, b], nl.add,
  scales)`: dst = a * scales[0] + b * scales[1] computed in fp32 inside the DMA engines.
- `neuronxcc.nki.compiler.backends.neuron.indexing.TileIndex`: the type of the index
  expressions `nl.arange` / `nl.mgrid` build (the simulator's `IExpr`).
- `neuronxcc.nki._private.private_api.core_barrier` / `sendrecv`: `nki.isa.core_barrier` /
  `nki.isa.sendrecv` between the programs of an LNC grid (machine/sync.py).
- `ncc.multi_buffer(k)` (loop directive) is accepted: iterations already get their own
  tiles in the simulator.

Raise when called (no public equivalent): `private_api.row_tiled_mm_kernel`,
`column_tiled_mm_kernel`, `cc_div`, `do_while`; `compiler.backends.neuron.tensor.local_tile`;
`_private_kernels.RoPE.RoPE_sbuf`, `_private_kernels.qkv.rmsnorm_qkv_isa_kernel`.
"""
from . import collectives as coll
from ..data import dtypes as D
from . import isa, language
from . import isa_sync as _isa_sync
from ..machine import sync as SYNC
from ..machine import runtime
from ..data.buffers import IExpr
from ..errors import compile_error


def _private_only(path, name):
    def f(*a, **k):
        raise compile_error(
            "%s.%s is a private compiler API with no public NKI equivalent; nkisim does not "
            "simulate it" % (path, name))
    f.__name__ = name
    f.__qualname__ = name
    return f


def _tiled_offloaded_memcpy(dst=None, src=None, dtype=None, **kw):
    if kw:
        raise compile_error("nisa._tiled_offloaded_memcpy: unsupported argument(s) %s"
                            % sorted(kw))
    if dtype is not None and dst is not None and D.lookup(dtype) is not dst.st.dt:
        raise compile_error("nisa._tiled_offloaded_memcpy: dtype=%r differs from the "
                            "destination's %s" % (dtype, dst.st.dt.name))
    return isa.dma_copy(dst=dst, src=src)


def _tiled_offloaded_fma(a, b, scales=None, dst=None, **kw):
    if kw:
        raise compile_error("nisa._tiled_offloaded_fma: unsupported argument(s) %s" % sorted(kw))
    if dst is None:
        raise compile_error("nisa._tiled_offloaded_fma: dst is required")
    return isa.dma_compute(dst, [a, b], language.add, scales=scales)


class multi_buffer:  # noqa: N801  (the compiler's name)
    """`nl.affine_range(n, directives=ncc.multi_buffer(k))`: let k iterations' tiles live at
    once. The simulator already gives each iteration's tiles their own storage (a loop body
    allocates afresh on every pass) and checks capacity by liveness, so the directive changes
    neither numerics nor the schedule; it is accepted and recorded only."""

    def __init__(self, count):
        if int(count) < 1:
            raise compile_error("ncc.multi_buffer: the buffer count must be >= 1, got %r"
                                % (count,))
        self.count = int(count)

    def __repr__(self):
        return "multi_buffer(%d)" % self.count


def core_barrier(tensor, ranks, **kw):
    """`nki.isa.core_barrier` (here under its private path): the SPMD programs `ranks` wait
    until all have reached it, so their writes to `tensor` are visible to each other
    (machine/sync.py); a barrier of one program is a no-op."""
    s = runtime.CUR
    try:
        ranks = tuple(sorted({int(r) for r in ranks}))
    except (TypeError, ValueError):
        raise compile_error("core_barrier: ranks must be program ranks, got %r"
                            % (ranks,)) from None
    if len(ranks) <= 1:
        return
    _isa_sync._sync_call(s, "core_barrier", lambda: SYNC.core_barrier(s, ranks))


def sendrecv(*args, **kw):
    """`nki.isa.sendrecv` under its private path: the same exchange between two programs."""
    return _isa_sync.sendrecv(*args, **kw)


# names kernels import from `neuronxcc.nki._private.private_api` with no public equivalent:
# each raises when called (an import alone does not fail the file)
_PRIVATE_API = ("row_tiled_mm_kernel", "column_tiled_mm_kernel", "cc_div", "do_while")
# private kernel modules (`neuronxcc.nki._private_kernels.<module>`) and the names imported
_PRIVATE_KERNELS = {"RoPE": ("RoPE_sbuf",), "qkv": ("rmsnorm_qkv_isa_kernel",)}


def modules(make_module, built):
    """Extra sys.modules entries; also fills `built`'s nki.collectives, isa and compiler."""
    out = {}
    for k, v in coll.CURRENT_API.items():
        setattr(built["nki.collectives"], k, v)
    built["nki.collectives"].__doc__ = "nki.collectives (nkisim: simulated rank groups)"
    legacy = built["neuronxcc.nki"]

    nccl = make_module("neuronxcc.nki.nccl", "neuronxcc.nki.nccl (nkisim: legacy collectives)")
    for k, v in coll.LEGACY_API.items():
        setattr(nccl, k, v)
    nccl.__path__ = []
    nccl_coll = make_module("neuronxcc.nki.nccl.collectives", "")
    for k, v in coll.LEGACY_API.items():
        setattr(nccl_coll, k, v)
    nccl.collectives = nccl_coll
    legacy.nccl = nccl
    out["neuronxcc.nki.nccl"] = nccl
    out["neuronxcc.nki.nccl.collectives"] = nccl_coll

    for m in (built["nki.isa"], built["neuronxcc.nki.isa"]):
        m._tiled_offloaded_memcpy = _tiled_offloaded_memcpy
        m._tiled_offloaded_fma = _tiled_offloaded_fma

    # `nt.tensor[nt.mutable]`: an annotation (inputs are writable in the simulator anyway)
    if not hasattr(built["nki.typing"], "mutable"):
        built["nki.typing"].mutable = "mutable"

    # compiler-internal paths (one module object serves both namespaces)
    compiler = built["nki.compiler"]
    compiler.multi_buffer = multi_buffer
    compiler.__path__ = []
    for n in ("backends", "backends.neuron", "backends.neuron.tensor",
              "backends.neuron.indexing"):
        m = make_module("neuronxcc.nki.compiler." + n, "")
        m.__path__ = []
        head, _, leaf = n.rpartition(".")
        setattr(out["neuronxcc.nki.compiler." + head] if head else compiler, leaf, m)
        out["neuronxcc.nki.compiler." + n] = m
    out["neuronxcc.nki.compiler.backends.neuron.indexing"].TileIndex = IExpr
    out["neuronxcc.nki.compiler.backends.neuron.tensor"].local_tile = _private_only(
        "neuronxcc.nki.compiler.backends.neuron.tensor", "local_tile")

    priv = make_module("neuronxcc.nki._private", "")
    priv.__path__ = []
    api = make_module("neuronxcc.nki._private.private_api",
                      "private compiler APIs (nkisim: each raises when called)")
    for n in _PRIVATE_API:
        setattr(api, n, _private_only("neuronxcc.nki._private.private_api", n))
    api.core_barrier = core_barrier
    api.sendrecv = sendrecv
    priv.private_api = api
    legacy._private = priv
    out["neuronxcc.nki._private"] = priv
    out["neuronxcc.nki._private.private_api"] = api

    kernels = make_module("neuronxcc.nki._private_kernels", "")
    kernels.__path__ = []
    legacy._private_kernels = kernels
    out["neuronxcc.nki._private_kernels"] = kernels
    for mod, names in _PRIVATE_KERNELS.items():
        path = "neuronxcc.nki._private_kernels." + mod
        m = make_module(path, "private compiler kernels (nkisim: each raises when called)")
        for n in names:
            setattr(m, n, _private_only(path, n))
        setattr(kernels, mod, m)
        out[path] = m
    return out
