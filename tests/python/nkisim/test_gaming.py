"""Kernels that try to talk the cost model down (tests/python/nkisim/gaming/): each is priced
at least as high as its honest form, or refused. The invariant (MODEL.md, "What a rewrite
cannot buy"): no rewrite of a kernel's text lowers its modelled time below its modelled
work."""
import importlib.util
import os
import unittest

import numpy as np

from . import _util  # noqa: F401
import nkisim

HERE = os.path.dirname(os.path.abspath(__file__))
GAMING = os.path.join(HERE, "gaming")
SEEDS = os.path.join(HERE, "..", "..", "..", "seeds")


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def gaming(name):
    return load(os.path.join(GAMING, name + ".py"), "gaming_" + name)


def seed(problem, kernel):
    return load(os.path.join(SEEDS, problem, kernel + ".py"), "seed_%s_%s" % (problem, kernel))


def spec(shape, dtype="float32"):
    return nkisim.TensorSpec(shape, dtype)


class SpillPerReloadTest(unittest.TestCase):
    """Keeping every operand tile of a GEMM live (several times SBUF) does not make each
    operand cost one read: an evicted tile is reloaded at every later access."""

    def price(self, kernel, k, m, n):
        r = nkisim.simulate(kernel, {"lhsT": spec((k, m), "bfloat16"),
                                     "rhs": spec((k, n), "bfloat16")},
                            target="trn1", numerics=False)
        return r

    def test_all_live_gemm_costs_at_least_the_optimized_seed(self):
        nkisim.activate()
        # 2.7x SBUF of operands on trn1 (the seed's full shape is 8x: same outcome, slower)
        k, m, n = 4096, 4096, 4096
        game = self.price(gaming("gemm_all_live").matmul_kernel, k, m, n)
        honest = self.price(seed("gemm", "optimized").matmul_kernel, k, m, n)
        self.assertEqual(honest.metrics["spill_reload_bytes"], 0)
        operands = (k * m + k * n) * 2
        # far more is reloaded than the operands' size beyond SBUF (the old once-only charge)
        self.assertGreater(game.metrics["spill_reload_bytes"], 3 * operands)
        self.assertGreaterEqual(game.latency_us, honest.latency_us)

    def test_small_all_live_gemm_that_fits_does_not_spill(self):
        nkisim.activate()
        game = self.price(gaming("gemm_all_live").matmul_kernel, 512, 512, 1024)
        self.assertEqual(game.metrics["spill_save_bytes"], 0)
        self.assertEqual(game.metrics["spill_reload_bytes"], 0)


class ResidencyTest(unittest.TestCase):
    """The residency replay (machine/spills.py) on hand-made access sequences."""

    def run_res(self, tiles, cap):
        from nkisim.machine import spills
        from nkisim.machine.timing import DepState
        allocs = []
        for pb, codes in tiles:
            d = DepState()
            d.uses = list(codes)
            allocs.append((0, pb, d, "sbuf", None, 0.0))
        return spills.residency(allocs, cap)

    def test_cyclic_reads_of_more_than_fit_reload_every_pass(self):
        # three tiles of 40 bytes, capacity 100: written once, then read in 4 passes
        w = [[1 + 2 * i] for i in range(3)]
        seq = 10
        for _ in range(4):
            for i in range(3):
                w[i].append(2 * seq)
                seq += 1
        r = self.run_res([(40, c) for c in w], 100)
        # Belady keeps two tiles and reloads the third about once per pass
        self.assertGreaterEqual(r.reloads, 3)
        self.assertEqual(r.reload, 40 * r.reloads)
        self.assertLessEqual(r.saves, 3)  # a tile is saved only when first evicted after its write

    def test_tiles_that_fit_never_move(self):
        r = self.run_res([(40, [1, 20, 40]), (40, [3, 30])], 100)
        self.assertEqual((r.save, r.reload), (0, 0))

    def test_operands_of_one_instruction_are_never_evicted_for_each_other(self):
        # two 60-byte tiles read by the same instruction with capacity 100: both stay
        r = self.run_res([(60, [1, 20]), (60, [3, 20])], 100)
        self.assertEqual(r.reloads, 1)  # the first is evicted for the second's write, once


class GroupingNeedsIndependenceTest(unittest.TestCase):
    """Only independent copies from distinct iterations of a small affine loop are issued
    as one instruction: a dependent chain of narrow adds costs the same under affine_range,
    with an affine iterator left open, and under range."""

    def test_prefix_chain_costs_the_same_however_its_loop_is_spelled(self):
        nkisim.activate()
        mod = gaming("prefix_chain")
        x = np.random.default_rng(0).standard_normal((128, mod.N)).astype(np.float32)
        lat = {}
        for name in ("prefix_affine", "prefix_open_frame", "prefix_range"):
            r = nkisim.simulate(getattr(mod, name), {"x": x}, target="trn1")
            np.testing.assert_allclose(r.outputs[0], np.cumsum(x, axis=1), rtol=1e-3,
                                       atol=1e-3)
            self.assertEqual(r.metrics["vector_engine_instruction_count"], mod.N, name)
            lat[name] = r.latency_us
        self.assertGreaterEqual(lat["prefix_affine"], 0.99 * lat["prefix_range"])
        self.assertGreaterEqual(lat["prefix_open_frame"], 0.99 * lat["prefix_range"])

    def test_copies_within_one_iteration_are_not_grouped(self):
        nkisim.activate()
        import nki
        import nki.isa as nisa
        import nki.language as nl

        @nki.jit
        def unrolled(x):
            out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
            xt = nl.load(x)
            res = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
            for _ in nl.affine_range(2):
                for j in range(64):  # 64 independent copies in one iteration of the loop
                    res[:, j:j + 1] = nisa.tensor_scalar(xt[:, j:j + 1], nl.multiply, 2.0)
            nl.store(out, res)
            return out

        x = np.ones((128, 64), np.float32)
        r = nkisim.simulate(unrolled, {"x": x}, target="trn1")
        # members only from distinct iterations: at most 2 per group
        self.assertGreaterEqual(r.metrics["vector_engine_instruction_count"], 64)


class DmaTraversalTest(unittest.TestCase):
    """A DMA pays one descriptor per contiguous run along the order it walks memory, and an
    HBM -> HBM copy pays both sides: walking across the grain is not a cheap transpose."""

    @classmethod
    def setUpClass(cls):
        nkisim.activate()
        g = gaming("transpose_strided")
        x = np.random.default_rng(0).random((2, 512, 256), dtype=np.float32)
        ref = np.transpose(x, (0, 2, 1))
        cls.lat = {}
        for name, k in (("strided", g.transpose_kernel), ("hbm", g.transpose_hbm),
                        ("naive", seed("transpose", "naive").transpose_kernel),
                        ("optimized", seed("transpose", "optimized").transpose_kernel)):
            r = nkisim.simulate(k, {"x": x}, target="trn1")
            np.testing.assert_array_equal(r.outputs[0], ref)
            cls.lat[name] = r.latency_us

    def test_strided_load_costs_at_least_the_naive_seed(self):
        self.assertGreaterEqual(self.lat["strided"], self.lat["naive"])

    def test_hbm_to_hbm_transpose_costs_at_least_the_optimized_seed(self):
        self.assertGreaterEqual(self.lat["hbm"], self.lat["optimized"])

    def test_runs_follow_the_view_order(self):
        from nkisim.machine import costs
        from nkisim.data import dtypes
        from nkisim.data.buffers import Storage, Tensor, hbm
        t = Tensor.root(Storage((4, 64, 32), dtypes.FLOAT32, hbm))
        self.assertEqual(costs.runs(t), 1)            # the whole tensor is one run
        self.assertEqual(costs.runs(t[1]), 1)
        self.assertEqual(costs.runs(t[1, 0:8, :]), 1)
        self.assertEqual(costs.runs(t[1, :, 0:8]), 64)  # one run per row
        import nki.language as nl
        ib = nl.arange(64)[None, :]
        ic = nl.arange(32)[:, None]
        self.assertEqual(costs.runs(t[1, ib, ic]), 64 * 32)  # every element its own run


class SurfacesTest(unittest.TestCase):
    """Own gaming kernels against each modelled effect (gaming/surfaces.py)."""

    @classmethod
    def setUpClass(cls):
        nkisim.activate()
        cls.S = gaming("surfaces")
        cls.rng = np.random.default_rng(7)

    def run_k(self, k, **inputs):
        return nkisim.simulate(k, inputs, target="trn1")

    def test_block_tensors_do_not_hide_reloads(self):
        k, m, n = 4096, 4096, 4096
        specs = {"lhsT": spec((k, m), "bfloat16"), "rhs": spec((k, n), "bfloat16")}
        game = nkisim.simulate(self.S.gemm_blocks_live, specs, target="trn1", numerics=False)
        honest = nkisim.simulate(seed("gemm", "optimized").matmul_kernel, specs,
                                 target="trn1", numerics=False)
        self.assertGreater(game.metrics["spill_reload_bytes"], 3 * (k * m + k * n) * 2)
        self.assertGreaterEqual(game.latency_us, honest.latency_us)

    def test_block_gemm_computes_the_product(self):
        lhsT = nkisim.to_bf16(self.rng.standard_normal((256, 256), dtype=np.float32))
        rhs = nkisim.to_bf16(self.rng.standard_normal((256, 1024), dtype=np.float32))
        r = nkisim.simulate(self.S.gemm_blocks_live, {"lhsT": lhsT, "rhs": rhs},
                            input_dtypes={"lhsT": "bfloat16", "rhs": "bfloat16"})
        np.testing.assert_allclose(r.outputs[0], lhsT.T @ rhs, rtol=2e-2, atol=0.25)

    def test_matmul_result_into_sbuf_pays_the_copy(self):
        lhsT = self.rng.standard_normal((128, 256)).astype(np.float32)
        rhs = self.rng.standard_normal((128, 1024)).astype(np.float32)
        game = self.run_k(self.S.mm_into_sbuf, lhsT=lhsT, rhs=rhs)
        honest = self.run_k(self.S.mm_honest, lhsT=lhsT, rhs=rhs)
        np.testing.assert_allclose(game.outputs[0], lhsT.T @ rhs, rtol=1e-4, atol=1e-3)
        self.assertGreaterEqual(game.latency_us, honest.latency_us)

    def test_load_into_psum_pays_the_copy(self):
        x = self.rng.standard_normal((128, 2048)).astype(np.float32)
        y = self.rng.standard_normal((128, 2048)).astype(np.float32)
        game = self.run_k(self.S.load_into_psum, x=x, y=y)
        honest = self.run_k(self.S.load_into_psum_honest, x=x, y=y)
        np.testing.assert_allclose(game.outputs[0], x + y, rtol=1e-6)
        self.assertGreaterEqual(game.latency_us, honest.latency_us)

    def test_gather_pays_for_every_scattered_row(self):
        x = np.arange(128 * 128, dtype=np.float32).reshape(128, 128)
        ref = x.T.copy()
        ref[0] = x[0]
        game = self.run_k(self.S.gather_first_row, x=x)
        honest = self.run_k(self.S.gather_first_row_honest, x=x)
        np.testing.assert_array_equal(game.outputs[0], ref)
        np.testing.assert_array_equal(honest.outputs[0], ref)
        self.assertGreaterEqual(game.latency_us, honest.latency_us)

    def test_writes_to_one_column_are_not_grouped(self):
        x = self.rng.standard_normal((128, 64)).astype(np.float32)
        game = self.run_k(self.S.same_column_writes, x=x)
        honest = self.run_k(self.S.same_column_writes_range, x=x)
        np.testing.assert_allclose(game.outputs[0][:, 0], 2 * x[:, 63], rtol=1e-6)
        self.assertGreaterEqual(game.latency_us, 0.99 * honest.latency_us)

    def test_reuse_never_returns_stale_or_modified_data(self):
        x = self.rng.standard_normal((128, 2048)).astype(np.float32)
        y = self.rng.standard_normal((128, 2048)).astype(np.float32)
        r = self.run_k(self.S.alias_write_reload, x=x, y=y)
        np.testing.assert_allclose(r.outputs[0], x + y, rtol=1e-6)
        r = self.run_k(self.S.kept_tile_modified, x=x)
        np.testing.assert_allclose(r.outputs[0], 3 * x, rtol=1e-6)

    def test_sbuf_side_transposing_walk_costs_at_least_the_naive_seed(self):
        x = self.rng.random((2, 256, 256), dtype=np.float32)
        game = self.run_k(self.S.sbuf_side_transpose, x=x)
        honest = self.run_k(seed("transpose", "naive").transpose_kernel, x=x)
        np.testing.assert_array_equal(game.outputs[0], np.transpose(x, (0, 2, 1)))
        self.assertGreaterEqual(game.latency_us, honest.latency_us)


class ForgedLoopEventsTest(unittest.TestCase):
    """A trace whose loop events do not balance, or that claims an iteration outside a small
    affine loop, is refused by the replay."""

    KERNEL = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.load(a[i * 32:(i + 1) * 32, :])
        u = nl.load(b[i * 32:(i + 1) * 32, :])
        nl.store(out[i * 32:(i + 1) * 32, :], value=nl.add(t, u))
    return out
"""

    def setUp(self):
        import sys
        import tempfile
        harness = os.path.join(HERE, "..", "..", "..", "backends", "harness")
        if harness not in sys.path:
            sys.path.insert(0, harness)
        self._td = tempfile.TemporaryDirectory(prefix="gaming-")
        self.path = os.path.join(self._td.name, "k.py")
        with open(self.path, "w") as f:
            f.write(self.KERNEL)
        rng = np.random.default_rng(0)
        self.inputs = {"a": rng.standard_normal((128, 64), dtype=np.float32),
                       "b": rng.standard_normal((128, 64), dtype=np.float32)}

    def tearDown(self):
        self._td.cleanup()

    def trace(self):
        from harnesslib.simchild import loader_spec
        from nkisim import sandbox
        harness = os.path.join(HERE, "..", "..", "..", "backends", "harness")
        ans = sandbox.record_trace({
            "kernel_path": self.path, "loader": loader_spec(harness), "target": "trn2",
            "input_names": list(self.inputs), "kernel_name": None, "problem_kernel": None,
            "inputs": {k: {"shape": list(v.shape), "dtype": v.dtype.name}
                       for k, v in self.inputs.items()},
            "input_dtypes": {}, "grid": None})
        self.assertTrue(ans["ok"], ans)
        return ans

    def replay(self, trace):
        from nkisim.sandbox import replay
        return replay.replay(trace, dict(self.inputs), target="trn2", kernel_path=self.path)

    def test_honest_trace_has_balanced_iterations(self):
        trace = self.trace()
        evs = [e for e in trace["events"] if e and e[0] in ("affine", "affine_next")]
        self.assertEqual(evs, [["affine", 4]] + [["affine_next"]] * 4 + [["affine", -1]])
        r = self.replay(trace)
        np.testing.assert_allclose(r.outputs[0], self.inputs["a"] + self.inputs["b"])

    def test_unbalanced_or_stray_loop_events_are_refused(self):
        from nkisim.sandbox import boundary
        trace = self.trace()
        forged = []
        for mutate in ("drop_end", "extra_end", "stray_next"):
            t = dict(trace)
            evs = list(trace["events"])
            if mutate == "drop_end":
                evs.remove(["affine", -1])
            elif mutate == "extra_end":
                evs.insert(1, ["affine", -1])
            else:
                evs.insert(1, ["affine_next"])
            t["events"] = evs
            forged.append(t)
        for t in forged:
            with self.assertRaises(boundary.NkiForbiddenAccess):
                self.replay(t)


if __name__ == "__main__":
    unittest.main()
