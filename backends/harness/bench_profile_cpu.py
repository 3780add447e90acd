#!/usr/bin/env python3
"""CPU seconds of one uncached `profile_kernel` on the simulator: the harness's `evaluate`
(verify on the problem's seeds, benchmark, profile) run as a child process the way the
server runs it, with the reference cache off; plus the timing-only `profile` command. The
figure is user + system CPU of the whole process tree (the harness and the kernel's
recording process), read from getrusage(RUSAGE_CHILDREN); wall time on a shared machine
says little and is printed only for orientation. Peak memory matters because fresh pages
are expensive on some hosts (system time); it is printed too.

    /usr/bin/python3 backends/harness/bench_profile_cpu.py [--only gemm,transpose]
        [--repo PATH] [--commands evaluate,profile] [--repeat N] [--ref-cache]
        [--baseline PATH]

Cases (goals from issue 17): gemm = seeds/gemm/optimized.py (one seed) <= 30 s;
transpose = seeds/transpose/naive.py (five seeds) <= 10 s; `profile` (timing only) a small
fraction of those. `--repo` measures another checkout with the same script; `--baseline`
measures two checkouts in turn (pairs of runs see the same host state, which drifts by more
than most changes are worth) and prints the median paired difference.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CASES = {"gemm": "optimized", "transpose": "naive"}
GOALS = {"gemm": 30.0, "transpose": 10.0}


def run_case(repo, seed, kernel, command, ref_cache):
    harness = os.path.join(repo, "backends", "harness", "autocomp_harness.py")
    folder = os.path.join(repo, "seeds", seed)
    args = [sys.executable, harness, command, "--kernel", os.path.join(folder, kernel + ".py"),
            "--problem", os.path.join(folder, "problem.py")]
    args += ["--ref-cache", ref_cache] if ref_cache else ["--no-ref-cache"]
    env = dict(os.environ)
    env.pop("AUTOCOMP_SMALL", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                       check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user = after.ru_utime - before.ru_utime
    system = after.ru_stime - before.ru_stime
    try:
        out = json.loads(p.stdout.decode().strip().splitlines()[-1])
    except (IndexError, ValueError):
        out = {"status": "failed", "failure": {"message": p.stderr.decode()[-300:]}}
    return out, user, system, wall, after.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="gemm,transpose")
    ap.add_argument("--repo", default=REPO, help="checkout to measure (default: this one)")
    ap.add_argument("--commands", default="evaluate,profile")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each case N times and print the median CPU seconds (identical "
                         "runs vary by about 20%% on a shared host)")
    ap.add_argument("--ref-cache", action="store_true",
                    help="use a warm reference cache (runs each case once to fill it first)")
    ap.add_argument("--baseline", metavar="PATH",
                    help="another checkout measured in turn with --repo (baseline first, then "
                         "the checkout, N times): paired runs see the same host state, and "
                         "the median of their differences is printed")
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="bench-refs-") if args.ref_cache else None
    repos = [("base", args.baseline), ("this", args.repo)] if args.baseline else [("", args.repo)]
    for seed in args.only.split(","):
        kernel = CASES[seed]
        for command in args.commands.split(","):
            if cache and command == "evaluate":
                for _, repo in repos:
                    run_case(repo, seed, kernel, command, cache)
            goal = GOALS.get(seed) if command == "evaluate" else None
            cpus = {label: [] for label, _ in repos}
            for _ in range(max(1, args.repeat)):
                for label, repo in repos:
                    cpu = measure(repo, seed, kernel, command, cache, goal, label)
                    cpus[label].append(cpu)
            for label, values in cpus.items():
                if len(values) > 1:
                    print("%-9s %-9s %-8s %smedian cpu %6.2f s over %d runs (min %.2f, max "
                          "%.2f)%s" % (seed, kernel, command, label and label + " ",
                                       statistics.median(values), len(values), min(values),
                                       max(values), "  goal <= %g" % goal if goal else ""),
                          flush=True)
            if args.baseline:
                diffs = [b - a for a, b in zip(cpus["base"], cpus["this"])]
                print("%-9s %-9s %-8s this - base: median %+.2f s over %d pairs (%s)"
                      % (seed, kernel, command, statistics.median(diffs), len(diffs),
                         ", ".join("%+.2f" % d for d in diffs)), flush=True)


def measure(repo, seed, kernel, command, cache, goal, label):
    """One run of a case, printed; its CPU seconds."""
    out, user, system, wall, rss = run_case(repo, seed, kernel, command, cache)
    status = out.get("status")
    if status != "ok":
        status = "%s: %s" % (status, str((out.get("failure") or {}).get("message"))[:120])
    lat = ((out.get("benchmark") or {}).get("latency_us") or {}).get("min")
    print("%s%-9s %-9s %-8s cpu %6.2f s (user %6.2f, sys %6.2f)%s  wall %6.1f s  "
          "peak rss (largest child) %5.0f MB  seeds %s  latency %s us  %s"
          % (label and label + " ", seed, kernel, command, user + system, user, system,
             "  goal <= %g" % goal if goal else "", wall, rss,
             len((out.get("problem") or {}).get("seeds") or ()),
             "%.1f" % lat if lat else "-", status), flush=True)
    return user + system


if __name__ == "__main__":
    main()
