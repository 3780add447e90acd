"""Simulator cost of the two slowest seed kernels at full shape: CPU seconds (user + system
of this process, BLAS threads included) of `nkisim.simulate` alone, timing-only and with
numerics, plus the input generation and numpy reference the harness adds around it.

    /usr/bin/python3 backends/nkisim/bench_seed_kernels.py [--target trn2] [--only gemm]
                                                           [--no-numerics]
"""
import argparse
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import nkisim  # noqa: E402

nkisim.activate()

CASES = (("gemm", "optimized"), ("transpose", "naive"))


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cpu():
    t = os.times()
    return t.user + t.system


def _timed(fn):
    c0 = _cpu()
    w0 = time.perf_counter()
    out = fn()
    return out, _cpu() - c0, time.perf_counter() - w0


def bench(seed, kernel_name, target, numerics):
    folder = os.path.join(REPO, "seeds", seed)
    os.environ.pop("AUTOCOMP_SMALL", None)
    problem = _load(os.path.join(folder, "problem.py"), "problem_" + seed)
    kernel = getattr(_load(os.path.join(folder, kernel_name + ".py"), "kernel_" + seed),
                     problem.KERNEL)
    dts = getattr(problem, "INPUT_DTYPES", None)
    inputs, c_in, _ = _timed(lambda: problem.inputs(0))
    specs = {k: nkisim.TensorSpec(v.shape, (dts or {}).get(k, v.dtype))
             for k, v in inputs.items()}
    res, c_t, w_t = _timed(lambda: nkisim.simulate(kernel, specs, target=target,
                                                   numerics=False, input_dtypes=dts))
    print("%-10s %-9s timing only  cpu %6.2f s  wall %6.2f s  instructions %d  latency %.1f us"
          % (seed, kernel_name, c_t, w_t, res.instructions, res.latency_us))
    if not numerics:
        return
    _, c_n, w_n = _timed(lambda: nkisim.simulate(kernel, inputs, target=target, numerics=True,
                                                 input_dtypes=dts))
    _, c_r, _ = _timed(lambda: problem.reference(**inputs))
    print("%-10s %-9s numerics     cpu %6.2f s  wall %6.2f s  (+ inputs %.2f s, reference "
          "%.2f s cpu)" % (seed, kernel_name, c_n, w_n, c_in, c_r))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="trn2")
    ap.add_argument("--only", default=None, help="gemm or transpose")
    ap.add_argument("--no-numerics", action="store_true")
    args = ap.parse_args()
    for seed, kernel in CASES:
        if args.only and seed != args.only:
            continue
        bench(seed, kernel, args.target, not args.no_numerics)


if __name__ == "__main__":
    main()
