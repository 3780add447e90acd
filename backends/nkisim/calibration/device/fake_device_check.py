#!/usr/bin/env python3
"""Calibrate against the FAKE device `sim-perturbed` and print how well it worked: for each
device seed, measure the probes of probes.json through the harness (benchmark, median
latency), fit with fit_device.py (its command line, as the product runs it), compare the
fitted fields with the hidden ones (hidden_factors.py), and measure a seed suite (kernels of
seeds/ that are no probes) on the fake device, on the shipped table and on the fitted table
(harness device `sim`, `--cost-table`).

    /usr/bin/python3 backends/nkisim/calibration/device/fake_device_check.py
        [--target trn1] [--seeds 1,2,3] [--suite all|none|NAME,...] [--full-shapes] [--json]

Seed suite kernels run at AUTOCOMP_SMALL=1 shapes unless --full-shapes.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
HARNESS_DIR = os.path.join(REPO, "backends", "harness")
SIM_DIR = os.path.join(REPO, "backends", "nkisim")
for _p in (HARNESS_DIR, SIM_DIR, HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import autocomp_harness  # noqa: E402
from costtables import costs  # noqa: E402

SUITE = ("softmax", "layernorm", "rmsnorm", "gemm", "transpose", "rope", "mamba", "cumsum",
         "attention", "conv1d_depthwise")


def probes(target, manifest=os.path.join(HERE, "probes.json")):
    with open(manifest) as f:
        doc = json.load(f)
    base = os.path.dirname(manifest)
    return [{"id": p["id"], "kernel": os.path.join(base, p["kernel"]),
             "problem": os.path.join(base, p["problem"]), "kernel_name": p.get("kernel_name")}
            for p in doc["probes"] if target in p["targets"]]


def measure(kernel, problem, target, extra, kernel_name=None):
    """Median benchmark latency (us) through the harness, in this process."""
    argv = ["benchmark", "--kernel", kernel, "--problem", problem, "--target", target,
            "--fixed-seeds", "--no-ref-cache"] + list(extra)
    if kernel_name:
        argv += ["--kernel-name", kernel_name]
    out = autocomp_harness.run(argv)
    if out.get("status") != "ok":
        raise RuntimeError("%s: %s" % (kernel, out.get("failure")))
    return out["benchmark"]["latency_us"]["median"]


def run_fit(measurements, target, workdir):
    path = os.path.join(workdir, "measurements.json")
    with open(path, "w") as f:
        json.dump({"target": target, "measurements": measurements}, f)
    p = subprocess.run([sys.executable, os.path.join(HERE, "fit_device.py"), "--measurements",
                        path, "--target", target], stdout=subprocess.PIPE, check=False)
    out = json.loads(p.stdout.decode().strip().splitlines()[-1])
    if p.returncode != 0:
        raise RuntimeError("fit_device.py failed: %s" % out)
    return out


def check_seed(seed, target, suite, workdir):
    device = ["--device", "sim-perturbed", "--device-seed", str(seed)]
    ms = [dict(p, latency_us=measure(p["kernel"], p["problem"], target, device,
                                     p["kernel_name"])) for p in probes(target)]
    fit = run_fit(ms, target, workdir)
    hidden = costs.perturbed_table(seed, target)
    recovery = [{"name": p["name"], "hidden": getattr(hidden, p["name"]), "fitted": p["fitted"],
                 "error_pct": 100.0 * (p["fitted"] / getattr(hidden, p["name"]) - 1.0),
                 "identified": p["identified"]} for p in fit["parameters"]]
    table = os.path.join(workdir, "fitted-%d.json" % seed)
    with open(table, "w") as f:
        json.dump({"target": target, "name": "fitted-%d" % seed, "values": fit["values"]}, f)
    rows = []
    for name in suite:
        k = os.path.join(REPO, "seeds", name, "optimized.py")
        pr = os.path.join(REPO, "seeds", name, "problem.py")
        dev = measure(k, pr, target, device)
        before = measure(k, pr, target, [])
        after = measure(k, pr, target, ["--cost-table", table])
        rows.append({"kernel": name + "/optimized", "device_us": dev, "before_us": before,
                     "after_us": after, "error_pct_before": 100.0 * (before / dev - 1.0),
                     "error_pct_after": 100.0 * (after / dev - 1.0)})
    return {"seed": seed, "fit_cpu_s": fit["cpu_s"], "iterations": fit["iterations"],
            "recovery": recovery, "probe_residuals": fit["residuals"], "suite": rows}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default="trn1", choices=("trn1", "trn2"))
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--suite", default="all")
    p.add_argument("--full-shapes", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if not args.full_shapes:
        os.environ["AUTOCOMP_SMALL"] = "1"
    suite = (SUITE if args.suite == "all" else () if args.suite == "none"
             else tuple(args.suite.split(",")))
    results = []
    with tempfile.TemporaryDirectory(prefix="fake-calibration-") as d:
        for s in (int(x) for x in args.seeds.split(",")):
            results.append(check_seed(s, args.target, suite, d))
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for r in results:
        print("seed %d (%s): fit %.1f CPU-s, %d iterations" % (r["seed"], args.target,
                                                             r["fit_cpu_s"], r["iterations"]))
        print("  %-28s %10s %10s %8s %s" % ("parameter", "hidden", "fitted", "error", ""))
        for x in r["recovery"]:
            print("  %-28s %10.4g %10.4g %7.2f%% %s" % (
                x["name"], x["hidden"], x["fitted"], x["error_pct"],
                "" if x["identified"] else "(not identified)"))
        if r["suite"]:
            print("  %-28s %10s %10s %10s %8s %8s" % ("seed kernel", "device us", "shipped us",
                                                     "fitted us", "before", "after"))
        for x in r["suite"]:
            print("  %-28s %10.2f %10.2f %10.2f %7.2f%% %7.2f%%" % (
                x["kernel"], x["device_us"], x["before_us"], x["after_us"],
                x["error_pct_before"], x["error_pct_after"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
