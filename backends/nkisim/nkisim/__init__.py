"""nkisim: a CPU simulator for AWS Neuron NKI kernels, with an analytical timing model.

    import nkisim
    nkisim.activate()          # `import nki` / `neuronxcc.nki` now resolve to the simulator
    res = nkisim.simulate(kernel, {"a": a, "b": b}, target="trn2")
    res.outputs, res.latency_us, res.metrics, res.roofline, res.bottleneck, res.instructions
"""
from .activate import activate, deactivate, is_active
from .errors import NkiCompileError, NkiError, NkiRuntimeError
from .simulator import SimResult, TensorSpec, simulate
from .dtypes import to_bf16

__version__ = "0.1.0"

__all__ = ["activate", "deactivate", "is_active", "simulate", "SimResult", "TensorSpec",
           "NkiCompileError",
           "NkiRuntimeError", "NkiError", "to_bf16", "__version__"]
