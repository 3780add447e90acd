#!/usr/bin/env python3
"""Fit the simulator's calibratable cost-table fields to latencies measured on a device.

    /usr/bin/python3 backends/nkisim/calibration/device/fit_device.py --measurements FILE
        --target T [--base-table FILE]

FILE: {"target": T, "measurements": [{"id", "kernel": path, "problem": path,
"kernel_name": null or name, "latency_us": number}, ...]} (the probes of probes.json, and
any other kernel measured on the device). Each kernel is recorded once and re-priced under
every candidate table (pricer.py); the fit is a damped Gauss-Newton (Levenberg-Marquardt)
least squares over the log latency ratios, in log space of the fields (costs.calibratable),
with a weak pull towards the base table so a field no measurement moves stays where it was.

stdout: one JSON object {"target", "values" (the full fitted table), "parameters": [{"name",
"shipped", "fitted", "change_pct", "identified"}], "residuals": [{"id", "measured_us",
"before_us", "after_us", "error_pct_before", "error_pct_after"}], "cpu_s", "iterations"};
exit 0. A field is `identified` when the measurements pin it down: its standard error under
a 0.5% measurement noise (from the fit's Jacobian) is under 5%
(`standard_error_pct`). Bad input: exit 2 and
{"error": "..."}.
"""
import argparse
import json
import math
import os
import resource
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import pricer  # noqa: E402
from costtables import costs  # noqa: E402

NOISE = 0.005          # relative measurement noise assumed for `identified`
IDENTIFIED_SE = 0.05   # a field is identified when its standard error is below this
PRIOR = 0.001          # weight of the pull towards the base table (per unit log change)
STEP = 0.002           # finite-difference step in log space
BOUND = math.log(4.0)  # a fitted field stays within 4x of the base table's


class InputError(Exception):
    """Bad input; the message says what to fix."""


def cpu_seconds():
    """CPU time of this process and its finished children (the kernel recorders)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def read_measurements(path, target):
    """The measurement entries of FILE, checked."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise InputError("cannot read measurements %s: %s" % (path, e.strerror or e))
    except ValueError as e:
        raise InputError("measurements %s are not valid JSON: %s" % (path, e))
    if not isinstance(doc, dict) or not isinstance(doc.get("measurements"), list):
        raise InputError("measurements %s: expected {\"target\", \"measurements\": [...]}" % path)
    if doc.get("target") not in (None, target):
        raise InputError("measurements %s are for target %r, not %r"
                         % (path, doc.get("target"), target))
    entries, seen = [], set()
    for i, m in enumerate(doc["measurements"]):
        what = "measurement %d" % i
        if not isinstance(m, dict):
            raise InputError("%s is not an object" % what)
        mid = m.get("id")
        if type(mid) is not str or not mid:
            raise InputError("%s has no id" % what)
        what = "measurement %r" % mid
        if mid in seen:
            raise InputError("%s appears twice" % what)
        seen.add(mid)
        for key in ("kernel", "problem"):
            p = m.get(key)
            if type(p) is not str or not os.path.isfile(p):
                raise InputError("%s: %s file %r not found" % (what, key, p))
        name = m.get("kernel_name")
        if name is not None and (type(name) is not str or not name.isidentifier()):
            raise InputError("%s: kernel_name must be null or an identifier" % what)
        lat = m.get("latency_us")
        if type(lat) not in (int, float) or not math.isfinite(lat) or lat <= 0:
            raise InputError("%s: latency_us must be a positive number, not %r" % (what, lat))
        entries.append({"id": mid, "kernel": os.path.abspath(m["kernel"]),
                        "problem": os.path.abspath(m["problem"]), "kernel_name": name,
                        "latency_us": float(lat)})
    if not entries:
        raise InputError("measurements %s: no measurements" % path)
    return entries


def load_kernels(entries, target, cache=None):
    """pricer.Kernel per entry (reused from `cache`, keyed by files, name and target)."""
    cache = {} if cache is None else cache
    out = []
    for m in entries:
        key = (m["kernel"], m["problem"], m["kernel_name"], target)
        k = cache.get(key)
        if k is None:
            try:
                k = pricer.Kernel(m["kernel"], m["problem"], target, m["kernel_name"])
            except pricer.PriceError as e:
                raise InputError("measurement %r cannot run on the simulator: %s"
                                 % (m["id"], e))
            cache[key] = k
        out.append(k)
    return out


class Model:
    """Latencies of the kernels as a function of x = log(field / base field)."""

    def __init__(self, kernels, base, fields):
        self.kernels = kernels
        self.base = base
        self.fields = list(fields)
        self.calls = 0

    def table(self, x):
        vals = {f: getattr(self.base, f) * math.exp(v) for f, v in zip(self.fields, x)}
        return self.base.replace(**vals)

    def predict(self, x):
        t = self.table(x)
        self.calls += 1
        out = np.empty(len(self.kernels))
        for i, k in enumerate(self.kernels):
            try:
                out[i] = k.latency_us(t)
            except pricer.PriceError:
                out[i] = np.inf
        return out

    def jacobian(self, x, pred):
        """d log latency / d x by forward differences (columns of fields a kernel does not
        use are exact zeros)."""
        J = np.zeros((len(pred), len(x)))
        for j in range(len(x)):
            xs = x.copy()
            xs[j] += STEP
            J[:, j] = (np.log(self.predict(xs)) - np.log(pred)) / STEP
        return J


def _cost(r, x):
    return float(r @ r + (PRIOR * x) @ (PRIOR * x))


def fit(model, measured, max_iter=12):
    """(x, predicted latencies, iterations) minimizing the log errors."""
    logm = np.log(measured)
    x = np.zeros(len(model.fields))
    pred = model.predict(x)
    r = np.log(pred) - logm
    cost = _cost(r, x)
    lam = 1e-3
    it = 0
    for it in range(1, max_iter + 1):
        J = model.jacobian(x, pred)
        A = J.T @ J + PRIOR ** 2 * np.eye(len(x))
        g = J.T @ r + PRIOR ** 2 * x
        improved = False
        for _ in range(8):
            step = np.linalg.solve(A + lam * np.diag(np.diag(A)), -g)
            xn = np.clip(x + step, -BOUND, BOUND)
            pn = model.predict(xn)
            if not np.all(np.isfinite(pn)):
                lam *= 10
                continue
            rn = np.log(pn) - logm
            cn = _cost(rn, xn)
            if cn < cost:
                improved = True
                moved = float(np.max(np.abs(xn - x)))
                x, pred, r = xn, pn, rn
                done = cost - cn < 1e-4 * cost or moved < 1e-4
                cost = cn
                lam = max(lam / 5, 1e-7)
                break
            lam *= 10
        if not improved or done:
            break
    return x, pred, it


def identified(model, x, pred):
    """Per field: True when its standard error under NOISE is below IDENTIFIED_SE."""
    J = model.jacobian(x, pred)
    cov = np.linalg.pinv(J.T @ J + 1e-12 * np.eye(len(x)))
    se = NOISE * np.sqrt(np.maximum(np.diag(cov), 0.0))
    used = np.any(np.abs(J) > 1e-6, axis=0)
    return [bool(u and s < IDENTIFIED_SE) for u, s in zip(used, se)], se


def _pct(a, b):
    return 100.0 * (a / b - 1.0)


def calibrate(entries, target, base=None, cache=None):
    """The fit's result document (see the module doc) for checked measurement entries."""
    t0 = cpu_seconds()
    base = base or costs.load()[target]
    fields = costs.calibratable(target)
    kernels = load_kernels(entries, target, cache)
    measured = np.array([m["latency_us"] for m in entries])
    model = Model(kernels, base, fields)
    before = model.predict(np.zeros(len(fields)))
    bad = [m["id"] for m, b in zip(entries, before) if not np.isfinite(b)]
    if bad:
        raise InputError("the simulator cannot price %s" % ", ".join(bad))
    x, after, iterations = fit(model, measured)
    ident, se = identified(model, x, after)
    table = model.table(x)
    values = costs.values_of(table)
    params = []
    for f, v, ok, err in zip(fields, x, ident, se):
        b = getattr(base, f)
        params.append({"name": f, "shipped": b, "fitted": values[f],
                       "change_pct": round(_pct(values[f], b), 3) if b else 0.0,
                       "identified": ok,
                       "standard_error_pct": round(100 * float(err), 3) if ok else None})
    residuals = [{"id": m["id"], "measured_us": m["latency_us"], "before_us": float(b),
                  "after_us": float(a), "error_pct_before": round(_pct(b, m["latency_us"]), 3),
                  "error_pct_after": round(_pct(a, m["latency_us"]), 3)}
                 for m, b, a in zip(entries, before, after)]
    return {"target": target, "values": values, "parameters": params, "residuals": residuals,
            "iterations": iterations, "simulations": model.calls * len(kernels),
            "cpu_s": round(cpu_seconds() - t0, 3)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--measurements", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--base-table", default=None)
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        if e.code:
            print(json.dumps({"error": "bad arguments (see --help)"}))
            return 2
        return 0
    try:
        if args.target not in costs.CALIBRATABLE:
            raise InputError("target must be one of %s" % ", ".join(sorted(costs.CALIBRATABLE)))
        base = None
        if args.base_table:
            try:
                base = costs.load_override(args.base_table, args.target)[0]
            except costs.CostTableError as e:
                raise InputError(str(e))
        entries = read_measurements(args.measurements, args.target)
        with _stdout_to_stderr():
            out = calibrate(entries, args.target, base)
    except InputError as e:
        print(json.dumps({"error": str(e)}))
        return 2
    print(json.dumps(out, sort_keys=True))
    return 0


class _stdout_to_stderr:
    """Kernel and problem code may print: stdout carries only the result."""

    def __enter__(self):
        sys.stdout.flush()
        self.saved = os.dup(1)
        os.dup2(2, 1)

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self.saved, 1)
        os.close(self.saved)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
