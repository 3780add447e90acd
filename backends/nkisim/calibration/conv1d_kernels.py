"""Depthwise conv1d kernels written for calibration from the steps the conv1d ladder
describes (calibration/anchors.json, source "conv1d-ladder"): img [N, C, 1, W], filter
[C, 1, 1, K], out [N, C, 1, W], padding 1 on both sides of W, cross-correlation, fp32.

step0: the whole padded image and the whole output kept in SBUF as block-dimension tensors
(one block per image and 128-channel tile); per output column one [128, K] multiply with the
filter and one reduce into the output column; then the output stored block by block.
step3: loops fused with per-iteration buffers: for each image and channel tile, load the
padded row, compute every output column, store.
step4: as step3, but each reduce writes its output column into a PSUM tile of 512 columns
(one bank), copied to SBUF once per tile.
step5: as step4 with the loops interchanged (channel tile outside, image inside) and the
filter loaded once per channel tile and kept in PSUM.
step6: as step5 with the output-column loop split into blocks of 64 columns (a "tile hint":
an inner affine loop of 64 iterations).
"""
import numpy as np

import nki.isa as nisa
import nki.language as nl


def conv1d_step0(img, filt, out):
    N, C, _, W = img.shape
    K = filt.shape[3]
    CT = C // 128
    ip = nl.arange(128)[:, None]
    iw = nl.arange(W)[None, :]
    ik = nl.arange(K)[None, :]
    padded = nl.zeros((N, CT, nl.par_dim(128), W + K - 1), dtype=img.dtype, buffer=nl.sbuf)
    for n in nl.affine_range(N):
        for c in nl.affine_range(CT):
            padded[n, c, ip, iw + 1] = nl.load(img[n, c * 128 + ip, 0, iw])
    weights = nl.ndarray((CT, nl.par_dim(128), K), dtype=img.dtype, buffer=nl.sbuf)
    for c in nl.affine_range(CT):
        weights[c, ip, ik] = nl.load(filt[c * 128 + ip, 0, 0, ik])
    res = nl.ndarray((N, CT, nl.par_dim(128), W), dtype=img.dtype, buffer=nl.sbuf)
    for n in nl.affine_range(N):
        for c in nl.affine_range(CT):
            for x in nl.affine_range(W):
                prod = nisa.tensor_tensor(padded[n, c, ip, ik + x], weights[c, ip, ik],
                                          np.multiply)
                res[n, c, ip, x] = nisa.tensor_reduce(np.add, prod, axis=[1])
    for n in nl.affine_range(N):
        for c in nl.affine_range(CT):
            nl.store(out[n, c * 128 + ip, 0, iw], res[n, c, ip, iw])


def conv1d_step3(img, filt, out):
    N, C, _, W = img.shape
    K = filt.shape[3]
    CT = C // 128
    ip = nl.arange(128)[:, None]
    iw = nl.arange(W)[None, :]
    ik = nl.arange(K)[None, :]
    for n in nl.affine_range(N):
        for c in nl.affine_range(CT):
            row = nl.zeros((nl.par_dim(128), W + K - 1), dtype=img.dtype, buffer=nl.sbuf)
            row[ip, iw + 1] = nl.load(img[n, c * 128 + ip, 0, iw])
            w = nl.load(filt[c * 128 + ip, 0, 0, ik])
            res = nl.ndarray((nl.par_dim(128), W), dtype=img.dtype, buffer=nl.sbuf)
            for x in nl.affine_range(W):
                prod = nisa.tensor_tensor(row[ip, ik + x], w, np.multiply)
                res[ip, x] = nisa.tensor_reduce(np.add, prod, axis=[1])
            nl.store(out[n, c * 128 + ip, 0, iw], res)


def _conv_psum(img, filt, out, block):
    """Steps 4-6: PSUM output tiles; filter in PSUM and loops interchanged when block > 0;
    the column loop split into blocks of `block` columns when block > 0 and < 512."""
    N, C, _, W = img.shape
    K = filt.shape[3]
    CT = C // 128
    T = 512 if W >= 512 else W
    ip = nl.arange(128)[:, None]
    iw = nl.arange(W)[None, :]
    ik = nl.arange(K)[None, :]
    it = nl.arange(T)[None, :]

    def tile(n, c, row, w):
        res = nl.ndarray((nl.par_dim(128), W), dtype=img.dtype, buffer=nl.sbuf)
        for b in nl.affine_range(W // T):
            acc = nl.ndarray((nl.par_dim(128), T), dtype=nl.float32, buffer=nl.psum)
            if block:
                for xb in nl.affine_range(T // block):
                    for xi in nl.affine_range(block):
                        x = xb * block + xi
                        prod = nisa.tensor_tensor(row[ip, ik + b * T + x], w, np.multiply)
                        acc[ip, x] = nisa.tensor_reduce(np.add, prod, axis=[1])
            else:
                for x in nl.affine_range(T):
                    prod = nisa.tensor_tensor(row[ip, ik + b * T + x], w, np.multiply)
                    acc[ip, x] = nisa.tensor_reduce(np.add, prod, axis=[1])
            res[ip, b * T + it] = nisa.tensor_copy(acc)
        nl.store(out[n, c * 128 + ip, 0, iw], res)

    def row_of(n, c):
        row = nl.zeros((nl.par_dim(128), W + K - 1), dtype=img.dtype, buffer=nl.sbuf)
        row[ip, iw + 1] = nl.load(img[n, c * 128 + ip, 0, iw])
        return row

    if block is None:
        for n in nl.affine_range(N):
            for c in nl.affine_range(CT):
                tile(n, c, row_of(n, c), nl.load(filt[c * 128 + ip, 0, 0, ik]))
        return
    for c in nl.affine_range(CT):
        w_sb = nl.load(filt[c * 128 + ip, 0, 0, ik])
        w = nl.ndarray((nl.par_dim(128), K), dtype=nl.float32, buffer=nl.psum)
        w[ip, ik] = nisa.tensor_copy(w_sb)
        for n in nl.affine_range(N):
            tile(n, c, row_of(n, c), w)


def conv1d_step4(img, filt, out):
    _conv_psum(img, filt, out, None)


def conv1d_step5(img, filt, out):
    _conv_psum(img, filt, out, 0)


def conv1d_step6(img, filt, out):
    _conv_psum(img, filt, out, 64)


def reference(img, filt):
    """numpy depthwise conv1d, padding 1 on both sides of W."""
    N, C, _, W = img.shape
    K = filt.shape[3]
    p = np.pad(img[:, :, 0, :], ((0, 0), (0, 0), (1, K - 2)))
    out = np.zeros((N, C, 1, W), dtype=np.float32)
    for k in range(K):
        out[:, :, 0, :] += p[:, :, k:k + W] * filt[None, :, 0, 0, k, None]
    return out
