"""Probe kernel: `reps` TensorE matmuls of a [128, 128] stationary tile with a [128, N] moving
tile, each waiting for the ScalarE copy of the previous result out of PSUM (the PE array is
idle before every matmul and fills again); operands in the dtype of the inputs."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def kernel(a, b, reps):
    out = nl.ndarray(b.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    sa = nl.load(a)
    t = nl.load(b)
    acc = nl.ndarray(b.shape, dtype=nl.float32, buffer=nl.psum)
    for _ in nl.sequential_range(reps):
        acc[...] = nisa.nc_matmul(sa, t)
        t = nisa.tensor_copy(acc, engine=nisa.scalar_engine, dtype=b.dtype)
    nl.store(out, value=t)
    return out
