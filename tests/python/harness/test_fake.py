"""Device `fake`: the scheduler test double (no files read, waits of --fake-ms)."""
import os
import shutil
import subprocess
import time
import unittest

from tests.python.harness import util
from tests.python.harness.util import autocomp_harness


class FakeDevice(unittest.TestCase):
    def test_evaluate_counts_and_durations(self):
        t = time.perf_counter()
        out = autocomp_harness.run(["evaluate", "--device", "fake", "--kernel", "none.py",
                                    "--problem", "none.py", "--fake-ms", "20", "--warmup", "1",
                                    "--iters", "3", "--seeds", "0,1"])
        elapsed = time.perf_counter() - t
        self.assertEqual(out["status"], "ok", out)
        self.assertEqual(out["device"], "fake")
        self.assertEqual(out["harness_version"], autocomp_harness.harness_version("fake"))
        self.assertTrue(out["verify"]["correct"])
        self.assertEqual([s["seed"] for s in out["verify"]["seeds"]], [0, 1])
        lat = out["benchmark"]["latency_us"]
        self.assertEqual(len(lat["samples"]), 3)
        self.assertGreaterEqual(lat["min"], 20000.0)
        self.assertEqual(out["benchmark"]["method"], "fake-sleep")
        self.assertIn("total_time", out["profile"]["metrics"])
        # 2 seeds + 1 warmup + 3 iterations + 1 profile = 7 waits of 20 ms
        self.assertGreaterEqual(elapsed, 0.14)

    def test_fake_failure(self):
        out = autocomp_harness.run(["evaluate", "--device", "fake", "--kernel", "k", "--problem",
                                    "p", "--fake-ms", "0", "--fake-fail", "compile_error"])
        self.assertEqual(out["status"], "failed")
        self.assertEqual(out["failure"]["kind"], "compile_error")
        self.assertEqual(out["failure"]["stage"], "verify")
        out = autocomp_harness.run(["benchmark", "--device", "fake", "--kernel", "k", "--problem",
                                    "p", "--fake-ms", "0", "--fake-fail", "timeout"])
        self.assertEqual((out["failure"]["kind"], out["failure"]["stage"]), ("timeout", "benchmark"))
        out = autocomp_harness.run(["verify", "--device", "fake", "--kernel", "k", "--problem",
                                    "p", "--fake-fail", "bogus"])
        self.assertEqual(out["failure"]["kind"], "harness_error")

    def test_source_digest_follows_code(self):
        with util.TempDir() as d:
            path = util.write(d, "m.py", "x = 1\n")
            first = autocomp_harness.source_digest(d)
            self.assertEqual(first, autocomp_harness.source_digest(d))
            util.write(d, "m.py", "x = 2\n")
            self.assertNotEqual(first, autocomp_harness.source_digest(d))
            self.assertEqual(autocomp_harness.source_digest(path), autocomp_harness.source_digest(d))

    def test_source_digest_follows_a_move_between_subfolders(self):
        with util.TempDir() as d:
            os.makedirs(os.path.join(d, "a"))
            os.makedirs(os.path.join(d, "b"))
            util.write(os.path.join(d, "a"), "m.py", "x = 1\n")
            first = autocomp_harness.source_digest(d)
            os.rename(os.path.join(d, "a", "m.py"), os.path.join(d, "b", "m.py"))
            self.assertNotEqual(first, autocomp_harness.source_digest(d))

    def test_cli_last_line(self):
        lines, _, code = util.run_cli(["benchmark", "--device", "fake", "--kernel", "k",
                                       "--problem", "p", "--fake-ms", "1", "--iters", "2"])
        self.assertEqual(code, 0)
        out = util.last_json(lines)
        self.assertEqual(out["command"], "benchmark")
        self.assertNotIn("verify", out)
        self.assertNotIn("profile", out)


def _python_without_numpy():
    exe = shutil.which("python3")
    if not exe:
        return None
    probe = subprocess.run([exe, "-c", "import numpy"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
    return exe if probe.returncode != 0 else None


class NoNumpy(unittest.TestCase):
    @unittest.skipUnless(_python_without_numpy(), "every python3 here has numpy")
    def test_missing_numpy_is_unavailable(self):
        p = subprocess.run([_python_without_numpy(), util.HARNESS, "verify", "--kernel", "k.py",
                            "--problem", "p.py"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           check=False)
        self.assertEqual(p.returncode, 0)
        out = util.last_json(p.stdout.decode().splitlines())
        self.assertEqual(out["failure"]["kind"], "unavailable")
        self.assertIn("'numpy' not importable", out["failure"]["message"])


if __name__ == "__main__":
    unittest.main()
