"""Depthwise conv1d kernels written for calibration from the steps the conv1d ladder
describes (calibration/anchors.json, source "conv1d-ladder"): img [N, C, 1, W], filter
[C, 1, 1, K], out [N, C, 1, W], padding 1 on both sides of W, cross-correlation, fp32.

step0: the whole padded image and the whole output kept in SBUF as block-dimension tensors
(one block per image and 128-channel tile); per output column one [128, K] multiply with the
filter and one reduce into the output column; then the output stored block by block.
step3: loops fused with per-iteration buffers: for each image and channel tile, load the
padded row, compute every output column, store.
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


def reference(img, filt):
    """numpy depthwise conv1d, padding 1 on both sides of W."""
    N, C, _, W = img.shape
    K = filt.shape[3]
    p = np.pad(img[:, :, 0, :], ((0, 0), (0, 0), (1, K - 2)))
    out = np.zeros((N, C, 1, W), dtype=np.float32)
    for k in range(K):
        out[:, :, 0, :] += p[:, :, k:k + W] * filt[None, :, 0, 0, k, None]
    return out
