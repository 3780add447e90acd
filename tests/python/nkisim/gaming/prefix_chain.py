"""Gaming prefix sum: out[:, j] = out[:, j - 1] + x[:, j] as a chain of dependent narrow
[128, 1] adds. `affine_range` claims the iterations are independent; they are not, so the
compiler cannot issue them as one wide instruction. Written three ways: in small affine
loops (blocks of 64 columns), with an affine iterator kept alive for the whole kernel, and
with plain `range` (the honest form). All three must cost the same chain of adds."""
import nki
import nki.isa as nisa
import nki.language as nl

N = 2048


def _body(xt, acc, j):
    acc[:, j:j + 1] = nisa.tensor_tensor(acc[:, j - 1:j], xt[:, j:j + 1], nl.add)


@nki.jit
def prefix_affine(x):
    out = nl.ndarray((128, N), dtype=x.dtype, buffer=nl.shared_hbm)
    xt = nl.load(x)
    acc = nl.ndarray((128, N), dtype=x.dtype, buffer=nl.sbuf)
    acc[:, 0:1] = nl.copy(xt[:, 0:1])
    for b in nl.affine_range(N // 64):
        for i in nl.affine_range(64):
            j = b * 64 + i
            if j > 0:
                _body(xt, acc, j)
    nl.store(out, acc)
    return out


@nki.jit
def prefix_open_frame(x):
    out = nl.ndarray((128, N), dtype=x.dtype, buffer=nl.shared_hbm)
    it = iter(nl.affine_range(2))
    next(it)  # the loop stays open: every later instruction is "in" its first iteration
    xt = nl.load(x)
    acc = nl.ndarray((128, N), dtype=x.dtype, buffer=nl.sbuf)
    acc[:, 0:1] = nl.copy(xt[:, 0:1])
    for j in range(1, N):
        _body(xt, acc, j)
    nl.store(out, acc)
    return out


@nki.jit
def prefix_range(x):
    out = nl.ndarray((128, N), dtype=x.dtype, buffer=nl.shared_hbm)
    xt = nl.load(x)
    acc = nl.ndarray((128, N), dtype=x.dtype, buffer=nl.sbuf)
    acc[:, 0:1] = nl.copy(xt[:, 0:1])
    for j in range(1, N):
        _body(xt, acc, j)
    nl.store(out, acc)
    return out
