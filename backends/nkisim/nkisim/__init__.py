"""nkisim: a CPU simulator for AWS Neuron NKI kernels, with an analytical timing model.

    import nkisim
    nkisim.activate()          # `import nki` / `neuronxcc.nki` now resolve to the simulator
    res = nkisim.simulate(kernel, {"a": a, "b": b}, target="trn2")
    res.outputs, res.latency_us, res.metrics, res.roofline, res.bottleneck, res.instructions

Untrusted kernels: `nkisim.sandbox.record_trace(config)` records a kernel's API calls in a
child process (no input data there) and `nkisim.replay.replay(trace, inputs, ...)` re-executes
them here on the real inputs; see MODEL.md, "Provenance".
"""
from .api.activate import activate, deactivate, is_active
from .errors import NkiCompileError, NkiError, NkiRuntimeError
from .sandbox.boundary import NkiForbiddenAccess
from .machine.simulator import SimResult, TensorSpec, simulate
from .api.collectives import simulate_ranks
from .data.dtypes import to_bf16
from .data import buffers as _buffers
from .api import language as _language

# Tensors' Python operators call the language front end; buffers.py sits below it and does
# not import it (the package's imports run storage -> instructions -> front end).
_buffers.install_front_end(**{name: getattr(_language, name)
                              for name in _buffers.FRONT_END_OPS})

__version__ = "0.2.0"

__all__ = ["activate", "deactivate", "is_active", "simulate", "simulate_ranks", "SimResult", "TensorSpec",
           "NkiCompileError",
           "NkiRuntimeError", "NkiError", "NkiForbiddenAccess", "to_bf16", "__version__"]
