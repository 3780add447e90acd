"""Process-wide settings the harness makes for speed: single-threaded BLAS for simulator
runs (unless the caller chose), freed memory kept for reuse."""
import os
import subprocess
import sys
import unittest

from tests.python.harness import util  # noqa: F401  (puts the harness on sys.path)
import autocomp_harness
from harnesslib import memory

HARNESS_DIR = os.path.dirname(os.path.abspath(autocomp_harness.__file__))
_PROBE = ("import sys; sys.path.insert(0, %r); from harnesslib import threads; "
          "ok = threads.single_threaded_blas(); import os, numpy; "
          "print(ok, os.environ.get('OPENBLAS_NUM_THREADS'), os.environ.get('OMP_NUM_THREADS'))"
          % HARNESS_DIR)


def probe(**env):
    base = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    base.update(env)
    out = subprocess.run([sys.executable, "-c", _PROBE], stdout=subprocess.PIPE, env=base,
                         check=True)
    return out.stdout.decode().split()


class Threads(unittest.TestCase):
    def test_unset_variables_become_one(self):
        self.assertEqual(probe(), ["True", "1", "1"])

    def test_a_callers_choice_is_kept(self):
        self.assertEqual(probe(OPENBLAS_NUM_THREADS="2"), ["True", "2", "None"])

    def test_only_simulator_runs(self):
        self.assertEqual(autocomp_harness._device_arg(["evaluate"]), "sim")
        self.assertEqual(autocomp_harness._device_arg(["evaluate", "--device", "neuron"]),
                         "neuron")
        self.assertEqual(autocomp_harness._device_arg(["profile", "--device=fake"]), "fake")


class Memory(unittest.TestCase):
    def test_applies_on_glibc(self):
        if not os.path.exists("/lib/x86_64-linux-gnu/libc.so.6") and \
                not os.path.exists("/lib64/libc.so.6"):
            self.skipTest("no glibc")
        self.assertTrue(memory.reuse_freed_memory())


if __name__ == "__main__":
    unittest.main()
