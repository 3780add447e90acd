"""Pure pieces of the harness: output comparison, latency statistics, spread gate,
reference cache, kernel parameter matching."""
import os
import unittest

import numpy as np

from tests.python.harness import util
from harnesslib import compare, stats
from harnesslib.kernel import params_match
from harnesslib.refcache import RefCache, cache_key


def bf16(x):
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


class Compare(unittest.TestCase):
    def setUp(self):
        self.ref = np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8)

    def test_exact_match(self):
        ok, mx, rel, msg = compare.compare_outputs([self.ref.copy()], [self.ref])
        self.assertTrue(ok)
        self.assertEqual((mx, rel, msg), (0.0, 0.0, ""))

    def test_errors_are_measured(self):
        out = self.ref + np.float32(1e-3)
        ok, mx, rel, msg = compare.compare_outputs([out], [self.ref])
        self.assertFalse(ok)
        self.assertAlmostEqual(mx, 1e-3, places=6)
        expected_rel = np.linalg.norm(out.astype(np.float64) - self.ref) / np.linalg.norm(self.ref)
        self.assertAlmostEqual(rel, expected_rel, places=9)
        self.assertIn("rtol=0.0001 atol=1e-05", msg)
        ok, *_ = compare.compare_outputs([out], [self.ref], atol=2e-3)
        self.assertTrue(ok)
        ok, *_ = compare.compare_outputs([out], [self.ref], rtol=[0.0], atol=[5e-4])
        self.assertFalse(ok)

    def test_count_shape_dtype(self):
        self.assertIn("2 output(s)", compare.compare_outputs([self.ref, self.ref], [self.ref])[3])
        self.assertIn("shape (8, 4)", compare.compare_outputs([self.ref[:, :4]], [self.ref])[3])
        msg = compare.compare_outputs([self.ref.astype(np.float16)], [self.ref])[3]
        self.assertIn("dtype float16, expected float32", msg)
        msg = compare.compare_outputs([self.ref.astype(np.int32)], [self.ref.astype(np.int64)])[3]
        self.assertIn("dtype int32, expected int64", msg)

    def test_nan_means_unwritten(self):
        out = self.ref.copy()
        out[3, 4:] = np.nan
        ok, _, _, msg = compare.compare_outputs([out], [self.ref])
        self.assertFalse(ok)
        self.assertIn("4 non-finite value(s) (4 NaN; first at index (3, 4))", msg)
        self.assertIn("never wrote", msg)
        inf = self.ref.copy()
        inf[0, 0] = np.inf
        self.assertNotIn("never wrote", compare.compare_outputs([inf], [self.ref])[3])

    def test_reference_non_finite_must_match(self):
        ref = self.ref.copy()
        ref[0, 0] = np.inf
        self.assertTrue(compare.compare_outputs([ref.copy()], [ref])[0])
        out = ref.copy()
        out[0, 0] = -np.inf
        self.assertFalse(compare.compare_outputs([out], [ref])[0])

    def test_bf16_by_name(self):
        ref = np.float32(np.random.default_rng(0).standard_normal((4, 4)))
        out = bf16(ref)
        ok, *_ = compare.compare_outputs([out], [ref], out_names=["bfloat16"],
                                         expected_names=["bfloat16"])
        self.assertTrue(ok)
        # A device that cannot name bf16 reports float32: accepted only for bf16 values.
        ok, *_ = compare.compare_outputs([out], [ref], expected_names=["bfloat16"])
        self.assertTrue(ok)
        ok, _, _, msg = compare.compare_outputs([ref], [ref], expected_names=["bfloat16"])
        self.assertFalse(ok)
        self.assertIn("not bfloat16 values", msg)
        ok, _, _, msg = compare.compare_outputs([out], [ref], out_names=["bfloat16"])
        self.assertFalse(ok)
        self.assertIn("dtype bfloat16, expected float32", msg)

    def test_default_tolerances(self):
        self.assertEqual(compare.default_tolerance("float32"), (1e-4, 1e-5))
        self.assertEqual(compare.default_tolerance("bfloat16"), (2e-2, 1e-2))
        self.assertEqual(compare.default_tolerance("int32"), (0.0, 0.0))
        ints = np.arange(6, dtype=np.int32)
        self.assertFalse(compare.compare_outputs([ints + 1], [ints])[0])


def whole_array_compare(out, ref, rt, at):
    """The comparison rule on whole arrays at once (float64), as an oracle for the chunked
    implementation: (ok, max_abs, diff_sq, ref_sq, kind of problem or None, first index)."""
    o = out.astype(np.float64)
    r = ref.astype(np.float64)
    stray = ~np.isfinite(o) & np.isfinite(r)
    if stray.any():
        return False, None, None, None, "stray", tuple(np.argwhere(stray)[0])
    both = ~np.isfinite(o) & ~np.isfinite(r)
    if both.any() and not np.array_equal(o[both], r[both], equal_nan=True):
        return False, None, None, None, "nonfinite", None
    fin = np.isfinite(r)
    d = np.abs(o[fin] - r[fin])
    over = d > at + rt * np.abs(r[fin])
    first = tuple(np.argwhere(fin)[np.argmax(over)]) if over.any() else None
    return (not over.any(), float(d.max()) if d.size else 0.0, float(np.dot(d, d)),
            float(np.dot(r[fin], r[fin])), "over" if over.any() else None, first)


class ChunkedCompare(unittest.TestCase):
    """compare_outputs works through outputs in chunks (no whole-array float64 copies); with
    a tiny chunk size every case crosses chunk borders and must agree with the whole-array
    rule."""

    def setUp(self):
        self.saved = compare.CHUNK
        compare.CHUNK = 7

    def tearDown(self):
        compare.CHUNK = self.saved

    def check(self, out, ref, rt, at):
        ok, mx, rel, msg = compare.compare_outputs([out], [ref], rtol=rt, atol=at)
        w_ok, w_mx, w_dsq, w_rsq, kind, first = whole_array_compare(out, ref, rt, at)
        self.assertEqual(ok, w_ok, msg)
        if kind == "stray":
            self.assertIn("non-finite value(s)", msg)
            self.assertIn("first at index %s" % (tuple(int(x) for x in first),), msg)
            return
        if kind == "nonfinite":
            self.assertIn("non-finite values differ", msg)
            return
        self.assertAlmostEqual(mx, w_mx, places=12)
        want_rel = (w_dsq ** 0.5) / (w_rsq ** 0.5) if w_rsq > 0 else w_dsq ** 0.5
        self.assertAlmostEqual(rel, want_rel, places=9)
        if kind == "over":
            self.assertIn("at %s:" % (tuple(int(x) for x in first),), msg)
            n_fin = int(np.isfinite(ref).sum())
            self.assertIn(" of %d values outside" % n_fin, msg)

    def test_agrees_with_whole_array_rule(self):
        rng = np.random.default_rng(3)
        for trial in range(60):
            shape = [(5, 9), (3, 4, 5), (50,), (1,), (0, 3)][trial % 5]
            ref = rng.standard_normal(shape).astype(np.float32)
            out = ref.copy()
            if trial % 3:
                out = out + rng.standard_normal(shape).astype(np.float32) * np.float32(
                    [1e-6, 1e-3, 1e-1][trial % 3])
            if ref.size and trial % 4 == 1:
                ref.reshape(-1)[rng.integers(ref.size)] = np.inf
                out.reshape(-1)[rng.integers(out.size)] = np.inf
            if ref.size and trial % 7 == 2:
                out.reshape(-1)[rng.integers(out.size, size=3)] = np.nan
            rt, at = [(0.0, 0.0), (1e-4, 1e-5), (2e-2, 1e-2)][trial % 3]
            with self.subTest(trial=trial):
                self.check(out, ref, rt, at)

    def test_exact_problems_keep_equal_chunks_cheap_and_right(self):
        ref = np.arange(40, dtype=np.float32).reshape(5, 8)
        out = ref.copy()
        ok, mx, rel, msg = compare.compare_outputs([out], [ref], rtol=0.0, atol=0.0)
        self.assertEqual((ok, mx, rel, msg), (True, 0.0, 0.0, ""))
        out[4, 6] = 0.5
        ok, mx, rel, msg = compare.compare_outputs([out], [ref], rtol=0.0, atol=0.0)
        self.assertFalse(ok)
        self.assertIn("1 of 40 values outside", msg)
        self.assertIn("at (4, 6): got 0.5, want 38.0", msg)
        self.assertAlmostEqual(mx, 37.5)
        self.assertAlmostEqual(rel, 37.5 / float(np.linalg.norm(ref.astype(np.float64))))

    def test_bf16_check_crosses_chunks(self):
        ref = bf16(np.linspace(-3, 3, 50, dtype=np.float32))
        out = ref.copy()
        ok, *_ = compare.compare_outputs([out], [ref], out_names=["float32"],
                                         expected_names=["bfloat16"])
        self.assertTrue(ok)
        out[45] = np.float32(1.0000001)
        ok, _, _, msg = compare.compare_outputs([out], [ref], out_names=["float32"],
                                                expected_names=["bfloat16"])
        self.assertFalse(ok)
        self.assertIn("not bfloat16 values", msg)


class Stats(unittest.TestCase):
    def test_summarize(self):
        s = stats.summarize([3.0, 1.0, 2.0, 10.0])
        self.assertEqual((s["min"], s["median"], s["max"]), (1.0, 2.5, 10.0))
        self.assertEqual(s["samples"], [3.0, 1.0, 2.0, 10.0])
        self.assertIsNone(stats.summarize([])["median"])

    def test_spread_gate_retries_until_tight(self):
        attempts = [[100, 110, 105], [100, 100.5, 100.2], [1, 2, 3]]
        calls = []

        def measure():
            calls.append(1)
            return attempts[len(calls) - 1]
        samples, tries, spread = stats.measure_with_spread_gate(measure)
        self.assertEqual(tries, 2)
        self.assertEqual(samples, [100, 100.5, 100.2])
        self.assertLess(spread, 0.01)

    def test_spread_gate_is_bounded_and_keeps_best(self):
        seq = iter([[100, 120], [100, 104], [100, 150], [100, 101]])
        samples, tries, spread = stats.measure_with_spread_gate(lambda: next(seq), max_tries=3)
        self.assertEqual(tries, 3)
        self.assertEqual(samples, [100, 104])


class RefCacheTest(unittest.TestCase):
    def test_roundtrip_and_threshold(self):
        with util.TempDir() as d:
            cache = RefCache(d)
            key = cache_key("abc", 3)
            arrays = (np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(2, dtype=np.int64))
            self.assertFalse(cache.put(key, arrays, seconds=0.1))   # too cheap to keep
            self.assertIsNone(cache.get(key))
            self.assertTrue(cache.put(key, arrays, seconds=5.0))
            got = cache.get(key)
            self.assertEqual(len(got), 2)
            np.testing.assert_array_equal(got[0], arrays[0])
            self.assertEqual(got[1].dtype, np.int64)
        self.assertIsNone(RefCache(None).get(key))

    def test_key_depends_on_problem_seed_and_small(self):
        k = cache_key("abc", 0)
        self.assertNotEqual(k, cache_key("abd", 0))
        self.assertNotEqual(k, cache_key("abc", 1))
        old = os.environ.get("AUTOCOMP_SMALL")
        os.environ["AUTOCOMP_SMALL"] = "1"
        try:
            self.assertNotEqual(k, cache_key("abc", 0))
        finally:
            if old is None:
                os.environ.pop("AUTOCOMP_SMALL")
            else:
                os.environ["AUTOCOMP_SMALL"] = old


class ParamsMatch(unittest.TestCase):
    def test_matching(self):
        def k(a, b, scale=1.0):
            return a
        self.assertTrue(params_match(k, ["a", "b"]))
        self.assertTrue(params_match(k, ["b", "a", "scale"]))
        self.assertFalse(params_match(k, ["a"]))
        self.assertFalse(params_match(k, ["a", "b", "c"]))

        def kw(a, **rest):
            return a
        self.assertTrue(params_match(kw, ["a", "z"]))


if __name__ == "__main__":
    unittest.main()
