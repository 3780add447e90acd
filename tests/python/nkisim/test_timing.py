"""Timing model: each pair computes the same thing; the variant hardware rewards must be
faster in the simulator too. Plus determinism, targets and metric names."""
import unittest

import numpy as np

from . import _util  # noqa: F401
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def sim(kernel, target="trn2", **inputs):
    return nkisim.simulate(kernel, inputs, target=target)


# 1. fewer, larger DMAs --------------------------------------------------------------------
@nki.jit
def copy_row_dmas(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    for r in range(128):
        nisa.dma_copy(dst=t[r:r + 1, :], src=x[r:r + 1, :])
    for r in range(128):
        nisa.dma_copy(dst=out[r:r + 1, :], src=t[r:r + 1, :])
    return out


@nki.jit
def copy_tile_dma(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


# 2. loads hoisted out of a loop -----------------------------------------------------------
@nki.jit
def scale_reload(x, w):
    # reloaded into a declared tile: issued as written (a fresh-tile reload is left to the
    # compiler's duplicate-load elimination, test_load_reuse.py)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        wt = nl.ndarray(w.shape, dtype=w.dtype, buffer=nl.sbuf)
        wt[...] = nl.load(w)
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.multiply(t, wt))
    return out


@nki.jit
def scale_hoisted(x, w):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    wt = nl.load(w)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.multiply(t, wt))
    return out


# 3. full 128x512 matmul tiles -------------------------------------------------------------
def make_matmul(tile_m, tile_n):
    @nki.jit
    def mm(lhsT, rhs):
        K, M = lhsT.shape
        N = rhs.shape[1]
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray((K // 128, nl.par_dim(128), M), dtype=lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((K // 128, nl.par_dim(128), N), dtype=rhs.dtype, buffer=nl.sbuf)
        for k in range(K // 128):
            nisa.dma_copy(dst=a[k], src=lhsT[k * 128:(k + 1) * 128, :])
            nisa.dma_copy(dst=b[k], src=rhs[k * 128:(k + 1) * 128, :])
        for m in range(M // tile_m):
            res = nl.ndarray((tile_m, N), dtype=nl.float32, buffer=nl.sbuf)
            for n in range(N // tile_n):
                acc = nl.ndarray((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
                for k in range(K // 128):
                    nisa.nc_matmul(dst=acc, stationary=a[k][:, m * tile_m:(m + 1) * tile_m],
                                   moving=b[k][:, n * tile_n:(n + 1) * tile_n])
                nisa.tensor_copy(dst=res[:, n * tile_n:(n + 1) * tile_n], src=acc)
            nisa.dma_copy(dst=out[m * tile_m:(m + 1) * tile_m, :], src=res)
        return out
    return mm


matmul_full_tiles = make_matmul(128, 512)
matmul_small_tiles = make_matmul(32, 64)


# 4. work split across engines -------------------------------------------------------------
def make_two_ops(split):
    @nki.jit
    def k(x):
        out1 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        out2 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        r1 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        r2 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        for i in range(16):
            nisa.tensor_scalar(dst=r1, data=t, op0=nl.multiply, operand0=float(i),
                               engine=nisa.vector_engine)
            if split:
                nisa.activation(dst=r2, op=nl.copy, data=t, scale=float(i))
            else:
                nisa.tensor_scalar(dst=r2, data=t, op0=nl.multiply, operand0=float(i),
                                   engine=nisa.vector_engine)
        nisa.dma_copy(dst=out1, src=r1)
        nisa.dma_copy(dst=out2, src=r2)
        return out1, out2
    return k


@nki.jit
def spread_scalar_ops(x):
    out1 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out2 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    r1 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    r2 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    for i in range(16):
        nisa.tensor_scalar(dst=r1, data=t, op0=nl.multiply, operand0=float(i))
        nisa.tensor_scalar(dst=r2, data=t, op0=nl.multiply, operand0=float(i))
    nisa.dma_copy(dst=out1, src=r1)
    nisa.dma_copy(dst=out2, src=r2)
    return out1, out2


two_ops_one_engine = make_two_ops(False)
two_ops_two_engines = make_two_ops(True)


# 5. independent buffers let DMA overlap compute -------------------------------------------
@nki.jit
def single_buffer(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    r = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    for i in range(x.shape[0] // 128):
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        nisa.activation(dst=r, op=nl.exp, data=t)
        nisa.activation(dst=r, op=nl.tanh, data=r)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=r)
    return out


@nki.jit
def fresh_buffers(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        r = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        nisa.activation(dst=r, op=nl.exp, data=t)
        nisa.activation(dst=r, op=nl.tanh, data=r)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=r)
    return out


# 6. fused kernel vs two passes over HBM ---------------------------------------------------
@nki.jit
def two_passes(x):
    tmp = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(tmp[i * 128:(i + 1) * 128, :], value=nl.exp(t))
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(tmp[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.multiply(t, 2.0))
    return out


@nki.jit
def fused_pass(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])  # HOT:load
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.multiply(nl.exp(t), 2.0))
    return out


# 7. cross-iteration scheduling: a fused chain over affine_range vs two HBM passes ----------
def _chain_a(t):
    return nl.add(nl.tanh(nl.multiply(nl.exp(t), 2.0)), 1.0)


def _chain_b(d):
    return nl.add(nl.tanh(nl.multiply(nl.exp(d), d)), 1.0)


def make_fused_chain(loop):
    @nki.jit
    def fused_chain(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in loop(x.shape[0] // 128):
            t = nl.load(x[i * 128:(i + 1) * 128, :])
            nl.store(out[i * 128:(i + 1) * 128, :], value=_chain_b(_chain_a(t)))
        return out
    return fused_chain


fused_chain_affine = make_fused_chain(nl.affine_range)
fused_chain_sequential = make_fused_chain(nl.sequential_range)


@nki.jit
def two_chain_passes(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tmp = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(tmp[i * 128:(i + 1) * 128, :], value=_chain_a(t))
    for i in nl.affine_range(x.shape[0] // 128):
        d = nl.load(tmp[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=_chain_b(d))
    return out


# 8. engine costs: GpSimd element-wise work vs VectorE; the trn1 shared SBUF port ----------
def make_adds(engines, reps=1):
    @nki.jit
    def adds(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        outs = []
        for eng in engines:
            r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            for _ in range(reps):
                nisa.tensor_tensor(dst=r, data1=t, data2=t, op=nl.add, engine=eng)
            o = nl.ndarray((x.shape[0], 64), dtype=x.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=o, src=r[:, 0:64])
            outs.append(o)
        return tuple(outs)
    return adds


add_vector = make_adds([nisa.vector_engine])
add_gpsimd = make_adds([nisa.gpsimd_engine])
many_adds_vector = make_adds([nisa.vector_engine], 8)
many_adds_gpsimd = make_adds([nisa.gpsimd_engine], 8)
many_adds_both = make_adds([nisa.vector_engine, nisa.gpsimd_engine], 8)


# 9. block-dimension tensors cost what their blocks cost -----------------------------------
def make_block_exp(whole):
    @nki.jit
    def block_exp(x):
        nb = x.shape[0] // 128
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((nb, nl.par_dim(128), x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        r = nl.ndarray((nb, nl.par_dim(128), x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        for b in nl.affine_range(nb):
            nisa.dma_copy(dst=t[b], src=x[b * 128:(b + 1) * 128, :])
        if whole:
            nisa.activation(dst=r, op=nl.exp, data=t)
        else:
            for b in nl.affine_range(nb):
                nisa.activation(dst=r[b], op=nl.exp, data=t[b])
        for b in nl.affine_range(nb):
            nisa.dma_copy(dst=out[b * 128:(b + 1) * 128, :], src=r[b])
        return out
    return block_exp


block_exp_whole = make_block_exp(True)
block_exp_blocks = make_block_exp(False)


# 10. spills: SBUF beyond capacity is saved to HBM and reloaded ----------------------------
def make_exp_add(in_place):
    @nki.jit
    def exp_add(x, y):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        nisa.dma_copy(dst=b, src=y)
        if in_place:
            nisa.activation(dst=b, op=nl.exp, data=b)
            nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)
            nisa.dma_copy(dst=out, src=a)
        else:
            c = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.activation(dst=c, op=nl.exp, data=b)
            r = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=r, data1=a, data2=c, op=nl.add)
            nisa.dma_copy(dst=out, src=r)
        return out
    return exp_add


exp_add_spills = make_exp_add(False)
exp_add_fits = make_exp_add(True)


@nki.jit
def load_then_exp(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)  # WAIT:load
    nl.store(out, value=nl.exp(t))
    return out


class RewardsTest(unittest.TestCase):
    def assert_pair(self, slow, fast, inputs, min_ratio=1.2, rtol=1e-5):
        a = nkisim.simulate(slow, inputs)
        b = nkisim.simulate(fast, inputs)
        for oa, ob in zip(a.outputs, b.outputs):
            np.testing.assert_allclose(oa, ob, rtol=rtol, atol=1e-5)
        self.assertGreater(a.latency_us, min_ratio * b.latency_us,
                           "%s %.2f us vs %s %.2f us" % (slow.__name__, a.latency_us,
                                                          fast.__name__, b.latency_us))
        return a, b

    def test_fewer_larger_dmas(self):
        a, b = self.assert_pair(copy_row_dmas, copy_tile_dma, {"x": rand(128, 512)}, 3.0)
        self.assertEqual(a.metrics["dma_transfer_count"], 256)
        self.assertEqual(b.metrics["dma_transfer_count"], 2)
        self.assertEqual(a.metrics["hbm_read_bytes"], b.metrics["hbm_read_bytes"])

    def test_hoisted_loads(self):
        a, b = self.assert_pair(scale_reload, scale_hoisted,
                                {"x": rand(2048, 512), "w": rand(128, 512)}, 1.2)
        self.assertGreater(a.metrics["hbm_read_bytes"], b.metrics["hbm_read_bytes"])

    def test_full_matmul_tiles(self):
        inputs = {"lhsT": nkisim.to_bf16(rand(512, 512)), "rhs": nkisim.to_bf16(rand(512, 2048))}
        dts = {"lhsT": "bfloat16", "rhs": "bfloat16"}
        a = nkisim.simulate(matmul_small_tiles, inputs, input_dtypes=dts)
        b = nkisim.simulate(matmul_full_tiles, inputs, input_dtypes=dts)
        np.testing.assert_allclose(a.outputs[0], b.outputs[0], rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(b.outputs[0], inputs["lhsT"].T @ inputs["rhs"], rtol=1e-4,
                                   atol=1e-3)
        self.assertGreater(a.latency_us, 2.0 * b.latency_us)
        self.assertEqual(a.metrics["hardware_flops"], b.metrics["hardware_flops"])
        self.assertGreater(a.metrics["tensor_engine_active_time"],
                           2.0 * b.metrics["tensor_engine_active_time"])
        self.assertGreater(b.metrics["mfu_estimated_percent"],
                           2.0 * a.metrics["mfu_estimated_percent"])

    def test_engines_overlap(self):
        a, b = self.assert_pair(two_ops_one_engine, two_ops_two_engines,
                                {"x": rand(128, 2048)}, 1.3)
        self.assertEqual(a.metrics["scalar_engine_instruction_count"], 0)
        self.assertEqual(b.metrics["scalar_engine_instruction_count"], 16)

    def test_engine_less_scalar_ops_are_spread_over_vector_and_scalar(self):
        # the same 32 multiplies without an engine: the compiler places them (NKIBench
        # adamw on trn1: VectorE 90%, ScalarE 62%); about as fast as the explicit split
        x = rand(128, 2048)
        placed = sim(spread_scalar_ops, x=x)
        split = sim(two_ops_two_engines, x=x)
        pinned = sim(two_ops_one_engine, x=x)
        for r in (placed, split, pinned):
            np.testing.assert_allclose(r.outputs[0], x * 15.0, rtol=1e-6)
        self.assertGreater(placed.metrics["scalar_engine_instruction_count"], 8)
        self.assertGreater(placed.metrics["vector_engine_instruction_count"], 8)
        self.assertLess(placed.latency_us, 0.8 * pinned.latency_us)
        self.assertTrue(any("placed on ScalarE" in e for e in placed.compiler_effects))

    def test_independent_buffers_overlap_dma_and_compute(self):
        self.assert_pair(single_buffer, fresh_buffers, {"x": rand(2048, 1024)}, 1.3)

    def test_fusion_beats_two_hbm_passes(self):
        a, b = self.assert_pair(two_passes, fused_pass, {"x": rand(2048, 512)}, 1.3)
        self.assertEqual(a.metrics["hbm_read_bytes"], 2 * b.metrics["hbm_read_bytes"])


    def test_fusion_over_affine_range_beats_two_passes(self):
        # compute-bound chain alternating ScalarE and VectorE: fused, the chain of tile i+1
        # fills the engine gaps of tile i (the compiler interleaves affine iterations)
        self.assert_pair(two_chain_passes, fused_chain_affine, {"x": rand(2048, 512)}, 1.1,
                         rtol=1e-4)

    def test_sequential_range_is_not_faster_than_affine_range(self):
        a, b = self.assert_pair(fused_chain_sequential, fused_chain_affine,
                                {"x": rand(2048, 512)}, 1.2)
        self.assertEqual(a.metrics["vector_engine_active_time"],
                         b.metrics["vector_engine_active_time"])


    def test_gpsimd_elementwise_not_cheaper_than_vector(self):
        x = rand(128, 2048)
        for target in ("trn1", "trn2"):
            v = nkisim.simulate(add_vector, {"x": x}, target=target)
            g = nkisim.simulate(add_gpsimd, {"x": x}, target=target)
            np.testing.assert_array_equal(v.outputs[0], g.outputs[0])
            self.assertGreaterEqual(g.metrics["gpsimd_engine_active_time"],
                                    v.metrics["vector_engine_active_time"], target)
            self.assertGreaterEqual(g.latency_us, v.latency_us, target)

    def test_trn1_vector_and_gpsimd_share_the_sbuf_port(self):
        # independent adds on VectorE and GpSimdE overlap on trn2 but share the SBUF port
        # on trn1, so there the pair takes about the sum of their streaming times
        x = rand(128, 2048)
        for target, lo, hi in (("trn1", 0.8, 1.01), ("trn2", 0.0, 0.2)):
            g = nkisim.simulate(many_adds_gpsimd, {"x": x}, target=target)
            both = nkisim.simulate(many_adds_both, {"x": x}, target=target)
            vec = both.metrics["vector_engine_active_time"] * 1e6
            extra = (both.latency_us - g.latency_us) / vec
            self.assertGreaterEqual(extra, lo, target)
            self.assertLessEqual(extra, hi, target)


    def test_block_tensor_costs_what_its_blocks_cost(self):
        x = rand(1024, 512)
        w = nkisim.simulate(block_exp_whole, {"x": x})
        b = nkisim.simulate(block_exp_blocks, {"x": x})
        np.testing.assert_allclose(w.outputs[0], np.exp(x), rtol=1e-5)
        np.testing.assert_array_equal(w.outputs[0], b.outputs[0])
        whole = w.metrics["scalar_engine_active_time"]
        blocks = b.metrics["scalar_engine_active_time"]
        # one instruction over 8 blocks of 512 elements per partition: 8 x 512 elements,
        # saving only the per-instruction overhead of the other 7
        self.assertLessEqual(whole, blocks)
        self.assertGreater(whole, 0.8 * blocks)
        self.assertEqual(w.metrics["scalar_engine_instruction_count"], 1)


    def test_spilling_kernel_verifies_and_pays_its_spill_traffic(self):
        # trn1 SBUF: 192 KiB per partition; each [128, 24576] fp32 tile takes 96 KiB
        x, y = rand(128, 24576), rand(128, 24576)
        fits = nkisim.simulate(exp_add_fits, {"x": x, "y": y}, target="trn1")
        spills = nkisim.simulate(exp_add_spills, {"x": x, "y": y}, target="trn1")
        np.testing.assert_allclose(spills.outputs[0], x + np.exp(y), rtol=1e-5)
        np.testing.assert_array_equal(spills.outputs[0], fits.outputs[0])
        self.assertEqual(fits.metrics["spill_save_bytes"], 0)
        self.assertEqual(fits.metrics["peak_sbuf_bytes_per_partition"], 192 * 1024)
        # three 96 KiB tiles live at the exp and again at the add: 96 KiB over, twice
        self.assertEqual(spills.metrics["spill_save_bytes"], 2 * 96 * 1024 * 128)
        self.assertEqual(spills.metrics["spill_reload_bytes"], 2 * 96 * 1024 * 128)
        self.assertGreater(spills.metrics["hbm_read_bytes"], fits.metrics["hbm_read_bytes"])
        # 24 MiB more each way at well under 0.5 GB/s per us: tens of microseconds slower
        self.assertGreater(spills.latency_us, fits.latency_us + 50)
        # on trn2 (208 KiB usable) the same kernel spills only the part over capacity
        t2 = nkisim.simulate(exp_add_spills, {"x": x, "y": y}, target="trn2")
        self.assertLess(t2.metrics["spill_save_bytes"], spills.metrics["spill_save_bytes"])


class ModelTest(unittest.TestCase):
    def test_deterministic(self):
        inputs = {"lhsT": rand(512, 128), "rhs": rand(512, 2048)}
        r1 = nkisim.simulate(matmul_full_tiles, inputs)
        r2 = nkisim.simulate(matmul_full_tiles, inputs)
        self.assertEqual(r1.latency_us, r2.latency_us)
        self.assertEqual(r1.metrics, r2.metrics)
        self.assertEqual(r1.roofline, r2.roofline)

    def test_trn1_and_trn2_differ(self):
        inputs = {"lhsT": rand(512, 128), "rhs": rand(512, 2048)}
        r1 = nkisim.simulate(matmul_full_tiles, inputs, target="trn1")
        r2 = nkisim.simulate(matmul_full_tiles, inputs, target="trn2")
        self.assertNotEqual(r1.latency_us, r2.latency_us)
        self.assertNotEqual(r1.roofline["peak_tflops"], r2.roofline["peak_tflops"])
        np.testing.assert_array_equal(r1.outputs[0], r2.outputs[0])

    def test_metric_names_and_units(self):
        r = sim(matmul_full_tiles, lhsT=rand(512, 128), rhs=rand(512, 2048))
        m = r.metrics
        for name in ("total_time", "tensor_engine_active_time", "vector_engine_active_time",
                     "scalar_engine_active_time", "gpsimd_engine_active_time",
                     "tensor_engine_active_time_percent", "vector_engine_instruction_count",
                     "dma_active_time", "dma_transfer_count", "dma_transfer_total_bytes",
                     "hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes",
                     "sbuf_write_bytes", "psum_read_bytes", "psum_write_bytes",
                     "hardware_flops", "mfu_estimated_percent", "mbu_estimated_percent",
                     "spill_save_bytes", "spill_reload_bytes",
                     "peak_sbuf_bytes_per_partition", "peak_psum_bytes_per_partition"):
            self.assertIn(name, m)
        self.assertAlmostEqual(m["total_time"] * 1e6, r.latency_us, places=6)
        self.assertEqual(m["hardware_flops"], 2 * 512 * 128 * 2048)
        self.assertEqual(m["tensor_engine_instruction_count"], 4 * 4)
        self.assertEqual(m["hbm_read_bytes"], (512 * 128 + 512 * 2048) * 4)
        self.assertEqual(m["hbm_write_bytes"], 128 * 2048 * 4)
        # liveness ends at the last access: one accumulator bank at a time
        self.assertEqual(m["peak_psum_bytes_per_partition"], 2048)
        # a[4, 128, 128] + b[4, 128, 2048] + res[128, 2048], fp32, per partition
        self.assertEqual(m["peak_sbuf_bytes_per_partition"], (4 * 128 + 4 * 2048 + 2048) * 4)
        self.assertTrue(0 <= m["tensor_engine_active_time_percent"] <= 100)
        for key in ("achieved_tflops", "peak_tflops", "compute_pct", "achieved_hbm_gbps",
                    "peak_hbm_gbps", "hbm_pct", "arithmetic_intensity", "ridge_point"):
            self.assertIn(key, r.roofline)
        self.assertAlmostEqual(r.roofline["peak_tflops"], 78.6432 / 4, places=3)  # fp32
        self.assertIn(r.bottleneck, ("compute-bound", "memory-bound", "underutilized"))
        self.assertEqual(r.instructions, m["total_instruction_count"])

    def test_bottleneck_classes(self):
        mem = sim(copy_tile_dma, x=rand(128, 16384))
        self.assertEqual(mem.bottleneck, "memory-bound")
        comp = sim(two_ops_one_engine, x=rand(128, 8192))
        self.assertEqual(comp.bottleneck, "compute-bound")
        tiny = sim(copy_row_dmas, x=rand(128, 8))
        self.assertEqual(tiny.bottleneck, "underutilized")

    def test_tensor_spec_inputs_for_timing_only_runs(self):
        inputs = {"lhsT": rand(512, 128), "rhs": rand(512, 2048)}
        full = nkisim.simulate(matmul_full_tiles, inputs, numerics=False)
        spec = nkisim.simulate(matmul_full_tiles,
                               {"lhsT": nkisim.TensorSpec((512, 128), "float32"),
                                "rhs": nkisim.TensorSpec((512, 2048), np.float32)},
                               numerics=False)
        self.assertEqual(full.metrics, spec.metrics)
        with self.assertRaises(nkisim.NkiCompileError):
            nkisim.simulate(matmul_full_tiles, {"lhsT": nkisim.TensorSpec((512, 128)),
                                                "rhs": nkisim.TensorSpec((512, 2048))})

    def test_hotspots_name_kernel_lines(self):
        r = sim(fused_pass, x=rand(1024, 512))
        top = r.hotspots[0]
        self.assertEqual(top["engine"], "dma")
        self.assertEqual(top["line"], _util.marker_line(__file__, "# HOT:load"))
        self.assertEqual(top["instructions"], 8)
        engines = {h["engine"] for h in r.hotspots}
        self.assertTrue({"dma", "scalar", "vector"} <= engines)

    def test_dma_hotspots_are_shares_of_the_makespan(self):
        # a DMA-bound kernel keeps many transfers in flight: each line's row is its share of
        # the DMA bandwidth, so a line never takes more than the whole kernel
        r = sim(fused_pass, x=rand(4096, 2048))
        dma = [h for h in r.hotspots if h["engine"] == "dma"]
        self.assertEqual(len(dma), 2)
        total = sum(h["time_us"] for h in dma)
        self.assertLessEqual(total, r.latency_us * 1.0001)
        # the loads and the stores move the same bytes: about half of the DMA time each
        self.assertAlmostEqual(dma[0]["time_us"], dma[1]["time_us"], delta=0.1 * total)
        self.assertGreater(total, 0.5 * r.latency_us)

    def test_waits_name_the_engine_waited_for(self):
        r = sim(load_then_exp, x=rand(128, 2048))
        self.assertTrue(r.waits)
        top = r.waits[0]
        self.assertEqual((top["engine"], top["waiting_on"]), ("scalar", "dma"))
        self.assertEqual(top["line"], _util.marker_line(__file__, "# WAIT:load"))
        # the load takes most of the kernel: ScalarE idles for most of it
        self.assertGreater(top["idle_pct"], 30.0)
        self.assertLess(top["idle_pct"], 100.0)
        r2 = sim(fused_chain_affine, x=rand(1024, 512))
        self.assertLessEqual(len(r2.waits), 5)
        pcts = [w["idle_pct"] for w in r2.waits]
        self.assertEqual(pcts, sorted(pcts, reverse=True))
        self.assertEqual({w["engine"] for w in r2.waits} & {"dma"}, set())
        quiet = nkisim.simulate(load_then_exp, {"x": rand(128, 2048)}, hotspots=False)
        self.assertEqual(quiet.waits, [])

    def test_dependent_chain_is_serial(self):
        # a load, a compute and a store on the same tile cannot overlap each other
        r = sim(copy_tile_dma, x=rand(128, 512))
        self.assertGreater(r.latency_us, 2 * 1.3)


class SpillPlacementTest(unittest.TestCase):
    """Where spill traffic goes (simulator._charge_spills): into the DMA bandwidth the
    kernel's own transfers leave idle after the first overflow, the rest after the makespan."""

    def setUp(self):
        from types import SimpleNamespace
        from nkisim.machine import constants, costs, timing
        self.C = constants
        target = constants.get_target("trn2")
        self.sched = timing.Scheduler(target)
        self.sim = SimpleNamespace(
            sched=self.sched, timing=True, target=target, costs=costs.table(target),
            dma_bw=4.0, spill_save=0, allocs=[], sbuf_cap=1,
            spill_reload=0, hbm_read=0, hbm_write=0, sbuf_read=0, sbuf_write=0, dma_bytes=0)

    def spill(self, pass_ns, not_before=0.0):
        from nkisim.machine import simulator
        # bytes whose save (and reload) take pass_ns at the 4 B/ns of the fake core
        nbytes = int(pass_ns * 4.0) - 128 * self.sim.costs.dma_descriptor_bytes
        simulator._charge_spills(self.sim, nbytes, not_before)
        return nbytes

    def test_idle_windows_survive_pruning(self):
        from nkisim.machine import timing
        line = timing.Timeline(keep_history=True)
        for k in range(200):
            line.consume(10.0 * k, 1.0)
        before = line.idle_windows(0.0, 2000.0)
        line.prune(1500.0)
        self.assertTrue(line.done_s)
        self.assertEqual(line.idle_windows(0.0, 2000.0), before)
        self.assertEqual(len(before), 200)
        self.assertAlmostEqual(sum(b - a for a, b in before), 2000.0 - 200.0)
        self.assertEqual(line.idle_windows(15.0, 31.0), [(15.0, 20.0), (21.0, 30.0)])

    def test_a_spill_that_fits_the_idle_bandwidth_costs_no_time(self):
        self.sched.bw.consume(0.0, 100.0)
        self.sched.makespan = 1000.0
        nbytes = self.spill(250.0)
        self.assertAlmostEqual(self.sched.makespan, 1000.0)
        self.assertEqual(self.sim.spill_save, nbytes)
        self.assertEqual(self.sim.dma_bytes, 2 * nbytes)
        self.assertEqual(self.sched.dma_count, 2)
        self.assertAlmostEqual(self.sched.bw.busy, 100.0 + 500.0)
        self.assertEqual(list(zip(self.sched.dma_starts, self.sched.dma_ends)), [(100.0, 600.0)])

    def test_transfers_in_flight_do_not_hide_idle_bandwidth(self):
        # queues always busy with slow small transfers, bandwidth 5% used
        for k in range(20):
            self.sched.bw.consume(50.0 * k, 2.5)
            self.sched.dma_starts.append(50.0 * k)
            self.sched.dma_ends.append(50.0 * k + 50.0)
        self.sched.makespan = 1000.0
        self.spill(400.0)
        self.assertAlmostEqual(self.sched.makespan, 1000.0)

    def test_no_spill_before_the_first_overflow_and_the_rest_after_the_makespan(self):
        self.sched.makespan = 1000.0
        self.spill(150.0, not_before=800.0)   # 300 ns of traffic, 200 idle after 800
        self.assertAlmostEqual(self.sched.makespan, 1000.0 + self.C.DMA_FIXED_NS + 100.0)
        self.assertGreaterEqual(min(self.sched.dma_starts), 800.0)

    def test_a_run_without_timing_counts_the_bytes_only(self):
        self.sim.timing = False
        self.sched.makespan = 0.0
        nbytes = self.spill(150.0)
        self.assertEqual(self.sched.makespan, 0.0)
        self.assertEqual(self.sim.spill_reload, nbytes)
        self.assertEqual(self.sim.hbm_read, nbytes)


if __name__ == "__main__":
    unittest.main()
