"""The physical cores of a logical NeuronCore (machine/cores.py): which programs run where,
per-core queues, the slowest core's end as the latency, and the harness's --lnc."""
import json
import os
import shutil
import tempfile
import unittest

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.language as nl
from nkisim.machine import cores

ROWS, COLS = 2048, 1024


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@nki.jit
def split_add(a, b):
    """DMA-bound: each program adds its share of the rows, 128 at a time."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows = a.shape[0] // nl.num_programs(0)
    base = nl.program_id(0) * rows
    for t in nl.affine_range(rows // 128):
        r = base + t * 128
        x = nl.load(a[r:r + 128, :])
        y = nl.load(b[r:r + 128, :])
        nl.store(out[r:r + 128, :], value=nl.add(x, y))
    return out


@nki.jit
def uneven_add(a, b):
    """Program 0 adds the first quarter of the rows, program 1 the other three quarters."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    quarter = a.shape[0] // 4
    pid = nl.program_id(0)
    lo = 0 if pid == 0 else quarter
    hi = quarter if pid == 0 else a.shape[0]
    for t in nl.affine_range((hi - lo) // 128):
        r = lo + t * 128
        nl.store(out[r:r + 128, :],
                 value=nl.add(nl.load(a[r:r + 128, :]), nl.load(b[r:r + 128, :])))
    return out


@nki.jit
def weighted_add(a, b):
    """A 1-D grid of 4 programs; program p adds (p + 1) blocks of 128 rows (p = 0..3 covers
    rows 0..1280 in order), so each core's load tells which programs it ran."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    p = nl.program_id(0)
    start = (p * (p + 1) // 2) * 128
    for t in nl.affine_range(p + 1):
        r = start + t * 128
        nl.store(out[r:r + 128, :],
                 value=nl.add(nl.load(a[r:r + 128, :]), nl.load(b[r:r + 128, :])))
    return out


class Placement(unittest.TestCase):
    def test_nc_axis_digit_names_the_core(self):
        # kernel[nl.nc(2), 2]: programs [0, *] on core 0, [1, *] on core 1
        p = cores.Placement((2, 2), 2, cores.grid_layout((nl.nc(2), 2)))
        self.assertEqual([p.core_of((i, j)) for i in range(2) for j in range(2)], [0, 0, 1, 1])
        # spmd_dim(nc(2), 2): the first two ids on core 0; spmd_dim(2, nc(2)): even ids
        major = cores.Placement((4,), 2, cores.grid_layout((nl.spmd_dim(nl.nc(2), 2),)))
        minor = cores.Placement((4,), 2, cores.grid_layout((nl.spmd_dim(2, nl.nc(2)),)))
        self.assertEqual([major.core_of((i,)) for i in range(4)], [0, 0, 1, 1])
        self.assertEqual([minor.core_of((i,)) for i in range(4)], [0, 1, 0, 1])
        self.assertEqual(int(nl.spmd_dim(3, nl.nc(2))), 6)

    def test_lnc_launch_and_plain_grids(self):
        self.assertEqual([cores.Placement((2,), 2).core_of((i,)) for i in range(2)], [0, 1])
        plain = cores.Placement((2, 2), 2)
        self.assertEqual({plain.core_of((i, j)) for i in range(2) for j in range(2)}, {0})
        self.assertIn("no nl.nc axis", plain.note)
        one = cores.Placement((2,), 1, cores.grid_layout((nl.nc(2),)))
        self.assertEqual({one.core_of((i,)) for i in range(2)}, {0})

    def test_lnc_defaults_and_refusals(self):
        self.assertEqual([cores.lnc_for(t) for t in ("trn1", "trn2", "trn3")], [1, 2, 2])
        with self.assertRaisesRegex(ValueError, "trn1 has no logical NeuronCore of degree 2"):
            cores.lnc_for("trn1", 2)
        with self.assertRaises(nkisim.NkiCompileError):
            nl.nc(4)


class TwoCores(unittest.TestCase):
    def setUp(self):
        self.a, self.b = rand(ROWS, COLS, seed=1), rand(ROWS, COLS, seed=2)

    def run_add(self, kernel=split_add, lnc=None, grid=(2,), target="trn2"):
        return nkisim.simulate(kernel, {"a": self.a, "b": self.b}, target=target, grid=grid,
                               lnc=lnc)

    def test_two_programs_twice_as_fast_with_identical_results(self):
        one, two = self.run_add(lnc=1), self.run_add()  # trn2 defaults to LNC=2
        self.assertEqual(two.lnc, 2)
        self.assertEqual(one.bottleneck_engine, "DMA-bound")
        speedup = one.latency_us / two.latency_us
        self.assertGreater(speedup, 1.8)
        self.assertLessEqual(speedup, 2.0 + 1e-9)
        np.testing.assert_array_equal(one.outputs[0], two.outputs[0])
        np.testing.assert_array_equal(two.outputs[0], self.a + self.b)
        self.assertEqual(len(two.core_end_us), 2)
        self.assertAlmostEqual(two.latency_us, max(two.core_end_us))
        # the same work counts once: bytes and instructions do not depend on the cores
        self.assertEqual(one.metrics["hbm_read_bytes"], two.metrics["hbm_read_bytes"])
        self.assertEqual(one.instructions, two.instructions)
        self.assertLess(two.roofline["floor_dma_us"], 0.51 * one.roofline["floor_dma_us"])

    def test_imbalance_shows_in_core_end(self):
        res = self.run_add(uneven_add)
        np.testing.assert_array_equal(res.outputs[0], self.a + self.b)
        c0, c1 = res.core_end_us
        self.assertGreater(c1, 2.5 * c0)
        self.assertAlmostEqual(res.latency_us, c1)

    def test_nc_axis_splits_a_larger_grid(self):
        major = self.run_add(weighted_add, grid=(nl.spmd_dim(nl.nc(2), 2),))
        minor = self.run_add(weighted_add, grid=(nl.spmd_dim(2, nl.nc(2)),))
        np.testing.assert_array_equal(major.outputs[0][:1280], (self.a + self.b)[:1280])
        # core 1 runs programs 2 and 3 (7 blocks against 3) or 1 and 3 (6 against 4)
        r_major = major.core_end_us[1] / major.core_end_us[0]
        r_minor = minor.core_end_us[1] / minor.core_end_us[0]
        self.assertGreater(r_major, r_minor)
        self.assertGreater(r_minor, 1.2)

    def test_plain_grid_stays_on_one_core_and_says_so(self):
        res = self.run_add(weighted_add, grid=(4,))
        self.assertEqual(res.core_end_us[1], 0.0)
        self.assertTrue(any("no nl.nc axis" in e for e in res.compiler_effects))
        one = self.run_add(weighted_add, grid=(4,), lnc=1)
        self.assertAlmostEqual(res.latency_us, one.latency_us)

    def test_ungridded_kernel_unchanged_by_lnc(self):
        one = self.run_add(grid=None, lnc=1)
        two = self.run_add(grid=None, lnc=2)
        self.assertEqual(one.latency_us, two.latency_us)
        self.assertEqual(one.metrics, two.metrics)

    def test_trn1_refuses_lnc2(self):
        with self.assertRaisesRegex(ValueError, "LNC=1 only"):
            self.run_add(target="trn1", lnc=2)


KERNEL = '''
import nki
import nki.language as nl


@nki.jit
def split_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows = a.shape[0] // nl.num_programs(0)
    base = nl.program_id(0) * rows
    for t in nl.affine_range(rows // 128):
        r = base + t * 128
        x = nl.load(a[r:r + 128, :])
        y = nl.load(b[r:r + 128, :])
        nl.store(out[r:r + 128, :], value=nl.add(x, y))
    return out
'''

PROBLEM = '''
import numpy as np
GRID = (2,)


def inputs(seed):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((1024, 1024), dtype=np.float32),
            "b": rng.standard_normal((1024, 1024), dtype=np.float32)}


def reference(a, b):
    return a + b
'''


class HarnessLnc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from tests.python.harness.util import autocomp_harness
        cls.harness = autocomp_harness
        cls.dir = tempfile.mkdtemp(prefix="test-cores-")
        for name, text in (("k.py", KERNEL), ("p.py", PROBLEM)):
            with open(os.path.join(cls.dir, name), "w") as f:
                f.write(text)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def run_h(self, *extra):
        out = self.harness.run(["profile", "--kernel", os.path.join(self.dir, "k.py"),
                                "--problem", os.path.join(self.dir, "p.py"),
                                "--no-ref-cache"] + list(extra))
        json.dumps(out, allow_nan=False)
        return out

    def test_lnc_option(self):
        default, one = self.run_h("--target", "trn2"), self.run_h("--target", "trn2", "--lnc", "1")
        self.assertEqual((default["status"], one["status"]), ("ok", "ok"), (default, one))
        self.assertEqual((default["lnc"], one["lnc"]), (2, 1))
        self.assertEqual((default["receipt"]["lnc"], one["receipt"]["lnc"]), (2, 1))
        self.assertEqual(len(default["profile"]["core_end_us"]), 2)
        self.assertEqual(len(one["profile"]["core_end_us"]), 1)
        t2 = default["profile"]["metrics"]["total_time"]
        t1 = one["profile"]["metrics"]["total_time"]
        self.assertGreater(t1 / t2, 1.7)
        # the LNC launch's floor is that of both cores (else it would be "implausible")
        self.assertAlmostEqual(default["profile"]["floor"]["physical_floor_us"] * 2,
                               one["profile"]["floor"]["physical_floor_us"])

    def test_trn1_refuses_lnc2(self):
        out = self.run_h("--target", "trn1", "--lnc", "2")
        self.assertEqual(out["status"], "failed")
        self.assertEqual(out["failure"]["kind"], "harness_error")
        self.assertIn("trn1 has no logical NeuronCore of degree 2", out["failure"]["message"])


if __name__ == "__main__":
    unittest.main()
