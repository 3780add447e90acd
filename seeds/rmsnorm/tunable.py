"""RMSNorm with declared knobs (syntax in docs/knobs.md). The default values give the slow
kernel: the square on VectorE, then sum, scale, rsqrt and two multiplies as separate instructions.
SQUARE_ENGINE = "scalar" moves the square to ScalarE, which runs beside VectorE; FUSE_TAIL = True
folds mean and rsqrt into one activation and the two multiplies into one scalar_tensor_tensor.
Every combination computes the same result."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

# autocomp: knob SQUARE_ENGINE = ["vector", "scalar"]
SQUARE_ENGINE = "vector"


@nki.jit
def rmsnorm_kernel(a_tensor, g_tensor):
    rows, hidden = a_tensor.shape
    assert rows % nl.tile_size.pmax == 0
    out_tensor = nl.ndarray((rows, hidden), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    g_2d = g_tensor.reshape((1, hidden))
    P = nl.tile_size.pmax
    # autocomp: knob FUSE_TAIL = [False, True]
    FUSE_TAIL = False

    g_tile = nl.load(g_2d[0:1, :])
    g_bcast = nl.broadcast_to(g_tile, shape=(P, hidden))

    for i in nl.affine_range(rows // P):
        a_tile = nl.load(a_tensor[i * P:(i + 1) * P, :])
        if SQUARE_ENGINE == "scalar":
            squared = nisa.activation(op=nl.square, data=a_tile)
        else:
            squared = nl.multiply(a_tile, a_tile)
        if FUSE_TAIL:
            square_sum = nisa.tensor_reduce(op=nl.add, data=squared, axis=(1,), keepdims=True)
            rms_reciprocal = nisa.activation(op=nl.rsqrt, data=square_sum, scale=1.0 / hidden)
            out_tile = nisa.scalar_tensor_tensor(data=a_tile, op0=nl.multiply,
                                                 operand0=rms_reciprocal, op1=nl.multiply,
                                                 operand1=g_bcast)
        else:
            square_sum = nl.sum(squared, axis=[1], keepdims=True)
            mean = nl.multiply(square_sum, 1.0 / hidden)
            rms_reciprocal = nl.rsqrt(mean)
            normalized = nl.multiply(a_tile, rms_reciprocal)
            out_tile = nl.multiply(normalized, g_bcast)
        nl.store(out_tensor[i * P:(i + 1) * P, :], value=out_tile)

    return out_tensor
