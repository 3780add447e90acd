#!/usr/bin/env python3
"""How many NKI Library kernels verify as published, through the product.

usage: scripts/nkilib_coverage.py LIBDIR [--binary B] [--harness] [--only NAME,...]
                                  [--target trn2] [--timeout S] [--no-bench]

LIBDIR is a local checkout of aws-neuron/nki-library (or its `nkilib` package folder). The
kernels and their problem files are listed in tests/nkilib/manifest.json: every problem file
there is ours (tests/nkilib/<name>/problem.py); the kernels are the library's own files,
evaluated in place inside its package tree. For each kernel the script runs
`autocomp-mcp call verify_kernel` (and `benchmark_kernel` when it verifies) and prints one
line: name, family, verify result, simulated µs, CPU seconds of the verify, failure reason;
then a summary line `nkilib: V/N verify (P%)`. A manifest entry's optional "known" names a
known cause of its failure (a library bug, an unmodelled feature); it is appended to the
reason. `--harness` runs the Python harness directly
instead of the binary (same checks, no server: for hosts without a build).

Exit status: 0 when every listed kernel verifies, 1 otherwise, 2 on bad arguments.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(REPO, "tests", "nkilib", "manifest.json")
HARNESS = os.path.join(REPO, "backends", "harness", "autocomp_harness.py")


def package_dir(libdir):
    """The `nkilib` package folder of a checkout (or the folder itself)."""
    for cand in (os.path.join(libdir, "src", "nkilib_src", "nkilib"),
                 os.path.join(libdir, "src", "nkilib"), os.path.join(libdir, "nkilib"), libdir):
        if os.path.isfile(os.path.join(cand, "__init__.py")) and os.path.isdir(
                os.path.join(cand, "core")):
            return cand
    return None


def load_manifest(path=MANIFEST):
    with open(path) as f:
        entries = json.load(f)["kernels"]
    for e in entries:
        for key in ("name", "family", "kernel", "problem"):
            if not isinstance(e.get(key), str):
                raise ValueError("manifest entry %r lacks %r" % (e.get("name"), key))
    return entries


def _cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _last_json(text):
    for line in reversed((text or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    try:
        return json.loads(text)
    except ValueError:
        return None


def _find(obj, key):
    """The first value of `key` anywhere in a JSON document."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            found = _find(v, key)
            if found is not None:
                return found
    elif isinstance(obj, list):
        for v in obj:
            found = _find(v, key)
            if found is not None:
                return found
    return None


class BinaryRunner:
    """`autocomp-mcp call TOOL --db DB --args JSON` (the product as a user runs it)."""

    def __init__(self, binary, target, timeout):
        self.binary = binary
        self.target = target
        self.timeout = timeout
        self.db = os.path.join(tempfile.mkdtemp(prefix="nkilib-coverage-"), "cov.db")

    def _call(self, tool, args):
        cmd = [self.binary, "call", tool, "--db", self.db, "--args", json.dumps(args)]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=self.timeout, check=False)
        return _last_json(p.stdout.decode(errors="replace")) or {
            "failure": {"message": (p.stderr.decode(errors="replace") or "no answer")[-300:]}}

    def verify(self, kernel, problem, extra):
        args = dict(kernel=kernel, problem=problem, target=self.target, fresh=True, **extra)
        return self._call("verify_kernel", args)

    def benchmark(self, kernel, problem, extra):
        args = dict(kernel=kernel, problem=problem, target=self.target, **extra)
        return self._call("benchmark_kernel", args)


class HarnessRunner:
    """The Python harness directly (`python3 -I -B autocomp_harness.py verify ...`)."""

    def __init__(self, target, timeout):
        self.target = target
        self.timeout = timeout

    def _run(self, command, kernel, problem, extra):
        cmd = [sys.executable, "-I", "-B", HARNESS, command, "--kernel", kernel, "--problem",
               problem, "--target", self.target, "--no-ref-cache"]
        if extra.get("lnc"):
            cmd += ["--lnc", str(extra["lnc"])]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=self.timeout, check=False)
        return _last_json(p.stdout.decode(errors="replace")) or {
            "failure": {"message": (p.stderr.decode(errors="replace") or "no answer")[-300:]}}

    def verify(self, kernel, problem, extra):
        return self._run("verify", kernel, problem, extra)

    def benchmark(self, kernel, problem, extra):
        return self._run("benchmark", kernel, problem, extra)


def reason(answer):
    """One line saying why a verify failed."""
    failure = _find(answer, "failure") or {}
    if not isinstance(failure, dict):
        return str(failure)[:160]
    kind = failure.get("kind") or "failed"
    msg = " ".join(str(failure.get("message") or "").split())
    line = failure.get("line")
    return ("%s%s: %s" % (kind, " (line %s)" % line if line else "", msg))[:220]


def median_us(answer):
    lat = _find(answer, "latency_us")
    if isinstance(lat, dict):
        lat = lat.get("median", lat.get("min"))
    try:
        return float(lat)
    except (TypeError, ValueError):
        return None


def run(entries, pkg, runner, bench=True, out=sys.stdout):
    """Verify each entry; returns the rows [(entry, ok, us, cpu_s, reason)]."""
    rows = []
    for e in entries:
        kernel = os.path.join(pkg, e["kernel"])
        problem = os.path.join(os.path.dirname(MANIFEST), e["problem"])
        extra = {"lnc": e["lnc"]} if e.get("lnc") and getattr(runner, "lnc", False) else {}
        if not os.path.isfile(kernel):
            rows.append((e, False, None, 0.0, "missing: the checkout has no %s" % e["kernel"]))
        else:
            before = _cpu_children()
            try:
                ans = runner.verify(kernel, problem, extra)
            except subprocess.TimeoutExpired:
                ans = {"failure": {"kind": "timeout", "message": "no answer in time"}}
            cpu = _cpu_children() - before
            ok = _find(ans, "correct") is True
            us = None
            if ok and bench:
                try:
                    us = median_us(runner.benchmark(kernel, problem, extra))
                except subprocess.TimeoutExpired:
                    us = None
            why = "" if ok else reason(ans)
            if not ok and e.get("known"):
                why = "%s [known: %s]" % (why, e["known"])
            rows.append((e, ok, us, cpu, why))
        r = rows[-1]
        print("%-26s %-18s %-8s %9s %6.1f  %s" % (
            e["name"], e["family"], "ok" if r[1] else "FAILED",
            "%.2f" % r[2] if r[2] is not None else "-", r[3], r[4]), file=out, flush=True)
    return rows


def summary(rows):
    ok = sum(1 for r in rows if r[1])
    n = len(rows)
    fams = sorted({r[0]["family"] for r in rows})
    return "nkilib: %d/%d verify (%.0f%%) across %d families; max verify CPU %.1f s" % (
        ok, n, 100.0 * ok / n if n else 0.0, len(fams), max([r[3] for r in rows] or [0]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("libdir")
    ap.add_argument("--binary", default=os.environ.get("AUTOCOMP_MCP_BINARY",
                                                       os.path.join(REPO, "build",
                                                                    "autocomp-mcp")))
    ap.add_argument("--harness", action="store_true", help="run the Python harness directly")
    ap.add_argument("--only", default="", help="comma-separated kernel names")
    ap.add_argument("--target", default="trn2")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--manifest", default=MANIFEST)
    args = ap.parse_args(argv)
    pkg = package_dir(args.libdir)
    if pkg is None:
        print("nkilib_coverage: no nkilib package under %s" % args.libdir, file=sys.stderr)
        return 2
    entries = load_manifest(args.manifest)
    if args.only:
        wanted = set(args.only.split(","))
        entries = [e for e in entries if e["name"] in wanted]
    if args.harness:
        runner = HarnessRunner(args.target, args.timeout)
    else:
        if not os.access(args.binary, os.X_OK):
            print("nkilib_coverage: no binary at %s (build first, or --harness)" % args.binary,
                  file=sys.stderr)
            return 2
        runner = BinaryRunner(args.binary, args.target, args.timeout)
    print("%-26s %-18s %-8s %9s %6s  %s" % ("kernel", "family", "verify", "us", "CPU-s",
                                            "failure"))
    rows = run(entries, pkg, runner, bench=not args.no_bench)
    print(summary(rows))
    return 0 if all(r[1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
