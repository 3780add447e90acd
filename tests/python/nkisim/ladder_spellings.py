"""Own spellings of two public ladder steps, each the same algorithm as the published step
(test_ladder_spellings.py checks they rank like the published step on trn1).

Matmul tutorial, tiled -> hoisted (hardware 51.80 -> 42.96 ms): `tiled_*` load both operand
tiles right before each matmul; `hoisted_*` load the lhsT column panel once per m. Spelled
with declared tiles written by dma_copy (`*_declared`, as ladder.py) and with fresh tiles
(`t = nl.load(...)`, `*_fresh`).

Conv1d blog, step 4 -> 5 (hardware 5.602 -> 4.955 ms): step 4 accumulates each output block
in PSUM; step 5 interchanges the loops (channel tile outside, image inside) and keeps the
filter in PSUM. Step 4 spelled with `tensor_reduce` results assigned into the PSUM tile and
with `nisa.tensor_reduce(dst=...)`; step 5 with outputs in a PSUM block and, as the blog
describes, written straight into an SBUF output tile."""
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

TK, TM, TN = 128, 128, 512


def _store(result, acc, m, n):
    sb = nl.copy(acc, dtype=result.dtype)
    nl.store(result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], value=sb)


@nki.jit
def tiled_fresh(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            acc = nl.zeros((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                a = nl.load(lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
                b = nl.load(rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                acc += nisa.nc_matmul(a, b)
            _store(result, acc, m, n)
    return result


@nki.jit
def hoisted_fresh(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        a = [nl.load(lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM]) for k in range(K // TK)]
        for n in nl.affine_range(N // TN):
            acc = nl.zeros((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                b = nl.load(rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                acc += nisa.nc_matmul(a[k], b)
            _store(result, acc, m, n)
    return result


@nki.jit
def hoisted_declared_panel(lhsT, rhs):
    """lhsT panel in one declared [128, K/128, 128] tensor, filled by dma_copy per k."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    nk = K // TK
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        panel = nl.ndarray((TK, nk, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(nk):
            nisa.dma_copy(dst=panel[:, k, :], src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
        for n in nl.affine_range(N // TN):
            acc = nl.zeros((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(nk):
                b = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b, src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                acc += nisa.nc_matmul(panel[:, k, :], b)
            _store(result, acc, m, n)
    return result


# ---- conv1d, img [N, C, 1, W] fp32, filter [C, 1, 1, K], padding 1 ----------------------
def _row(img, n, c, W, K):
    ip = nl.arange(128)[:, None]
    iw = nl.arange(W)[None, :]
    row = nl.zeros((128, W + K - 1), dtype=img.dtype, buffer=nl.sbuf)
    row[ip, iw + 1] = nl.load(img[n, c * 128 + ip, 0, iw])
    return row


def _block_psum(img, out, n, c, row, w, W, K, dst_form):
    ip = nl.arange(128)[:, None]
    ik = nl.arange(K)[None, :]
    T = 512
    res = nl.ndarray((128, W), dtype=img.dtype, buffer=nl.sbuf)
    for b in nl.affine_range(W // T):
        acc = nl.ndarray((128, T), dtype=nl.float32, buffer=nl.psum)
        for x in nl.affine_range(T):
            prod = nisa.tensor_tensor(row[ip, ik + b * T + x], w, np.multiply)
            if dst_form:
                nisa.tensor_reduce(dst=acc[ip, x], op=np.add, data=prod, axis=[1])
            else:
                acc[ip, x] = nisa.tensor_reduce(np.add, prod, axis=[1])
        res[:, b * T:(b + 1) * T] = nisa.tensor_copy(acc)
    nl.store(out[n, c * 128:(c + 1) * 128, 0, :], res)


def _conv_step4(img, filt, out, dst_form):
    N, C, _, W = img.shape
    K = filt.shape[3]
    ip = nl.arange(128)[:, None]
    ik = nl.arange(K)[None, :]
    for n in nl.affine_range(N):
        for c in nl.affine_range(C // 128):
            w = nl.load(filt[c * 128 + ip, 0, 0, ik])
            _block_psum(img, out, n, c, _row(img, n, c, W, K), w, W, K, dst_form)


def conv_step4_assigned(img, filt, out):
    _conv_step4(img, filt, out, False)


def conv_step4_dst(img, filt, out):
    _conv_step4(img, filt, out, True)


def conv_step5_psum_out(img, filt, out):
    N, C, _, W = img.shape
    K = filt.shape[3]
    ip = nl.arange(128)[:, None]
    ik = nl.arange(K)[None, :]
    for c in nl.affine_range(C // 128):
        w_sb = nl.load(filt[c * 128 + ip, 0, 0, ik])
        w = nl.ndarray((128, K), dtype=nl.float32, buffer=nl.psum)
        w[...] = nisa.tensor_copy(w_sb)
        for n in nl.affine_range(N):
            _block_psum(img, out, n, c, _row(img, n, c, W, K), w, W, K, False)


def conv_step5_sbuf_out(img, filt, out):
    """Filter copied into PSUM once per channel tile; every output column reduced straight
    into the SBUF output tile."""
    N, C, _, W = img.shape
    K = filt.shape[3]
    ip = nl.arange(128)[:, None]
    ik = nl.arange(K)[None, :]
    for c in nl.affine_range(C // 128):
        w_sb = nl.load(filt[c * 128 + ip, 0, 0, ik])
        w = nl.ndarray((128, K), dtype=nl.float32, buffer=nl.psum)
        w[...] = nisa.tensor_copy(w_sb)
        for n in nl.affine_range(N):
            row = _row(img, n, c, W, K)
            res = nl.ndarray((128, W), dtype=img.dtype, buffer=nl.sbuf)
            for x in nl.affine_range(W):
                prod = nisa.tensor_tensor(row[ip, ik + x], w, np.multiply)
                res[ip, x] = nisa.tensor_reduce(np.add, prod, axis=[1])
            nl.store(out[n, c * 128:(c + 1) * 128, 0, :], res)


def conv_reference(img, filt):
    N, C, _, W = img.shape
    K = filt.shape[3]
    pad = np.zeros((N, C, W + K - 1), np.float32)
    pad[:, :, 1:W + 1] = img[:, :, 0, :]
    out = np.zeros((N, C, 1, W), np.float32)
    for k in range(K):
        out[:, :, 0, :] += pad[:, :, k:k + W] * filt[None, :, 0, 0, k:k + 1]
    return out
