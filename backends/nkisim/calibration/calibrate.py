"""Run the calibration anchors (anchors.json) on the simulator, print each anchor's
simulated/hardware latency ratio, and optionally fit cost-table parameters to them.

    /usr/bin/python3 backends/nkisim/calibration/calibrate.py [--target trn1]
        [--only ID,ID] [--conv-dir DIR] [--nkibench DIR] [--nki-samples DIR]
        [--fit FIELD=v1,v2,... ...] [--write]

Own kernels (this directory: conv1d_kernels.py, nkibench_kernels.py) run without any
checkout. Published kernels run only from local checkouts given on the command line (never
committed), and then in place of the own kernel of the same anchor: --conv-dir holds
conv.py, common.py and transpose.py of nki-samples contributed/neuron-team-kernels at
0898a77; --nkibench is AccelOpt's NKIBench/ directory; --nki-samples a checkout of
aws-neuron/nki-samples.
--fit tries every combination of the listed values (cost-table fields) and keeps the one
with the least squared log error over the anchors run; --write stores it as the shipped
table. Prints one row per anchor, then the geometric mean and worst ratio (of the anchors
with a measured latency; an anchor with only a published upper bound, `latency_ms_max`, is
printed against that bound and left out of the mean and the fit).
"""
import argparse
import importlib.util
import inspect
import itertools
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import nkisim  # noqa: E402
from nkisim.machine import costs  # noqa: E402

nkisim.activate()

ANCHORS = os.path.join(HERE, "anchors.json")
CONV_SHAPES = {"img": ((8, 512, 1, 2048), "float32"), "filt": ((512, 1, 1, 3), "float32"),
               "out": ((8, 512, 1, 2048), "float32")}
MM_TUTORIAL = os.path.join("src", "nki_samples", "tutorials", "matrix_multiplication",
                           "matrix_multiplication_nki_kernels.py")


def load_anchors(path=ANCHORS):
    with open(path) as f:
        return json.load(f)["anchors"]


def _module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _specs(shapes):
    return {k: nkisim.TensorSpec(s, d) for k, (s, d) in shapes.items()}


def _own(anchor):
    """(kernel function, inputs) of the anchor's own kernel (this directory), or None."""
    if not anchor.get("kernel"):
        return None
    mod_name, fn = anchor["kernel"].split(":")
    mod = __import__(mod_name)
    if mod_name == "conv1d_kernels":
        return getattr(mod, fn), _specs(CONV_SHAPES)
    shapes = mod.SHAPES[fn]
    return getattr(mod, fn), {k: nkisim.TensorSpec(*v) if isinstance(v, tuple) else v
                              for k, v in shapes.items()}


def uses_published(anchor, dirs):
    """True when `anchor` runs its published kernel: it has one and its checkout was given
    (a checkout given on the command line takes precedence over the own kernel)."""
    ext = anchor.get("external") or ""
    need = {"nki-samples-0898a77": "conv", "nkibench": "nkibench",
            "nki-samples": "nki_samples"}.get(ext.split(":")[0])
    return bool(need and dirs.get(need))


def runner(anchor, dirs):
    """(kernel function, inputs) that reproduce `anchor`: its published kernel when that
    checkout was given, else its own kernel; None when neither can run."""
    if not uses_published(anchor, dirs):
        return _own(anchor)
    ext = anchor.get("external") or ""
    if ext.startswith("nki-samples-0898a77:") and dirs.get("conv"):
        sys.path.insert(0, dirs["conv"])
        conv = _module(os.path.join(dirs["conv"], "conv.py"), "ext_conv")

        def vendor(img, filt, out):
            conv.conv1d_depthwise_default(img, filt, out, padding=((0, 0), (1, 1)))
        return vendor, _specs(CONV_SHAPES)
    if ext.startswith("nkibench:") and dirs.get("nkibench"):
        kfile = ext.split(":", 1)[1]
        stem = kfile.rsplit("_", 1)[0]
        refdir = os.path.join(dirs["nkibench"], "reference")
        ref = [f for f in os.listdir(refdir) if f.startswith(stem + "_numpy_")]
        if not ref:
            return None
        import numpy as np
        refmod = _module(os.path.join(refdir, ref[0]), "ref_" + stem)
        np.random.seed(0)
        ins = refmod.transform_to_nki_inputs(refmod.get_inputs())
        kmod = _module(os.path.join(dirs["nkibench"], "kernels", kfile), "k_" + stem)
        from nkisim.machine.simulator import unwrap
        raw, _ = unwrap(kmod.kernel)
        names = list(inspect.signature(raw).parameters)
        args = {}
        for n, a in zip(names, ins):
            if getattr(a, "ndim", 0) > 0:
                args[n] = nkisim.TensorSpec(a.shape, str(a.dtype))
            else:
                args[n] = a
        return kmod.kernel, args
    if ext.startswith("nki-samples:") and dirs.get("nki_samples"):
        prefix = ext.split(":")[2]
        mod = _module(os.path.join(dirs["nki_samples"], MM_TUTORIAL), "mm_tutorial")
        fn = getattr(mod, prefix, None) or getattr(mod, prefix.rstrip("_"), None)
        if fn is None:
            return None
        return fn, {"lhsT": nkisim.TensorSpec((8192, 4096), "bfloat16"),
                    "rhs": nkisim.TensorSpec((8192, 8192), "bfloat16")}
    return None


def run(anchors, dirs, target, only=None):
    """[(anchor, simulated ms or None, error text)] for the anchors of `target`."""
    rows = []
    cache = {}
    for a in anchors:
        if a["target"] != target or not ("latency_ms" in a or "latency_ms_max" in a):
            continue
        if only and a["id"] not in only:
            continue
        key = a.get("external") if uses_published(a, dirs) else a.get("kernel")
        if key in cache:
            rows.append((a,) + cache[key])
            continue
        r = runner(a, dirs)
        if r is None:
            res = (None, "no kernel run")
        else:
            fn, inputs = r
            try:
                sim = nkisim.simulate(fn, inputs, target=target, numerics=False)
                res = (sim.latency_us / 1000.0, "")
            except Exception as e:  # a failing anchor is reported, not fatal
                res = (None, "%s: %s" % (type(e).__name__, str(e)[:160]))
        cache[key] = res
        rows.append((a,) + res)
    return rows


def summary(rows):
    """(geometric mean of sim/hw, worst ratio as max(r, 1/r), anchors run)."""
    ratios = [ms / a["latency_ms"] for a, ms, _ in rows if ms and "latency_ms" in a]
    if not ratios:
        return None, None, 0
    gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    worst = max(max(r, 1 / r) for r in ratios)
    return gm, worst, len(ratios)


def print_rows(rows):
    for a, ms, err in rows:
        if "latency_ms" not in a:  # a published upper bound (P99 at most ...)
            hw = a["latency_ms_max"]
            if ms is None:
                print("  %-30s hw <= %6.3f ms  %s" % (a["id"], hw, err))
            else:
                print("  %-30s hw <= %6.3f ms  sim %9.3f ms  ratio %5.2f  (at most %.2f) %s"
                      % (a["id"], hw, ms, ms / hw, a.get("bound", 1.6),
                         "ok" if ms / hw <= a.get("bound", 1.6) else "OUT"))
            continue
        if ms is None:
            print("  %-30s hw %9.3f ms  %s" % (a["id"], a["latency_ms"], err))
        else:
            r = ms / a["latency_ms"]
            flag = "ok" if max(r, 1 / r) <= a.get("bound", 1.6) else "OUT"
            print("  %-30s hw %9.3f ms  sim %9.3f ms  ratio %5.2f  (bound %.2f) %s"
                  % (a["id"], a["latency_ms"], ms, r, a.get("bound", 1.6), flag))
    gm, worst, n = summary(rows)
    if n:
        print("  %d anchors: geometric mean sim/hw %.3f, worst %.2fx" % (n, gm, worst))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="trn1")
    ap.add_argument("--only", default="")
    ap.add_argument("--conv-dir")
    ap.add_argument("--nkibench")
    ap.add_argument("--nki-samples")
    ap.add_argument("--fit", nargs="*", default=[])
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    dirs = {"conv": a.conv_dir, "nkibench": a.nkibench, "nki_samples": a.nki_samples}
    only = set(a.only.split(",")) if a.only else None
    anchors = load_anchors()
    base = costs.table(a.target)
    if not a.fit:
        print_rows(run(anchors, dirs, a.target, only))
        return
    grid = []
    for spec in a.fit:
        field, vals = spec.split("=", 1)
        if field not in costs.FIELDS:
            ap.error("unknown cost-table field %r" % field)
        grid.append([(field, json.loads(v)) for v in vals.split(",")])
    best = None
    for combo in itertools.product(*grid):
        t = base.replace(**dict(combo))
        costs.set_table(t)
        rows = run(anchors, dirs, a.target, only)
        errs = [math.log(ms / x["latency_ms"]) ** 2 for x, ms, _ in rows
                if ms and "latency_ms" in x]
        loss = sum(errs)
        print("%s: loss %.4f" % (dict(combo), loss))
        if best is None or loss < best[0]:
            best = (loss, t, rows)
    print("best: %s" % {k: getattr(best[1], k) for k, _ in grid_fields(grid)})
    print_rows(best[2])
    if a.write:
        with open(costs.TABLE_FILE) as f:
            raw = json.load(f)
        raw[a.target] = best[1].as_dict()
        with open(costs.TABLE_FILE, "w") as f:
            f.write(json.dumps(raw, indent=2) + "\n")


def grid_fields(grid):
    return [g[0] for g in grid]


if __name__ == "__main__":
    main()
