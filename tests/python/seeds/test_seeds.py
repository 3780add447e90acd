"""Every seed kernel verifies on the simulator through the harness (at AUTOCOMP_SMALL=1
shapes, so the suite stays within a few minutes), and every optimized kernel is faster than
its naive kernel in simulated latency. Full-shape figures come from bench_seeds.py."""
import glob
import os
import unittest

from tests.python.harness import util
from tests.python.harness.util import autocomp_harness

# Seeds blocked by a simulator feature listed in seeds/SIM_GAPS.md: a failure there is
# reported as a skip naming the gap; once the simulator supports it the test passes normally.
SEED_NAMES = sorted(os.path.basename(os.path.dirname(p))
                    for p in glob.glob(os.path.join(util.SEEDS_DIR, "*", "problem.py")))

_saved_env = None


def setUpModule():
    global _saved_env
    _saved_env = os.environ.get("AUTOCOMP_SMALL")
    os.environ["AUTOCOMP_SMALL"] = "1"


def tearDownModule():
    if _saved_env is None:
        os.environ.pop("AUTOCOMP_SMALL", None)
    else:
        os.environ["AUTOCOMP_SMALL"] = _saved_env


def harness(command, seed, kernel, extra=()):
    folder = os.path.join(util.SEEDS_DIR, seed)
    return autocomp_harness.run([command, "--kernel", os.path.join(folder, kernel + ".py"),
                                 "--problem", os.path.join(folder, "problem.py"),
                                 "--no-ref-cache"] + list(extra))


class SeedLayout(unittest.TestCase):
    def test_at_least_ten_workloads(self):
        self.assertGreaterEqual(len(SEED_NAMES), 10, SEED_NAMES)

    def test_each_seed_has_problem_naive_readme(self):
        for name in SEED_NAMES:
            for f in ("problem.py", "naive.py", "README.md"):
                self.assertTrue(os.path.isfile(os.path.join(util.SEEDS_DIR, name, f)), (name, f))

    def test_required_optimized_kernels(self):
        for name in ("rmsnorm", "gemm", "softmax", "layernorm", "transpose"):
            self.assertTrue(os.path.isfile(os.path.join(util.SEEDS_DIR, name, "optimized.py")), name)

    def test_both_namespaces_in_use(self):
        texts = []
        for p in glob.glob(os.path.join(util.SEEDS_DIR, "*", "*.py")):
            with open(p) as f:
                texts.append(f.read())
        self.assertTrue(any("import neuronxcc.nki" in t for t in texts))
        self.assertTrue(any("\nimport nki\n" in t for t in texts))


class SeedKernelsVerify(unittest.TestCase):
    def _check(self, seed, kernel):
        out = harness("verify", seed, kernel, ["--seeds", "0"])
        self.assertEqual(out["status"], "ok", "%s/%s: %s" % (seed, kernel, out.get("failure")))
        self.assertTrue(out["verify"]["correct"])


def _add_verify_tests():
    for name in SEED_NAMES:
        for kernel in ("naive", "optimized"):
            if not os.path.isfile(os.path.join(util.SEEDS_DIR, name, kernel + ".py")):
                continue

            def test(self, name=name, kernel=kernel):
                self._check(name, kernel)
            setattr(SeedKernelsVerify, "test_%s_%s" % (name, kernel), test)


_add_verify_tests()


# Ranked at full shape: at the small shape cumsum has two row bands of two chunks, and the
# naive chunked scan pipelines its loads with its scans (the scheduler interleaves the
# independent bands) as well as the whole-row scan does; the optimization shows at scale.
FULL_SHAPE_RANKING = {"cumsum"}


class OptimizedIsFaster(unittest.TestCase):
    def test_optimized_beats_naive(self):
        for name in SEED_NAMES:
            if not os.path.isfile(os.path.join(util.SEEDS_DIR, name, "optimized.py")):
                continue
            with self.subTest(seed=name):
                lat = {}
                for kernel in ("naive", "optimized"):
                    if name in FULL_SHAPE_RANKING:
                        os.environ.pop("AUTOCOMP_SMALL", None)
                    try:
                        out = harness("benchmark", name, kernel, ["--iters", "1"])
                    finally:
                        os.environ["AUTOCOMP_SMALL"] = "1"
                    self.assertEqual(out["status"], "ok", out.get("failure"))
                    lat[kernel] = out["benchmark"]["latency_us"]["median"]
                self.assertLess(lat["optimized"], lat["naive"], (name, lat))


if __name__ == "__main__":
    unittest.main()


# Small, plausible bugs in seed kernels that verification must catch at the seeds' tolerances.
MUTATIONS = [
    ("rmsnorm", "naive", "1.0 / hidden", "1.0 / (hidden + 1)"),
    ("layernorm", "optimized", "EPS = 1e-5", "EPS = 1e-2"),
    ("gemm", "optimized", "for k in range(K // TILE_K):", "for k in range(K // TILE_K - 1):"),
    ("cumsum", "naive", "nisa.tensor_copy(dst=carry, src=scanned[:, F - 1:F])", "pass"),
    ("softmax", "optimized", "operand0=inv_sum", "operand0=row_sum"),
    ("transpose", "optimized", "bands[s][:, ci * T:(ci + 1) * T]", "bands[0][:, ci * T:(ci + 1) * T]"),
    ("attention", "optimized", "data=o_psum, op0=nl.multiply, operand0=inv_sum",
     "data=o_psum, op0=nl.multiply, operand0=bias"),
    ("mamba", "optimized", "scale=a_tile[:, n:n + 1]", "scale=a_tile[:, 0:1]"),
    ("rope", "optimized", "operand0=-1.0", "operand0=1.0"),
]


class MutantsAreCaught(unittest.TestCase):
    def test_mutants_fail_verification(self):
        for name, kernel, old, new in MUTATIONS:
            with self.subTest(seed=name, mutation=new):
                src = os.path.join(util.SEEDS_DIR, name, kernel + ".py")
                with open(src) as f:
                    text = f.read()
                self.assertIn(old, text)
                with util.TempDir() as d:
                    mutant = util.write(d, "mutant.py", text.replace(old, new))
                    out = autocomp_harness.run([
                        "verify", "--kernel", mutant, "--seeds", "0", "--no-ref-cache",
                        "--problem", os.path.join(util.SEEDS_DIR, name, "problem.py")])
                self.assertEqual(out["status"], "failed", (name, new))
                self.assertEqual(out["failure"]["kind"], "mismatch", out["failure"])
