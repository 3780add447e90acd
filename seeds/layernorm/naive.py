"""LayerNorm, naive: mean and variance as two separate reduction passes, every arithmetic
step its own instruction, gamma and beta reloaded and re-broadcast for every row tile."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

EPS = 1e-5


@nki.jit
def layernorm_kernel(input_tensor, gamma, beta):
    rows, cols = input_tensor.shape
    P = nl.tile_size.pmax
    assert rows % P == 0
    out_tensor = nl.ndarray((rows, cols), dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    gamma_2d = gamma.reshape((1, cols))
    beta_2d = beta.reshape((1, cols))

    for i in nl.affine_range(rows // P):
        x = nl.load(input_tensor[i * P:(i + 1) * P, :])
        mean = nl.mean(x, axis=[1], keepdims=True)
        x = nl.subtract(x, mean)
        var = nl.mean(nl.multiply(x, x), axis=[1], keepdims=True)
        rstd = nl.rsqrt(nl.add(var, EPS))
        x = nl.multiply(x, rstd)
        param = nl.broadcast_to(nl.load(gamma_2d[0:1, :]), shape=(P, cols))
        x = nl.multiply(x, param)
        param = nl.broadcast_to(nl.load(beta_2d[0:1, :]), shape=(P, cols))
        x = nl.add(x, param)
        nl.store(out_tensor[i * P:(i + 1) * P, :], value=x)

    return out_tensor
