"""Kernels for the NKIBench training anchors (calibration/anchors.json, source "nkibench"),
written for calibration from what each published baseline does: the same input layouts,
tiling, loop nests, instructions and load/store pattern, so that the simulator sees the
program the trn1 figures were measured on. All fp32. Each function returns its output;
SHAPES gives the anchor's inputs (name -> (shape, dtype), or a scalar).

adamw: per 128-row tile and 1024-column chunk, the AdamW update of theta from grad, m and
  v in 512-column halves, element-wise work through engine-less tensor_scalar and nl.*.
silu: x / (1 + exp(-x)) per [128, 1024] chunk, in 512-column halves.
bmm: per batch and 1024-column chunk of b, the a rows transposed on TensorE (identity
  matmul) into one [64, 1024] slab per 1024 rows, then [128, 512] matmuls with K = 64.
matmul: per 1024-column block of b (all of K loaded into SBUF), every 128-row tile of a is
  loaded again (eight K tiles per DMA), transposed on TensorE, and multiplied over K = 5120.
add_rmsnorm_matmul: per 128-row tile, (x + z) RMS-normalised and scaled by g, then
  multiplied by w, whose [128, 512] tiles are loaded in the row loop as fresh tiles.
mamba: the selective scan with the state loop outside the channel-tile loop (delta, u, a,
  b, c loaded for every state and channel tile), accumulated in SBUF, stored at the end.
transpose_matmul: out = lhs^T @ rhs with the contraction dimension split (128, 16); per
  1024-row block of the output, all of rhs is loaded again.
"""
import numpy as np

import neuronxcc.nki.isa as nisa  # the namespace the published baselines are written in
import neuronxcc.nki.language as nl

F32 = "float32"
SHAPES = {
    "adamw": {"theta": ((10944, 2048), F32), "grad": ((10944, 2048), F32),
              "m": ((10944, 2048), F32), "v": ((10944, 2048), F32)},
    "silu": {"x": ((128, 32, 7168), F32)},
    "bmm": {"a": ((16, 4096, 64), F32), "b": ((16, 64, 4096), F32)},
    "matmul": {"a": ((32, 128, 40, 128), F32), "b": ((40, 128, 12288), F32)},
    "add_rmsnorm_matmul": {"x": ((4096, 1024), F32), "w": ((1024, 2048), F32),
                           "eps": 1e-05, "z": ((4096, 1024), F32), "g": ((1024,), F32)},
    "mamba": {"delta": ((256, 7168), F32), "u": ((256, 7168), F32), "a": ((256, 16), F32),
              "b": ((16, 7168), F32), "c": ((16, 7168), F32)},
    "transpose_matmul": {"lhs": ((128, 16, 4096), F32), "rhs": ((128, 16, 10944), F32)},
}


def _scaled(t, factor):
    return nisa.tensor_scalar(data=t, op0=nl.multiply, operand0=factor,
                              engine=nisa.unknown_engine)


def adamw(theta, grad, m, v):
    """theta - 1e-5 theta - 0.01 m' / (sqrt(1000 v') + 1e-8), m' = 0.9 m + 0.1 g,
    v' = 0.999 v + 0.001 g^2."""
    rows, cols = theta.shape
    out = nl.ndarray((rows, cols), dtype=theta.dtype, buffer=nl.shared_hbm)
    zero = nl.zeros((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    chunk = min(cols, 1024)
    half = min(chunk, 512)
    for r in nl.affine_range((rows + 127) // 128):
        r0 = r * 128
        p = min(128, rows - r0)
        for c in nl.affine_range(cols // chunk):
            cs = slice(c * chunk, (c + 1) * chunk)
            th = nl.load(theta[r0:r0 + p, cs])
            mt = nl.load(m[r0:r0 + p, cs])
            vt = nl.load(v[r0:r0 + p, cs])
            gt = nl.load(grad[r0:r0 + p, cs])
            res = nl.ndarray((p, chunk), dtype=theta.dtype, buffer=nl.sbuf)
            for h in nl.affine_range(chunk // half):
                hs = slice(h * half, (h + 1) * half)
                decayed = nl.subtract(th[:, hs], _scaled(th[:, hs], 1e-05))
                m_new = nl.add(_scaled(mt[:, hs], 0.9), _scaled(gt[:, hs], 0.1))
                step = _scaled(m_new, 0.01)
                v_kept = _scaled(vt[:, hs], 0.999)
                v_new = nl.add(v_kept, nl.multiply(_scaled(gt[:, hs], 0.001), gt[:, hs]))
                root = nisa.activation(op=nl.sqrt, data=v_new, bias=zero[:p, :], scale=1000.0)
                denom = nisa.tensor_scalar(data=root, op0=nl.add, operand0=1e-08,
                                           engine=nisa.unknown_engine)
                res[:, hs] = nl.subtract(decayed, nl.multiply(step, nisa.reciprocal(denom)))
            nl.store(out[r0:r0 + p, cs], value=res)
    return out


def silu(x):
    parts, tiles, cols = x.shape
    out = nl.ndarray((parts, tiles, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    zero = nl.zeros((parts, 1), dtype=nl.float32, buffer=nl.sbuf)
    chunk = min(cols, 1024)
    half = min(chunk, 512)
    for t in nl.affine_range(tiles):
        for c in nl.affine_range(cols // chunk):
            cs = slice(c * chunk, (c + 1) * chunk)
            xt = nl.load(x[:, t, cs])
            res = nl.ndarray((parts, chunk), dtype=x.dtype, buffer=nl.sbuf)
            for h in nl.affine_range(chunk // half):
                hs = slice(h * half, (h + 1) * half)
                e = nisa.activation(op=nl.exp, data=xt[:, hs], bias=zero, scale=-1.0)
                d = nisa.tensor_scalar(data=e, op0=nl.add, operand0=1.0,
                                       engine=nisa.unknown_engine)
                res[:, hs] = nl.multiply(xt[:, hs], nisa.reciprocal(d))
            nl.store(out[:, t, cs], value=res)
    return out


def _identity():
    ident = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    ident[...] = nl.load(nl.shared_constant(np.identity(128, dtype=np.float32)))
    return ident


def bmm(a, b):
    """out[i, t, p, :] = (a[i] @ b[i])[128 t + p, :]: a [B, M, K], b [B, K, N], K <= 128."""
    nb, rows, k = a.shape
    cols = b.shape[2]
    out = nl.ndarray((nb, rows // 128, 128, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    ident = _identity()
    chunk = min(cols, 1024)
    slab = min(rows, 1024)
    for i in nl.affine_range(nb):
        for c in nl.affine_range(cols // chunk):
            bt = nl.ndarray((k, chunk), dtype=b.dtype, buffer=nl.sbuf)
            bt[...] = nl.load(b[i, :, c * chunk:(c + 1) * chunk])
            for s in nl.affine_range(rows // slab):
                a_t = nl.ndarray((k, slab), dtype=nl.float32, buffer=nl.sbuf)
                for j in nl.affine_range(slab // 128):
                    r0 = s * slab + j * 128
                    at = nl.ndarray((128, k), dtype=a.dtype, buffer=nl.sbuf)
                    at[...] = nl.load(a[i, r0:r0 + 128, :])
                    a_t[:, j * 128:(j + 1) * 128] = nl.copy(
                        nisa.nc_matmul(at, ident, is_transpose=True))
                for j in nl.affine_range(slab // 128):
                    res = nl.ndarray((128, chunk), dtype=nl.float32, buffer=nl.sbuf)
                    for h in nl.affine_range(chunk // 512):
                        res[:, h * 512:(h + 1) * 512] = nl.copy(nisa.nc_matmul(
                            a_t[:, j * 128:(j + 1) * 128], bt[:, h * 512:(h + 1) * 512]))
                    nl.store(out[i, s * (slab // 128) + j, :, c * chunk:(c + 1) * chunk],
                             value=res)
    return out


def matmul(a, b):
    """out[t, p, :] = (A @ B)[128 t + p, :] with A[128 t + p, 128 k + q] = a[t, p, k, q]
    and B[128 k + q, :] = b[k, q, :]."""
    mt, _, kt, _ = a.shape
    cols = b.shape[2]
    out = nl.ndarray((mt, 128, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    ident = _identity()
    group = 8
    for n in nl.affine_range(cols // 1024):
        ns = slice(n * 1024, (n + 1) * 1024)
        bt = nl.ndarray((kt, nl.par_dim(128), 1024), dtype=b.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(kt):
            bt[k] = nl.load(b[k, :, ns])
        for t in nl.affine_range(mt):
            a_t = nl.ndarray((kt, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.sbuf)
            for g in nl.affine_range(kt // group):
                at = nl.ndarray((128, group, 128), dtype=a.dtype, buffer=nl.sbuf)
                at[...] = nl.load(a[t, :, g * group:(g + 1) * group, :])
                for q in nl.affine_range(group):
                    a_t[g * group + q] = nl.copy(nisa.nc_matmul(at[:, q, :], ident,
                                                                is_transpose=True))
            res = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
            for h in nl.affine_range(2):
                acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum,
                               lazy_initialization=True)
                for k in nl.affine_range(kt):
                    acc += nisa.nc_matmul(a_t[k], bt[k, :, h * 512:(h + 1) * 512])
                res[:, h * 512:(h + 1) * 512] = nl.copy(acc)
            nl.store(out[t, :, ns], value=res)
    return out


def add_rmsnorm_matmul(x, w, eps, z, g):
    """rmsnorm(x + z) * g @ w, rmsnorm(a) = a / sqrt(mean(a^2) + eps) per row."""
    rows, k = x.shape
    cols = w.shape[1]
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    gt = nl.load(g.reshape((1, k)))
    for r in nl.affine_range(rows // 128):
        rs = slice(r * 128, (r + 1) * 128)
        s = nl.add(nl.load(x[rs, :]), nl.load(z[rs, :]))
        ms = nl.sum(nl.square(s), axis=[1]) / k
        normed = nl.multiply(s, nl.rsqrt(nl.add(ms, eps)))
        normed[...] = nl.multiply(normed, gt.broadcast_to((128, k)))
        for n in nl.affine_range(cols // 512):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for kk in nl.affine_range(k // 128):
                wt = nl.load(w[kk * 128:(kk + 1) * 128, n * 512:(n + 1) * 512])
                acc += nl.matmul(normed[:, kk * 128:(kk + 1) * 128], wt)
            nl.store(out[rs, n * 512:(n + 1) * 512], value=nl.copy(acc, dtype=out.dtype))
    return out


def mamba(delta, u, a, b, c):
    """out[ch, t] = sum_s c[s, t] h_s[ch, t], h_s[ch, t] = exp(delta a[ch, s]) h_s[ch, t-1]
    + delta u b[s, t] (delta, u at [ch, t])."""
    channels, seq = delta.shape
    states = a.shape[1]
    out = nl.ndarray((channels, seq), dtype=delta.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((channels // 128, nl.par_dim(128), seq), dtype=delta.dtype)
    for s in nl.affine_range(states):
        for t in nl.affine_range(channels // 128):
            cs = slice(t * 128, (t + 1) * 128)
            dt = nl.load(delta[cs, :])
            decay = nisa.activation(op=nl.exp, data=dt, scale=nl.load(a[cs, s]))
            ut = nl.load(u[cs, :])
            bt = nl.load(b[s:s + 1, :])
            drive = nisa.tensor_tensor(nisa.tensor_tensor(dt, ut, op=nl.multiply),
                                       bt.broadcast_to((128, seq)), op=nl.multiply)
            h = nisa.tensor_tensor_scan(decay, drive, initial=0, op0=np.multiply,
                                        op1=np.add)
            ct = nl.load(c[s:s + 1, :])
            acc[t, :, :] += nisa.tensor_tensor(h, ct.broadcast_to((128, seq)),
                                               op=nl.multiply)
    for t in nl.affine_range(channels // 128):
        nl.store(out[t * 128:(t + 1) * 128, :], acc[t, :, :])
    return out


def transpose_matmul(lhs, rhs):
    """out[t, p, :] = (L^T @ R)[128 t + p, :] where L[(q, k), :] = lhs[q, k, :] and
    R[(q, k), :] = rhs[q, k, :]: the contraction runs over the first two axes."""
    parts, kt, rows = lhs.shape
    cols = rhs.shape[2]
    out = nl.ndarray((rows // 128, 128, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    chunk = 1024
    for m in nl.affine_range(rows // chunk):
        lt = nl.ndarray((kt, nl.par_dim(parts), chunk), dtype=lhs.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(kt):
            lt[k] = nl.load(lhs[:, k, m * chunk:(m + 1) * chunk])
        for n in nl.affine_range((cols + chunk - 1) // chunk):
            n0 = n * chunk
            width = min(chunk, cols - n0)
            rt = nl.ndarray((kt, nl.par_dim(parts), width), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(kt):
                rt[k] = nl.load(rhs[:, k, n0:n0 + width])
            for j in nl.affine_range(chunk // 128):
                res = nl.ndarray((128, width), dtype=nl.float32, buffer=nl.sbuf)
                for h in nl.affine_range((width + 511) // 512):
                    w0 = h * 512
                    hw = min(512, width - w0)
                    acc = nl.zeros((128, hw), dtype=nl.float32, buffer=nl.psum,
                                   lazy_initialization=True)
                    for k in nl.affine_range(kt):
                        acc += nisa.nc_matmul(lt[k, :, j * 128:(j + 1) * 128],
                                              rt[k, :, w0:w0 + hw])
                    res[:, w0:w0 + hw] = nl.copy(acc)
                nl.store(out[m * (chunk // 128) + j, :, n0:n0 + width], value=res)
    return out
