"""Collectives across a simulated group of ranks (nkisim.simulate_ranks), and the private /
internal module paths sample kernels import."""
import os
import sys
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.collectives as cc
import nki.isa as nisa
import nki.language as nl
import neuronxcc.nki.isa as legacy_isa
import neuronxcc.nki.nccl as nccl


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@nki.jit
def ring_shift_kernel(x, pairs):
    """Each rank sends x to its ring successor and returns what it received, plus one."""
    send = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
    recv = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=send, src=x)
    cc.collective_permute(srcs=[send], dsts=[recv], source_target_pairs=pairs)
    t = nl.load(recv)
    nl.store(out, nl.add(t, 1.0))
    return out


@nki.jit
def legacy_ring_kernel(x, pairs, steps):
    """Pass a buffer around the ring `steps` times with the legacy nccl API."""
    a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
    b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    legacy_isa._tiled_offloaded_memcpy(dst=a, src=x)
    for _ in range(steps):
        nccl.collective_permute(dst=b, src=a, source_target_pairs=pairs)
        legacy_isa._tiled_offloaded_memcpy(dst=a, src=b)
    legacy_isa._tiled_offloaded_memcpy(dst=out, src=a)
    return out


@nki.jit
def all_reduce_kernel(x, op):
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    cc.all_reduce(srcs=[src], dsts=[dst], replica_group=cc.ReplicaGroup([[0, 1, 2]]), op=op)
    nisa.dma_copy(dst=out, src=dst)
    return out


@nki.jit
def gather_scatter_kernel(x):
    """all_gather along dim 0, then reduce_scatter of the gathered tensor along dim 0."""
    n = 2
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
    gathered = nl.ndarray((n * x.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.private_hbm)
    part = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
    g = nl.ndarray(gathered.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    p = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    grp = cc.ReplicaGroup([[0, 1]])
    cc.all_gather(srcs=[src], dsts=[gathered], replica_group=grp, collective_dim=0)
    cc.reduce_scatter(srcs=[gathered], dsts=[part], replica_group=grp, op=nl.add,
                      collective_dim=0)
    nisa.dma_copy(dst=g, src=gathered)
    nisa.dma_copy(dst=p, src=part)
    return g, p


@nki.jit
def rank_id_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, nl.multiply(t, float(cc.rank_id())))
    return out


@nki.jit
def uneven_kernel(x, rank):
    """Rank 1 skips the collective: the others would wait forever."""
    a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
    b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=a, src=x)
    if rank != 1:
        cc.collective_permute(srcs=[a], dsts=[b], source_target_pairs=[(0, 1), (1, 0)])
    nisa.dma_copy(dst=out, src=a)
    return out


@nki.jit
def fma_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    legacy_isa._tiled_offloaded_fma(a, b, scales=[1.0, 1.0], dst=out)
    return out


@nki.jit
def masked_assign_kernel(x, y, predicate):
    """t = x; then t = copy(y) predicated: off (False) or on the first 64 rows."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(x.shape[1])[None, :]
    a = nl.load(x)
    b = nl.load(y)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    t[i_p, i_f] = nl.copy(a[i_p, i_f])
    mask = False if predicate == "off" else (i_p < 64)
    t[i_p, i_f] = nl.copy(b[i_p, i_f], mask=mask)
    nl.store(out, t)
    return out


@nki.jit
def predicated_matmul_kernel(a, b, on):
    """psum = a.T @ b, then `+= nc_matmul(s, u, mask=on)` with s, u copies predicated the
    same way (never written when on=False), and `tt = nc_transpose(a, mask=on)` copied over
    a zero tile: with on=False neither may change anything."""
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    out_t = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    ta = nl.load(a)
    tb = nl.load(b)
    acc = nl.zeros((64, 128), dtype=nl.float32, buffer=nl.psum)
    acc[...] += nisa.nc_matmul(ta, tb)
    u = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    u[...] = nl.copy(tb, mask=on)
    sa = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    sa[...] = nl.copy(ta, mask=on)
    acc[...] += nisa.nc_matmul(sa, u, mask=on)
    nl.store(out, nl.copy(acc))
    tt = nl.zeros((64, 128), dtype=nl.float32, buffer=nl.sbuf)
    tt[...] = nisa.nc_transpose(ta, mask=on)
    nl.store(out_t, tt)
    return out, out_t


RING3 = [(0, 1), (1, 2), (2, 0)]


class Collectives(unittest.TestCase):
    def test_permute_moves_each_ranks_data_to_its_target(self):
        xs = [rand(128, 64, seed=r) for r in range(3)]
        res = nkisim.simulate_ranks(ring_shift_kernel, [{"x": x, "pairs": RING3} for x in xs])
        for r in range(3):  # rank r receives from its predecessor
            np.testing.assert_allclose(res[r].outputs[0], xs[(r - 1) % 3] + 1.0, rtol=1e-6)
            self.assertGreater(res[r].latency_us, 0)

    def test_legacy_ring_returns_home_after_n_steps(self):
        xs = [rand(64, 32, seed=10 + r) for r in range(3)]
        for steps, shift in ((1, 1), (2, 2), (3, 0)):
            res = nkisim.simulate_ranks(legacy_ring_kernel, [
                {"x": x, "pairs": RING3, "steps": steps} for x in xs])
            for r in range(3):
                np.testing.assert_array_equal(res[r].outputs[0], xs[(r - shift) % 3])

    def test_all_reduce_sum_and_max(self):
        xs = [rand(128, 32, seed=20 + r) for r in range(3)]
        for op, ref in ((nl.add, xs[0] + xs[1] + xs[2]), (nl.maximum, np.maximum.reduce(xs))):
            res = nkisim.simulate_ranks(all_reduce_kernel, [{"x": x, "op": op} for x in xs])
            for r in range(3):
                np.testing.assert_allclose(res[r].outputs[0], ref, rtol=1e-6, atol=1e-6)

    def test_all_gather_then_reduce_scatter(self):
        xs = [rand(64, 16, seed=30 + r) for r in range(2)]
        res = nkisim.simulate_ranks(gather_scatter_kernel, [{"x": x} for x in xs])
        full = np.concatenate(xs, axis=0)
        for r in range(2):
            g, p = res[r].outputs
            np.testing.assert_array_equal(g, full)
            # both ranks hold `full`; the sum is 2*full, rank r keeps rows block r
            np.testing.assert_allclose(p, 2 * full[64 * r:64 * (r + 1)], rtol=1e-6)

    def test_rank_ids_follow_the_group(self):
        x = rand(128, 8)
        res = nkisim.simulate_ranks(rank_id_kernel, [{"x": x}] * 2, rank_ids=[4, 7])
        np.testing.assert_allclose(res[0].outputs[0], 4 * x, rtol=1e-6)
        np.testing.assert_allclose(res[1].outputs[0], 7 * x, rtol=1e-6)

    def test_timing_only_group_matches_numerics_timing(self):
        x = rand(128, 256)
        args = [{"x": x, "pairs": RING3, "steps": 2}] * 3
        full = nkisim.simulate_ranks(legacy_ring_kernel, args)
        spec = [{"x": nkisim.TensorSpec((128, 256)), "pairs": RING3, "steps": 2}] * 3
        timing = nkisim.simulate_ranks(legacy_ring_kernel, spec, numerics=False)
        for r in range(3):
            self.assertAlmostEqual(timing[r].latency_us, full[r].latency_us, places=6)
            self.assertTrue(np.isnan(timing[r].outputs[0]).all())

    def test_collective_charges_dma_time(self):
        x = rand(128, 512)
        one = nkisim.simulate_ranks(legacy_ring_kernel, [
            {"x": x, "pairs": [(0, 1), (1, 0)], "steps": 1}] * 2)
        four = nkisim.simulate_ranks(legacy_ring_kernel, [
            {"x": x, "pairs": [(0, 1), (1, 0)], "steps": 4}] * 2)
        self.assertGreater(four[0].latency_us, one[0].latency_us)
        self.assertGreater(four[0].metrics["dma_transfer_count"],
                           one[0].metrics["dma_transfer_count"])


class Errors(unittest.TestCase):
    def test_single_rank_simulate_refuses_a_collective(self):
        with self.assertRaises(nkisim.NkiCompileError) as c:
            nkisim.simulate(ring_shift_kernel, {"x": rand(128, 8), "pairs": RING3})
        self.assertIn("simulate_ranks", str(c.exception))

    def test_rank_outside_the_group(self):
        with self.assertRaises(nkisim.NkiCompileError) as c:
            nkisim.simulate_ranks(ring_shift_kernel, [{"x": rand(128, 8), "pairs": RING3}] * 2)
        self.assertIn("rank 2 is not in the simulated group", str(c.exception))

    def test_a_rank_that_skips_a_collective_is_a_hang(self):
        with self.assertRaises(nkisim.NkiRuntimeError) as c:
            nkisim.simulate_ranks(uneven_kernel, [{"x": rand(128, 8), "rank": r}
                                                  for r in range(2)])
        self.assertIn("never completes", str(c.exception))

    def test_an_error_on_one_rank_ends_the_group(self):
        @nki.jit
        def k(x, rank):
            a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
            b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
            nisa.dma_copy(dst=a, src=x)
            cc.collective_permute(srcs=[a], dsts=[b], source_target_pairs=[(0, 1), (1, 0)])
            if rank == 1:
                nl.load(b[0:256, :])  # out of bounds: rank 1 fails after the exchange
            cc.collective_permute(srcs=[b], dsts=[a], source_target_pairs=[(0, 1), (1, 0)])
            return a

        with self.assertRaises(nkisim.NkiError) as c:
            nkisim.simulate_ranks(k, [{"x": rand(128, 8), "rank": r} for r in range(2)])
        self.assertIn("rank 1:", str(c.exception))

    def test_group_can_run_again_after_a_failure(self):
        with self.assertRaises(nkisim.NkiError):
            nkisim.simulate_ranks(uneven_kernel, [{"x": rand(128, 8), "rank": r}
                                                  for r in range(2)])
        x = rand(128, 8)
        res = nkisim.simulate(fma_kernel, {"a": x, "b": x})
        np.testing.assert_allclose(res.outputs[0], 2 * x, rtol=1e-6)


class PredicatedResults(unittest.TestCase):
    """A predicated instruction assigned to a tile writes only where its predicate holds
    (ring attention's causal blocks rely on it)."""

    def test_predicate_off_keeps_the_destination(self):
        x, y = rand(128, 32, seed=1), rand(128, 32, seed=2)
        out = nkisim.simulate(masked_assign_kernel, {"x": x, "y": y, "predicate": "off"})
        np.testing.assert_array_equal(out.outputs[0], x)

    def test_partial_predicate_writes_its_rows_only(self):
        x, y = rand(128, 32, seed=1), rand(128, 32, seed=2)
        out = nkisim.simulate(masked_assign_kernel, {"x": x, "y": y, "predicate": "rows"})
        np.testing.assert_array_equal(out.outputs[0][:64], y[:64])
        np.testing.assert_array_equal(out.outputs[0][64:], x[64:])


    def test_instructions_predicated_off_are_dropped(self):
        a, b = rand(128, 64, seed=3), rand(128, 128, seed=4)
        off = nkisim.simulate(predicated_matmul_kernel, {"a": a, "b": b, "on": False}).outputs
        np.testing.assert_allclose(off[0], a.T @ b, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(off[1], 0.0)
        on = nkisim.simulate(predicated_matmul_kernel, {"a": a, "b": b, "on": True}).outputs
        np.testing.assert_allclose(on[0], 2 * (a.T @ b), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(on[1], a.T)


class PrivatePaths(unittest.TestCase):
    def setUp(self):
        nkisim.activate()  # other tests may have deactivated the modules these import

    def test_tiled_offloaded_fma_is_dma_compute(self):
        a, b = rand(128, 64, seed=1), rand(128, 64, seed=2)
        out = nkisim.simulate(fma_kernel, {"a": a, "b": b}).outputs[0]
        np.testing.assert_allclose(out, a + b, rtol=1e-6)

    def test_internal_tile_index_is_the_index_expression_type(self):
        from neuronxcc.nki.compiler.backends.neuron.indexing import TileIndex
        self.assertIsInstance(nl.arange(8)[:, None], TileIndex)

    def test_private_api_without_public_equivalent_raises_when_called(self):
        from neuronxcc.nki._private.private_api import row_tiled_mm_kernel
        from neuronxcc.nki.compiler.backends.neuron.tensor import local_tile

        @nki.jit
        def k(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            row_tiled_mm_kernel("RowTiledMM", a, a, out, n_tile=512)
            return out

        with self.assertRaises(nkisim.NkiCompileError) as c:
            nkisim.simulate(k, {"a": rand(128, 64)})
        self.assertIn("no public NKI equivalent", str(c.exception))
        with self.assertRaises(nkisim.NkiError):
            nkisim.simulate(nki.jit(lambda a: local_tile(a)), {"a": rand(128, 64)})

    def test_private_core_barrier_and_sendrecv(self):
        from neuronxcc.nki._private.private_api import core_barrier, sendrecv

        @nki.jit
        def k(a, use_sendrecv):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            n = nl.num_programs(axes=0) if nl.program_ndim() else 1
            t = nl.load(a)
            if use_sendrecv:
                r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
                sendrecv(send_to_rank=0, recv_from_rank=0, src=t, dst=r, pipe_id=1)
                t = r
            nl.store(out, t)
            core_barrier(out, tuple(range(n)))
            return out

        a = rand(128, 8)
        res = nkisim.simulate(k, {"a": a, "use_sendrecv": False})  # a barrier of one program
        np.testing.assert_array_equal(res.outputs[0], a)
        # an exchange with itself is a copy
        res = nkisim.simulate(k, {"a": a, "use_sendrecv": True})
        np.testing.assert_array_equal(res.outputs[0], a)
        # a direct run cannot suspend one program for another: the replay does (test_sync)
        with self.assertRaises(nkisim.NkiCompileError) as c:
            nkisim.simulate(k, {"a": a, "use_sendrecv": False}, grid=(2,))
        self.assertIn("needs the trusted replay", str(c.exception))

    def test_public_core_barrier_is_never_a_silent_no_op(self):
        def kernel(cores):
            @nki.jit
            def k(a):
                out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
                nl.store(out, nl.load(a))
                nisa.core_barrier(out, cores)
                return out
            return k

        @nki.jit
        def on_chip(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            t = nl.load(a)
            acc = nl.zeros(a.shape, dtype=nl.float32, buffer=nl.psum)
            nisa.core_barrier(acc, (0, 1))  # HBM or SBUF only
            nl.store(out, t)
            return out

        a = rand(128, 8)
        with self.assertRaises(nkisim.NkiCompileError) as c:
            nkisim.simulate(on_chip, {"a": a})
        self.assertIn("data must be a tensor in HBM", str(c.exception))
        for target, cores, message in (
                ("trn2", (0, 1), "in a launch of one program"),
                ("trn3", (0, 1), "in a launch of one program"),
                ("trn2", (0,), "supports only cores=(0, 1)"),
                ("trn2", 7, "must be a tuple of core ids"),
                ("trn2", None, "needs cores"),
                ("trn1", (0, 1), "NeuronCore-v3 or newer")):
            with self.assertRaises(nkisim.NkiCompileError, msg=(target, cores)) as c:
                nkisim.simulate(kernel(cores), {"a": a}, target=target)
            self.assertIn(message, str(c.exception))


# an aws-neuron/nki-samples checkout of the neuron-team kernels (optional)
SAMPLES = os.environ.get("NKI_SAMPLES_NEURON_TEAM", "/work/samples/neuron-team-kernels")
RING_FILE = os.path.join(SAMPLES, "contributed", "neuron-team-kernels", "attention.py")


@unittest.skipUnless(os.path.isfile(RING_FILE), "nki-samples neuron-team kernels not present")
class SampleRingAttention(unittest.TestCase):
    """The contributed ring attention backward kernel on two ranks against numpy: each rank's
    dK/dV need the other rank's Q/dY, and its dQ comes back around the ring."""

    def test_ring_attention_bwd_matches_numpy(self):
        sys.path.insert(0, os.path.join(_util.SIM_DIR))
        import coverage_samples as cs
        nkisim.activate()
        if not any(isinstance(f, cs._HostStubFinder) for f in sys.meta_path):
            sys.meta_path.append(cs._HostStubFinder())
        kernel = cs._import(RING_FILE).ring_attention_bwd
        rng = np.random.default_rng(1)
        S, d, R = 512, 128, 2
        Q, K, V, dY = (nkisim.to_bf16(rng.uniform(-1, 1, (d, R * S)).astype(np.float32))
                       for _ in range(4))
        scale = 1 / np.sqrt(d)
        s = scale * Q.T @ K
        s = np.where(np.arange(R * S)[None, :] <= np.arange(R * S)[:, None], s, -np.inf)
        m = s.max(1, keepdims=True)
        P = np.exp(s - m)
        den = P.sum(1, keepdims=True)
        P /= den
        lse = (m + np.log(den))[:, 0]
        O = nkisim.to_bf16(P @ V.T)
        dS = P * (dY.T @ V - (dY.T * O).sum(1, keepdims=True))
        ref = {"dq": scale * dS @ K.T, "dk": scale * dS.T @ Q.T, "dv": P.T @ dY.T}
        ins = []
        for r in range(R):
            sl = slice(r * S, (r + 1) * S)
            ins.append(dict(
                q_ref=Q[None, None, :, sl], k_ref=K[None, None, :, sl], v_ref=V[None, None, :, sl],
                o_ref=O.T[None, None, :, sl].copy(), dy_ref=dY[None, None, :, sl],
                lse_ref=lse[sl].reshape(S // 128, 128).T[None, None].astype(np.float32),
                seed_ref=None, rank_id=r, src_tgt_pairs=[(0, 1), (1, 0)], use_causal_mask=True,
                mixed_precision=True))
        dts = {k: "bfloat16" for k in ("q_ref", "k_ref", "v_ref", "o_ref", "dy_ref")}
        res = nkisim.simulate_ranks(kernel, ins, grid=(1, 1), input_dtypes=dts)
        for r in range(R):
            sl = slice(r * S, (r + 1) * S)
            for name, got in zip(("dq", "dk", "dv"), res[r].outputs):
                want = ref[name][sl].T
                err = np.abs(got[0, 0] - want).max() / np.abs(want).max()
                self.assertLess(err, 0.02, "rank %d %s" % (r, name))


if __name__ == "__main__":
    unittest.main()
