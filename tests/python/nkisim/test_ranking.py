"""Ranking like hardware: DMA triggers of independent iterations are reordered like compute
(a store waiting for compute does not hold back the next block's loads), trn1 DMA sustains
the rate the published matmul tutorial latencies show (~104 GB/s per core, nearly the same
for 256 B and 4 KiB rows), and the fully blocked matmul step is as far ahead of the
free-dimension blocked one as on trn1."""
import unittest

import numpy as np

from . import _util  # noqa: F401
from . import ladder
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl


NT = 32  # tiles per block: more pending stores than there are DMA queues


@nki.jit
def blocks_store_at_end(x):
    """Independent blocks; each loads one wide tile, runs a VectorE chain on each of its NT
    slices, finishes with one pass over the whole block, then stores it in NT pieces, all
    ready only at the end of the block. A block's load depends on nothing earlier."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    F = x.shape[1] // NT
    for b in nl.affine_range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[b * 128:(b + 1) * 128, :])
        y = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        for i in nl.affine_range(NT):
            s = slice(i * F, (i + 1) * F)
            nisa.tensor_scalar(dst=y[:, s], data=t[:, s], op0=nl.multiply, operand0=2.0)
            for _ in range(11):
                nisa.tensor_scalar(dst=y[:, s], data=y[:, s], op0=nl.add, operand0=1.0)
        nisa.tensor_scalar(dst=y, data=y, op0=nl.add, operand0=1.0)
        for i in nl.affine_range(NT):
            nisa.dma_copy(dst=out[b * 128:(b + 1) * 128, i * F:(i + 1) * F],
                          src=y[:, i * F:(i + 1) * F])
    return out


@nki.jit
def stream_copy(x):
    """HBM -> SBUF -> HBM in [128, F] tiles, every tile in its own buffer."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out


class DmaReorderTest(unittest.TestCase):
    def test_pending_stores_do_not_block_next_blocks_loads(self):
        x = np.ones((2 * 128, NT * 512), dtype=np.float32)
        one = nkisim.simulate(blocks_store_at_end, {"x": x[:128]}, target="trn1")
        two = nkisim.simulate(blocks_store_at_end, {"x": x}, target="trn1")
        np.testing.assert_array_equal(two.outputs[0], np.full_like(x, 14.0))
        # the second block's load runs under the first block's VectorE work (its DMA
        # queue is not held by the first block's stores, which wait for that work), so
        # the second block adds about its VectorE time, not its load as well
        load = one.latency_us - one.metrics["vector_engine_active_time"] * 1e6
        vec = two.metrics["vector_engine_active_time"] * 1e6 / 2
        self.assertGreater(load, 20.0)
        self.assertLess(two.latency_us - one.latency_us, vec + 0.25 * load)


class Trn1DmaRateTest(unittest.TestCase):
    """trn1 DMA rates measured in public: the matmul tutorial's DMA-bound steps (rows of
    256 B and 1 KiB) come to 103-105 GB/s; longer rows stream faster (the Mamba tutorial's
    v1 at least 115 GB/s with 2 KiB rows, NKIBench silu about 176 GB/s with 4 KiB rows,
    adamw about 224 with 8 KiB, bmm about 250 with 16 KiB)."""

    def rate(self, tiles, cols, target="trn1"):
        # [128, cols] bf16 tiles, 2 * cols bytes per partition row, loaded and stored
        spec = {"x": nkisim.TensorSpec((128 * tiles, cols), "bfloat16")}
        r = nkisim.simulate(stream_copy, spec, target=target, numerics=False)
        return 2 * 128 * tiles * cols * 2 / (r.latency_us * 1e3)  # bytes/ns = GB/s

    def test_1kib_rows_stream_at_the_published_ladder_rate(self):
        # the tutorial's memory-bound steps load [128, 512] bf16 tiles (1 KiB rows)
        self.assertGreater(self.rate(256, 512), 90.0)
        self.assertLess(self.rate(256, 512), 115.0)

    def test_long_rows_stream_at_the_published_long_row_rates(self):
        r256, r4k, r16k = self.rate(256, 128), self.rate(64, 2048), self.rate(16, 8192)
        self.assertGreater(r256, 65.0)
        self.assertLess(r256, 110.0)
        self.assertGreater(r4k, 0.8 * 176.0)
        self.assertLess(r4k, 1.2 * 176.0)
        self.assertGreater(r16k, 0.8 * 250.0)
        self.assertLess(r16k, 1.2 * 250.0)
        # trn2's bandwidth guide curve (rows under 2 KiB overhead-bound) is kept
        self.assertLess(self.rate(256, 128, "trn2"), 0.45 * self.rate(64, 2048, "trn2"))


class LadderLastStepTest(unittest.TestCase):
    def test_blocking_steps_match_the_published_trn1_latencies(self):
        # the tutorial's benchmark shape; trn1.32xlarge measured 22.07 ms (free dimensions
        # blocked, memory-bound) and 6.97 ms (all dimensions blocked): 3.17x
        K, M, N = 8192, 4096, 8192
        specs = {"lhsT": nkisim.TensorSpec((K, M), "bfloat16"),
                 "rhs": nkisim.TensorSpec((K, N), "bfloat16")}
        s3 = nkisim.simulate(ladder.step3_blocked_free, specs, target="trn1", numerics=False)
        s4 = nkisim.simulate(ladder.step4_blocked_all, specs, target="trn1", numerics=False)
        self.assertLess(abs(s3.latency_us / 22070.0 - 1.0), 0.15)
        self.assertLess(abs(s4.latency_us / 6970.0 - 1.0), 0.15)
        # published 3.17x; within a fifth of it
        self.assertGreater(s3.latency_us, 2.6 * s4.latency_us)
        self.assertLess(s3.latency_us, 3.8 * s4.latency_us)


def _mamba_like(reload_per_state):
    """The Mamba tutorial's v1 (state loop outside the channel loop: delta/u loaded for every
    state) and v2 (channel loop outside: delta/u loaded once per channel tile)."""
    @nki.jit
    def kernel(delta, u, A, B, C):
        channels, seq = delta.shape
        nstate = A.shape[1]
        out = nl.ndarray((channels, seq), dtype=delta.dtype, buffer=nl.shared_hbm)
        nct = channels // 128

        def state_step(acc, d, uu, c, st):
            a = nl.load(A[c * 128:(c + 1) * 128, st:st + 1])
            da = nisa.activation(op=nl.exp, data=d, scale=a)
            b = nl.load(B[st:st + 1, :]).broadcast_to((128, seq))
            du = nisa.tensor_tensor(d, uu, op=nl.multiply)
            dbu = nisa.tensor_tensor(du, b, op=nl.multiply)
            scan = nisa.tensor_tensor_scan(da, dbu, initial=0, op0=np.multiply, op1=np.add)
            cc = nl.load(C[st:st + 1, :]).broadcast_to((128, seq))
            acc[...] = nisa.tensor_tensor(acc, nisa.tensor_tensor(scan, cc, op=nl.multiply),
                                          op=nl.add)

        if reload_per_state:
            accs = [nl.zeros((128, seq), dtype=delta.dtype) for _ in range(nct)]
            for st in nl.affine_range(nstate):
                for c in nl.affine_range(nct):
                    d = nl.load(delta[c * 128:(c + 1) * 128, :])
                    uu = nl.load(u[c * 128:(c + 1) * 128, :])
                    state_step(accs[c], d, uu, c, st)
            for c in nl.affine_range(nct):
                nl.store(out[c * 128:(c + 1) * 128, :], value=accs[c])
        else:
            for c in nl.affine_range(nct):
                acc = nl.zeros((128, seq), dtype=delta.dtype)
                d = nl.load(delta[c * 128:(c + 1) * 128, :])
                uu = nl.load(u[c * 128:(c + 1) * 128, :])
                for st in nl.affine_range(nstate):
                    state_step(acc, d, uu, c, st)
                nl.store(out[c * 128:(c + 1) * 128, :], value=acc)
        return out
    return kernel


mamba_reload, mamba_hoisted = _mamba_like(True), _mamba_like(False)


@nki.jit
def times_broadcast_row(x, row):
    """x * row on VectorE, the row broadcast across partitions first."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    b = nl.load(row).broadcast_to(x.shape)
    nl.store(out, value=nisa.tensor_tensor(t, b, op=nl.multiply))
    return out


@nki.jit
def times_tile(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    b = nl.load(y)
    nl.store(out, value=nisa.tensor_tensor(t, b, op=nl.multiply))
    return out


@nki.jit
def times_broadcast_row_gpsimd(x, row):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    b = nl.load(row).broadcast_to(x.shape)
    nl.store(out, value=nisa.tensor_tensor(t, b, op=nl.multiply, engine=nisa.gpsimd_engine))
    return out


class PartitionBroadcastTest(unittest.TestCase):
    def test_broadcast_runs_on_tensor_engine_and_is_read_at_psum_cost(self):
        x = np.arange(128 * 512, dtype=np.float32).reshape(128, 512) / 1000.0
        row = np.linspace(-1.0, 1.0, 512, dtype=np.float32).reshape(1, 512)
        r = nkisim.simulate(times_broadcast_row, {"x": x, "row": row}, target="trn1")
        np.testing.assert_allclose(r.outputs[0], x * row, rtol=1e-6)
        full = nkisim.simulate(times_tile, {"x": x, "y": np.repeat(row, 128, 0)},
                               target="trn1")
        vec = r.metrics["vector_engine_active_time"]
        # tensor_tensor with one TensorE-written (PSUM) input: N instead of 2N cycles
        self.assertLess(vec, 0.6 * full.metrics["vector_engine_active_time"])
        self.assertEqual(r.metrics["gpsimd_engine_active_time"], 0.0)
        self.assertGreater(r.metrics["tensor_engine_active_time"], 0.0)

    def test_gpsimd_consumer_pays_a_gpsimd_broadcast(self):
        # GpSimdE cannot read PSUM, so for it the broadcast is made on GpSimdE in SBUF
        x = np.ones((128, 512), dtype=np.float32)
        row = np.full((1, 512), 2.0, dtype=np.float32)
        r = nkisim.simulate(times_broadcast_row_gpsimd, {"x": x, "row": row}, target="trn1")
        np.testing.assert_array_equal(r.outputs[0], x * 2.0)
        gps = r.metrics["gpsimd_engine_active_time"] * 1.4e9  # cycles
        # 150 + 3N for the tensor_tensor (three streams) plus 150 + N for the broadcast
        self.assertAlmostEqual(gps, 150 + 3 * 512 + 150 + 512, delta=2)

    def test_wide_broadcast_stays_on_gpsimd_and_can_be_stored(self):
        x = np.ones((128, 4096), dtype=np.float32)
        row = np.full((1, 4096), 3.0, dtype=np.float32)
        r = nkisim.simulate(times_broadcast_row, {"x": x, "row": row}, target="trn1")
        np.testing.assert_array_equal(r.outputs[0], x * 3.0)
        self.assertGreater(r.metrics["gpsimd_engine_active_time"], 0.0)


class MambaReloadTest(unittest.TestCase):
    def test_reloading_delta_and_u_per_state_is_slower_on_trn1(self):
        # the tutorial: v1 2.34 ms -> v2 1.61 ms at channels 4096, seq 512 (1.45x); here
        # channels 1024 (same per-tile work, a quarter of the tiles). The model gives 1.14x
        # (trn1's long-row DMA rate as refitted on the training anchors; the B and C rows,
        # the same for every channel tile, are loaded once per state)
        c, n, s = 1024, 16, 512
        spec = {"delta": nkisim.TensorSpec((c, s), "float32"),
                "u": nkisim.TensorSpec((c, s), "float32"),
                "A": nkisim.TensorSpec((c, n), "float32"),
                "B": nkisim.TensorSpec((n, s), "float32"),
                "C": nkisim.TensorSpec((n, s), "float32")}
        v1 = nkisim.simulate(mamba_reload, spec, target="trn1", numerics=False)
        v2 = nkisim.simulate(mamba_hoisted, spec, target="trn1", numerics=False)
        self.assertGreater(v1.latency_us, 1.1 * v2.latency_us)
        self.assertEqual(v2.bottleneck, "compute-bound")

    def test_both_orders_compute_the_same(self):
        rng = np.random.default_rng(3)
        c, n, s = 256, 2, 64
        ins = {"delta": rng.uniform(0.0, 0.1, (c, s)).astype(np.float32),
               "u": rng.standard_normal((c, s)).astype(np.float32),
               "A": -rng.uniform(0.5, 1.0, (c, n)).astype(np.float32),
               "B": rng.standard_normal((n, s)).astype(np.float32),
               "C": rng.standard_normal((n, s)).astype(np.float32)}
        a = nkisim.simulate(mamba_reload, ins).outputs[0]
        b = nkisim.simulate(mamba_hoisted, ins).outputs[0]
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


if __name__ == "__main__":
    unittest.main()
