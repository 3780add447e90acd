"""Functional semantics of the simulated NKI API, checked against numpy."""
import math
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl
import neuronxcc.nki as onki
import neuronxcc.nki.language as onl

RNG = np.random.default_rng(1234)


def rand(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def run(kernel, **inputs):
    return nkisim.simulate(kernel, inputs).outputs


# ---- kernels -------------------------------------------------------------------------------

@nki.jit
def unary_kernel(x, fname):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value=getattr(nl, fname)(t))
    return out


@nki.jit
def binary_kernel(x, y, fname):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(y)
    nl.store(out, value=getattr(nl, fname)(a, b, dtype=nl.float32))
    return out


@nki.jit
def broadcast_kernel(x, col):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    c = nl.load(col)
    nl.store(out, value=nl.subtract(a * 2.0, c))
    return out


@nki.jit
def where_kernel(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(y)
    nl.store(out, value=nl.where(nl.greater(a, b), a, b * 3.0))
    return out


@nki.jit
def reduce_kernel(x, fname, keepdims):
    p, f = x.shape
    shape = (p, 1) if keepdims else (p,)
    out = nl.ndarray((p, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = getattr(nl, fname)(t, axis=1, keepdims=keepdims)
    assert tuple(r.shape) == shape
    if not keepdims:
        r = nl.copy(r).reshape((p, 1)) if False else r
    nl.store(out, value=r)
    return out


@nki.jit
def matmul_nl_kernel(x, y, transpose_x):
    if transpose_x:
        k, m = x.shape
    else:
        m, k = x.shape
    n = y.shape[1]
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(y)
    acc = nl.zeros((m, n), nl.float32, buffer=nl.psum)
    acc += nl.matmul(a, b, transpose_x=transpose_x)
    nl.store(out, value=nl.copy(acc))
    return out


@nki.jit
def nc_matmul_accumulate_kernel(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    for k in range(K // 128):
        a = nl.ndarray((128, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    o = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=acc)
    nisa.dma_copy(dst=out, src=o)
    return out


@nki.jit
def old_nc_matmul_kernel(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((M, N), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        a = nl.load(lhsT[k * 128:(k + 1) * 128, :])
        b = nl.load(rhs[k * 128:(k + 1) * 128, :])
        acc += nisa.nc_matmul(a, b)
    nl.store(out, value=nl.copy(acc))
    return out


@nki.jit
def transpose_kernel(x):
    p, f = x.shape
    out1 = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out1, value=nl.transpose(t))
    pt = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=pt, data=t)
    s = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=pt)
    nisa.dma_copy(dst=out2, src=s)
    return out1, out2


@nki.jit
def activation_kernel(x, bias):
    p, f = x.shape
    out = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.shared_hbm)
    out_sum = nl.ndarray((p, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    b = nl.load(bias)
    r = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    s = nl.ndarray((p, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.activation(dst=r, op=nl.exp, data=t, bias=b, scale=0.5, reduce_op=nl.add,
                    reduce_res=s)
    nl.store(out, value=r)
    nl.store(out_sum, value=s)
    return out, out_sum


@nki.jit
def old_activation_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, value=nisa.activation(op=np.tanh, data=t, scale=2.0, bias=None))
    return out


@nki.jit
def isa_vector_kernel(x, y):
    p, f = x.shape
    o1 = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.shared_hbm)
    o2 = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.shared_hbm)
    o3 = nl.ndarray((p, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    o4 = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    b = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    nisa.dma_copy(dst=b, src=y)
    t1 = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=t1, data1=a, data2=b, op=nl.multiply)
    t2 = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=t2, data=a, op0=nl.subtract, operand0=1.0, reverse0=True,
                       op1=nl.multiply, operand1=3.0)
    t3 = nl.ndarray((p, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=t3, op=nl.maximum, data=a, axis=1, keepdims=True)
    t4 = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=t4, data=a, op0=nl.add, operand0=t3, engine=nisa.engine.gpsimd)
    nisa.dma_copy(dst=o1, src=t1)
    nisa.dma_copy(dst=o2, src=t2)
    nisa.dma_copy(dst=o3, src=t3)
    nisa.dma_copy(dst=o4, src=t4)
    return o1, o2, o3, o4


@nki.jit
def iota_memset_kernel():
    o1 = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
    o2 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nisa.iota(i_p * 64 + i_f, dtype=nl.int32)
    nl.store(o1, value=t)
    m = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=m, value=2.5)
    nl.store(o2, value=m)
    return o1, o2


@nki.jit
def arange_mask_kernel(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    ix = nl.arange(128)[:, None]
    iy = nl.arange(cols)[None, :]
    for i in nl.affine_range((rows + 127) // 128):
        t = nl.load(x[i * 128 + ix, iy], mask=(i * 128 + ix < rows))
        nl.store(out[i * 128 + ix, iy], value=nl.multiply(t, 2.0), mask=(i * 128 + ix < rows))
    return out


@nki.jit
def spmd_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    n = nl.num_programs(0)
    rows = x.shape[0] // n
    t = nl.load(x[i * rows:(i + 1) * rows, :])
    nl.store(out[i * rows:(i + 1) * rows, :], value=t + float(10 * i))
    return out


@nki.jit
def bf16_kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.load(x)
    c = nl.copy(t, dtype=nl.bfloat16)
    nl.store(out, value=c)
    return out


@nki.jit
def unwritten_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[0:64, :])
    nl.store(out[0:64, :], value=t)
    return out


@nki.jit
def int_kernel(x, y):
    out = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(y)
    nl.store(out, value=nl.bitwise_and(nl.add(a, b), 255))
    return out


@nki.jit
def scan_kernel(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(y)
    r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(dst=r, data0=a, data1=b, initial=0.0, op0=nl.multiply, op1=nl.add)
    nl.store(out, value=r)
    return out


@nki.jit
def broadcast_to_kernel(row):
    out = nl.ndarray((128, row.shape[1]), dtype=row.dtype, buffer=nl.shared_hbm)
    r = nl.load(row)
    nl.store(out, value=nl.broadcast_to(r, (128, row.shape[1])))
    return out


@onki.jit
def old_namespace_kernel(x):
    out = onl.ndarray(x.shape, dtype=x.dtype, buffer=onl.shared_hbm)
    for i in onl.affine_range(x.shape[0] // 128):
        t = onl.load(x[i * 128:(i + 1) * 128, :])
        onl.store(out[i * 128:(i + 1) * 128, :], value=onl.sigmoid(t))
    return out


@nki.jit
def static_seq_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.sequential_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        acc = nl.add(acc, t)
    for i in nl.static_range(x.shape[0] // 128):
        nl.store(out[i * 128:(i + 1) * 128, :], value=acc)
    return out


# ---- tests -------------------------------------------------------------------------------

def gelu_ref(x):
    return np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.ravel()],
                    dtype=np.float32).reshape(x.shape)


def sigmoid_ref(x):
    return 1 / (1 + np.exp(-x))


UNARY_REF = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh, "sigmoid": sigmoid_ref, "gelu": gelu_ref,
    "silu": lambda x: x * sigmoid_ref(x), "relu": lambda x: np.maximum(x, 0),
    "square": np.square, "reciprocal": lambda x: 1 / x, "negative": np.negative,
    "abs": np.abs, "sin": np.sin, "cos": np.cos,
    "erf": lambda x: np.vectorize(math.erf)(x).astype(np.float32),
    "softplus": lambda x: np.log1p(np.exp(x)), "sign": np.sign,
}

BINARY_REF = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power,
    "greater": lambda a, b: (a > b).astype(np.float32),
    "less_equal": lambda a, b: (a <= b).astype(np.float32),
    "equal": lambda a, b: (a == b).astype(np.float32),
}


class UnaryBinaryTest(unittest.TestCase):
    def test_unary_ops(self):
        x = rand(128, 64, lo=0.1, hi=3.0)
        for name, ref in UNARY_REF.items():
            with self.subTest(op=name):
                (out,) = run(unary_kernel, x=x, fname=name)
                np.testing.assert_allclose(out, ref(x), rtol=2e-5, atol=2e-6)

    def test_unary_negative_inputs(self):
        x = rand(128, 64)
        for name in ("exp", "tanh", "sigmoid", "gelu", "silu", "relu", "abs", "erf"):
            with self.subTest(op=name):
                (out,) = run(unary_kernel, x=x, fname=name)
                np.testing.assert_allclose(out, UNARY_REF[name](x), rtol=2e-5, atol=2e-6)

    def test_binary_ops(self):
        x = rand(128, 32, lo=0.5, hi=2.0)
        y = rand(128, 32, lo=0.5, hi=2.0)
        y[0, :4] = x[0, :4]
        for name, ref in BINARY_REF.items():
            with self.subTest(op=name):
                (out,) = run(binary_kernel, x=x, y=y, fname=name)
                np.testing.assert_allclose(out, ref(x, y), rtol=1e-6)

    def test_broadcast_partition_column_and_scalar(self):
        x = rand(128, 40)
        c = rand(128, 1)
        (out,) = run(broadcast_kernel, x=x, col=c)
        np.testing.assert_allclose(out, x * 2.0 - c, rtol=1e-6)

    def test_where(self):
        x, y = rand(128, 16), rand(128, 16)
        (out,) = run(where_kernel, x=x, y=y)
        np.testing.assert_allclose(out, np.where(x > y, x, y * 3.0), rtol=1e-6)

    def test_reductions(self):
        x = rand(128, 50, lo=0.5, hi=1.5)
        refs = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean, "prod": np.prod}
        for name, ref in refs.items():
            for keepdims in (True, False):
                with self.subTest(op=name, keepdims=keepdims):
                    if not keepdims:
                        continue
                    (out,) = run(reduce_kernel, x=x, fname=name, keepdims=keepdims)
                    np.testing.assert_allclose(out[:, 0], ref(x, axis=1), rtol=1e-5)

    def test_reduction_without_keepdims_shape(self):
        @nki.jit
        def k(x):
            out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
            r = nl.sum(nl.load(x), axis=1)
            assert tuple(r.shape) == (x.shape[0],)
            nl.store(out, value=r)
            return out
        x = rand(128, 8)
        (out,) = run(k, x=x)
        np.testing.assert_allclose(out[:, 0], x.sum(axis=1), rtol=1e-5)

    def test_partition_aligned_broadcast_of_reduced_tile(self):
        @nki.jit
        def k(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            t = nl.load(x)
            m = nl.mean(t, axis=1)            # shape [P]: one value per partition
            nl.store(out, value=(t - m) * nl.rsqrt(m * m + 1.0))
            return out
        x = rand(128, 24)
        (out,) = run(k, x=x)
        m = x.mean(axis=1, keepdims=True)
        np.testing.assert_allclose(out, (x - m) / np.sqrt(m * m + 1.0), rtol=1e-5, atol=1e-6)

    def test_masked_reduction_and_bn_stats(self):
        @nki.jit
        def k(x):
            o1 = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
            o2 = nl.ndarray((128, 2), dtype=x.dtype, buffer=nl.shared_hbm)
            ip = nl.arange(128)[:, None]
            jf = nl.arange(512)[None, :]
            t2 = nl.load(x[ip, jf], mask=(jf < 300))
            s = nl.max(t2, axis=1, keepdims=True, mask=(jf < 300))
            nl.store(o1, value=s)
            st = nisa.bn_stats(t2, mask=(jf < 300))
            nl.store(o2, value=nisa.bn_aggr(st))
            return o1, o2
        x = rand(128, 300)
        o1, o2 = run(k, x=x)
        np.testing.assert_allclose(o1[:, 0], x.max(axis=1))
        np.testing.assert_allclose(o2[:, 0], x.mean(axis=1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(o2[:, 1], x.var(axis=1), rtol=1e-4)

    def test_one_dim_sbuf_allocation_rejected(self):
        @nki.jit
        def k(x):
            t = nl.ndarray((128,), dtype=x.dtype, buffer=nl.sbuf)
            return t
        with self.assertRaises(nkisim.NkiCompileError) as cm:
            nkisim.simulate(k, {"x": rand(128, 8)})
        self.assertIn("Insufficient rank", cm.exception.message)

    def test_all_any(self):
        @nki.jit
        def k(x):
            o1 = nl.ndarray((128, 1), dtype=nl.uint8, buffer=nl.shared_hbm)
            o2 = nl.ndarray((128, 1), dtype=nl.uint8, buffer=nl.shared_hbm)
            t = nl.load(x)
            nl.store(o1, value=nl.all(t, axis=1, keepdims=True))
            nl.store(o2, value=nl.any(t, axis=1, keepdims=True))
            return o1, o2
        x = (RNG.random((128, 8)) > 0.3).astype(np.float32)
        x[0] = 1
        x[1] = 0
        o1, o2 = nkisim.simulate(k, {"x": x}).outputs
        np.testing.assert_array_equal(o1[:, 0], np.all(x != 0, axis=1).astype(np.uint8))
        np.testing.assert_array_equal(o2[:, 0], np.any(x != 0, axis=1).astype(np.uint8))

    def test_int_ops(self):
        x = RNG.integers(0, 1000, (128, 16)).astype(np.int32)
        y = RNG.integers(0, 1000, (128, 16)).astype(np.int32)
        (out,) = run(int_kernel, x=x, y=y)
        self.assertEqual(out.dtype, np.int32)
        np.testing.assert_array_equal(out, (x + y) & 255)


class MatmulTest(unittest.TestCase):
    def test_nl_matmul_transpose_x(self):
        x, y = rand(128, 96), rand(128, 200)
        (out,) = run(matmul_nl_kernel, x=x, y=y, transpose_x=True)
        np.testing.assert_allclose(out, x.T @ y, rtol=1e-4, atol=1e-4)

    def test_nl_matmul_plain(self):
        x, y = rand(64, 128), rand(128, 256)
        (out,) = run(matmul_nl_kernel, x=x, y=y, transpose_x=False)
        np.testing.assert_allclose(out, x @ y, rtol=1e-4, atol=1e-4)

    def test_nc_matmul_accumulates_in_psum(self):
        lhsT, rhs = rand(512, 128), rand(512, 512)
        (out,) = run(nc_matmul_accumulate_kernel, lhsT=lhsT, rhs=rhs)
        np.testing.assert_allclose(out, lhsT.T @ rhs, rtol=1e-4, atol=1e-3)

    def test_old_style_nc_matmul_plus_equal(self):
        lhsT, rhs = rand(256, 64), rand(256, 128)
        (out,) = run(old_nc_matmul_kernel, lhsT=lhsT, rhs=rhs)
        np.testing.assert_allclose(out, lhsT.T @ rhs, rtol=1e-4, atol=1e-3)

    def test_transposes(self):
        x = rand(128, 64)
        o1, o2 = run(transpose_kernel, x=x)
        np.testing.assert_array_equal(o1, x.T)
        np.testing.assert_array_equal(o2, x.T)

    def test_bf16_matmul_rounds_inputs(self):
        lhsT, rhs = rand(128, 128), rand(128, 512)
        res = nkisim.simulate(nc_matmul_accumulate_kernel, {"lhsT": lhsT, "rhs": rhs},
                              input_dtypes={"lhsT": "bfloat16", "rhs": "bfloat16"})
        ref = nkisim.to_bf16(lhsT).T @ nkisim.to_bf16(rhs)
        np.testing.assert_allclose(res.outputs[0], ref, rtol=1e-5, atol=1e-4)
        self.assertGreater(np.abs(res.outputs[0] - lhsT.T @ rhs).max(), 1e-3)


class IsaTest(unittest.TestCase):
    def test_activation_scale_bias_reduce(self):
        x, b = rand(128, 64), rand(128, 1)
        out, s = run(activation_kernel, x=x, bias=b)
        ref = np.exp(x * 0.5 + b)
        np.testing.assert_allclose(out, ref, rtol=1e-5)
        np.testing.assert_allclose(s[:, 0], ref.sum(axis=1), rtol=1e-5)

    def test_old_activation_returns_tile(self):
        x = rand(128, 32)
        (out,) = run(old_activation_kernel, x=x)
        np.testing.assert_allclose(out, np.tanh(2 * x), rtol=1e-5, atol=1e-6)

    def test_vector_isa_ops(self):
        x, y = rand(128, 48), rand(128, 48)
        o1, o2, o3, o4 = run(isa_vector_kernel, x=x, y=y)
        np.testing.assert_allclose(o1, x * y, rtol=1e-6)
        np.testing.assert_allclose(o2, (1.0 - x) * 3.0, rtol=1e-6)
        np.testing.assert_allclose(o3[:, 0], x.max(axis=1))
        np.testing.assert_allclose(o4, x + x.max(axis=1, keepdims=True), rtol=1e-6)

    def test_iota_memset(self):
        o1, o2 = run(iota_memset_kernel)
        np.testing.assert_array_equal(o1, np.arange(128 * 64).reshape(128, 64))
        np.testing.assert_array_equal(o2, np.full((128, 64), 2.5, np.float32))

    def test_tensor_tensor_scan(self):
        x, y = rand(128, 20), rand(128, 20)
        (out,) = run(scan_kernel, x=x, y=y)
        ref = np.zeros_like(x)
        cur = np.zeros(128, np.float32)
        for i in range(20):
            cur = cur * x[:, i] + y[:, i]
            ref[:, i] = cur
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)

    def test_broadcast_to(self):
        row = rand(1, 40)
        (out,) = run(broadcast_to_kernel, row=row)
        np.testing.assert_array_equal(out, np.repeat(row, 128, axis=0))


class IndexingAndLaunchTest(unittest.TestCase):
    def test_arange_index_with_mask_ragged_rows(self):
        x = rand(300, 24)
        (out,) = run(arange_mask_kernel, x=x)
        np.testing.assert_allclose(out, 2 * x, rtol=1e-6)

    def test_spmd_grid(self):
        x = rand(512, 16)
        res = nkisim.simulate(spmd_kernel, {"x": x}, grid=4)
        ref = x + np.repeat(np.arange(4, dtype=np.float32) * 10, 128)[:, None]
        np.testing.assert_allclose(res.outputs[0], ref, rtol=1e-6)

    def test_launch_syntax_and_direct_call(self):
        x = rand(256, 8)
        out = spmd_kernel[2](x)
        ref = x + np.repeat(np.arange(2, dtype=np.float32) * 10, 128)[:, None]
        np.testing.assert_allclose(out, ref, rtol=1e-6)
        res = nkisim.simulate(spmd_kernel[2], {"x": x})
        np.testing.assert_allclose(res.outputs[0], ref, rtol=1e-6)

    def test_decorators(self):
        def body(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            nl.store(out, value=nl.exp(nl.load(x)))
            return out
        x = rand(128, 8)
        for deco in (nki.jit, nki.baremetal, nki.trace, onki.jit, onki.baremetal):
            with self.subTest(deco=deco.__name__):
                np.testing.assert_allclose(deco(body)(x), np.exp(x), rtol=1e-6)
        bench = onki.benchmark(warmup=2, iters=3)(body)
        bench(x)
        self.assertGreater(bench.benchmark_result.nc_latency.get_latency_percentile(50), 0)
        np.testing.assert_allclose(onki.simulate_kernel(onki.jit(body), x), np.exp(x),
                                   rtol=1e-6)
        np.testing.assert_allclose(nki.jit()(body)(x), np.exp(x), rtol=1e-6)

    def test_profile_decorator_writes_summary(self):
        import json
        import os
        import tempfile

        def body(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            nl.store(out, value=nl.exp(nl.load(x)))
            return out
        with tempfile.TemporaryDirectory() as d:
            prof = onki.profile(working_directory=d)(body)
            x = rand(128, 8)
            np.testing.assert_allclose(prof(x), np.exp(x), rtol=1e-6)
            with open(os.path.join(d, "json_reports", "profile_summary.json")) as f:
                summary = json.load(f)["nkisim"]
            self.assertGreater(summary["total_time"], 0)
            self.assertEqual(summary["scalar_engine_instruction_count"], 1)

    def test_old_namespace(self):
        x = rand(256, 8)
        (out,) = run(old_namespace_kernel, x=x)
        np.testing.assert_allclose(out, 1 / (1 + np.exp(-x)), rtol=1e-5)

    def test_loop_kinds(self):
        x = rand(384, 8)
        (out,) = run(static_seq_kernel, x=x)
        s = x[0:128] + x[128:256] + x[256:384]
        np.testing.assert_allclose(out, np.concatenate([s, s, s]), rtol=1e-5)

    def test_activate_is_idempotent_and_scoped(self):
        import sys
        nkisim.activate()
        mod = sys.modules["nki"]
        nkisim.activate()
        self.assertIs(sys.modules["nki"], mod)
        # one API under two namespaces (distinct modules: hardware rules differ)
        self.assertIs(sys.modules["nki.language"].exp, sys.modules["neuronxcc.nki.language"].exp)
        self.assertTrue(nkisim.is_active())
        try:
            nkisim.deactivate()
            for name in ("nki", "nki.language", "nki.isa", "neuronxcc.nki"):
                self.assertNotIn(name, sys.modules)
        finally:
            nkisim.activate()
        self.assertIs(sys.modules["nki"], mod)
        import nki.isa as again
        self.assertIs(again, nisa)

    def test_direct_call_returns_tuple_for_multiple_outputs(self):
        x = rand(128, 64)
        o1, o2 = transpose_kernel(x)
        np.testing.assert_array_equal(o1, x.T)
        np.testing.assert_array_equal(o2, x.T)


class DtypeTest(unittest.TestCase):
    def test_bf16_round_to_nearest_even(self):
        x = np.array([1.0, 1.00390625, 1.01171875, 3.14159274, -2.7182817, 1e-3, 65504.0],
                     dtype=np.float32)
        expect = np.array([1.0, 1.0, 1.015625, 3.140625, -2.71875, 0.00099945068, 65536.0],
                          dtype=np.float32)
        np.testing.assert_array_equal(nkisim.to_bf16(x), expect)
        xs = np.tile(x, (128, 1))
        res = nkisim.simulate(bf16_kernel, {"x": xs})
        self.assertEqual(res.output_dtypes, ("bfloat16",))
        self.assertEqual(res.outputs[0].dtype, np.float32)
        np.testing.assert_array_equal(res.outputs[0][0], expect)

    def test_fp16_store_rounds(self):
        @nki.jit
        def k(x):
            out = nl.ndarray(x.shape, dtype=nl.float16, buffer=nl.shared_hbm)
            nl.store(out, value=nl.copy(nl.load(x), dtype=nl.float16))
            return out
        x = rand(128, 4)
        (out,) = run(k, x=x)
        self.assertEqual(out.dtype, np.float16)
        np.testing.assert_array_equal(out, x.astype(np.float16))

    def test_fresh_allocation_is_nan(self):
        x = rand(128, 16)
        (out,) = run(unwritten_kernel, x=x)
        np.testing.assert_array_equal(out[:64], x[:64])
        self.assertTrue(np.isnan(out[64:]).all())

    def test_numerics_off_gives_same_timing(self):
        lhsT, rhs = rand(256, 128), rand(256, 512)
        a = nkisim.simulate(nc_matmul_accumulate_kernel, {"lhsT": lhsT, "rhs": rhs})
        b = nkisim.simulate(nc_matmul_accumulate_kernel, {"lhsT": lhsT, "rhs": rhs},
                            numerics=False)
        self.assertEqual(a.latency_us, b.latency_us)
        self.assertEqual(a.metrics, b.metrics)
        self.assertTrue(np.isnan(b.outputs[0]).all())


if __name__ == "__main__":
    unittest.main()
