"""Probe kernel: `reps` back-to-back TensorE matmuls accumulating into one PSUM bank
([128, 128] stationary, [128, 512] moving, operands in the inputs' dtype): the PE array
streams without refilling, so fp32 against bf16 operands shows the fp32 slow-down."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def kernel(a, b, reps):
    out = nl.ndarray(b.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    sa = nl.load(a)
    sb = nl.load(b)
    acc = nl.zeros(b.shape, dtype=nl.float32, buffer=nl.psum)
    for _ in nl.sequential_range(reps):
        acc += nisa.nc_matmul(sa, sb)
    nl.store(out, value=nl.copy(acc))
    return out
