#!/usr/bin/env python3
"""What the kernel sandbox costs: start-up of a confined process, in milliseconds.

Prints, as medians over --runs runs:
  plain      `python3 -I -B -c pass`
  bwrap      the same inside the sandbox (nkisim/confine.py: namespaces, binds, seccomp)
  filter     compiling the seccomp filter (once per harness process)
  kernel     a KernelProcess from start to its load answer for a small kernel (imports the
             simulator and the kernel inside the sandbox), with and without the sandbox

Usage: /usr/bin/python3 tests/bench/bench_sandbox.py [--runs N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NKISIM_DIR = os.path.join(REPO, "backends", "nkisim")
HARNESS_DIR = os.path.join(REPO, "backends", "harness")
sys.path.insert(0, NKISIM_DIR)
sys.path.insert(0, HARNESS_DIR)

from nkisim.sandbox import confine  # noqa: E402
from nkisim import sandbox  # noqa: E402
from harnesslib.simchild import loader_spec  # noqa: E402

KERNEL = """import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def double(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(a), 2.0))
    return out
"""


def ms(fn, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    py = [sys.executable, "-I", "-B", "-c", "pass"]

    def plain():
        subprocess.run(py, check=True)

    def confined():
        fd = confine.filter_fd()
        try:
            subprocess.run(confine.command(py, seccomp_fd=fd), pass_fds=(fd,), check=True)
        finally:
            os.close(fd)

    def compile_filter():
        confine._FILTER = None
        confine.seccomp_filter()

    with tempfile.TemporaryDirectory() as tmp:
        kernel = os.path.join(tmp, "kernel.py")
        with open(kernel, "w") as f:
            f.write(KERNEL)
        config = {"kernel_path": kernel, "loader": loader_spec(HARNESS_DIR), "target": "trn2",
                  "input_names": ["a"], "kernel_name": None, "problem_kernel": None}

        def kernel_process():
            kp = sandbox.KernelProcess(config)
            ans = kp.loaded()
            kp.close()
            assert ans.get("ok"), ans

        rows = [("plain python -I -B -c pass", ms(plain, args.runs)),
                ("the same in the sandbox", ms(confined, args.runs)),
                ("seccomp filter compile", ms(compile_filter, args.runs))]
        rows.append(("kernel process to load answer (sandboxed)", ms(kernel_process, args.runs)))
        real = confine.command
        confine.command = lambda argv, **kw: list(argv)  # the same process, unconfined
        try:
            rows.append(("kernel process to load answer (unconfined)",
                         ms(kernel_process, args.runs)))
        finally:
            confine.command = real
    for name, value in rows:
        print("%-45s %8.1f ms" % (name, value))


if __name__ == "__main__":
    main()
