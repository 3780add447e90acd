#!/usr/bin/env python3
"""autocomp evaluation harness: verify, benchmark and profile one NKI kernel on one device.

Contract: backends/harness/PROTOCOL.md (schema `autocomp-harness/1`). The last stdout line is
exactly one JSON object; everything else goes to stderr. Exit code 0 whenever that JSON was
printed. Usable in-process through `run(argv) -> dict`.
"""
import argparse
import contextlib
import hashlib
import math
import os
import signal
import sys
import tempfile
import time

HARNESS_DIR = os.path.dirname(os.path.abspath(__file__))
if HARNESS_DIR not in sys.path:
    sys.path.insert(0, HARNESS_DIR)

from harnesslib import emit, stats  # noqa: E402
from harnesslib.failures import KINDS, HarnessFailure, HarnessTimeout  # noqa: E402

SCHEMA = "autocomp-harness/1"
# The one place the harness version lives. Bump on any change to harness behaviour or output.
HARNESS_BASE_VERSION = "1.1.0"

COMMANDS = ("verify", "benchmark", "profile", "evaluate", "version", "signature")
TARGETS = ("trn1", "trn2")
DEVICES = ("sim", "neuron", "fake")


def source_digest(*paths):
    """First 8 hex digits of a SHA-256 over .py files (names + bytes) of files or folders."""
    h = hashlib.sha256()
    for top in paths:
        files = [top] if os.path.isfile(top) else []
        for root, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".py")]
        for path in files:
            h.update(os.path.basename(path).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:8]


def harness_version(device="sim"):
    """Version string that is part of every evaluation's cache key.

    HARNESS_BASE_VERSION + '+h.<digest of the harness sources>', and for device sim
    '.nkisim.<nkisim.__version__>.<digest of the nkisim sources>', so any code change to the
    harness or the simulator changes it even when nobody bumps a version number.
    """
    v = "%s+h.%s" % (HARNESS_BASE_VERSION, source_digest(
        os.path.abspath(__file__), os.path.join(HARNESS_DIR, "harnesslib")))
    if device != "sim":
        return v
    from harnesslib import simdev  # noqa: PLC0415
    sim = simdev.nkisim_version()
    if sim is None:
        return v + ".nkisim.missing"
    return "%s.nkisim.%s.%s" % (v, sim, source_digest(os.path.join(simdev.NKISIM_DIR, "nkisim")))


# ------------------------------------------------------------------ argument parsing

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise HarnessFailure("harness_error", "bad arguments: %s" % message)


def _seed_list(text):
    try:
        seeds = [int(s) for s in text.replace(" ", "").split(",") if s != ""]
    except ValueError:
        raise argparse.ArgumentTypeError("seeds must be comma-separated integers: %r" % text)
    if not seeds:
        raise argparse.ArgumentTypeError("empty seed list")
    return seeds


def _nonneg_int(text):
    v = int(text)
    if v < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return v


def build_parser():
    p = _Parser(prog="autocomp_harness.py", description=__doc__.splitlines()[0])
    p.add_argument("command", choices=COMMANDS)
    p.add_argument("--kernel", help="kernel file (.py)")
    p.add_argument("--problem", help="problem file (.py)")
    p.add_argument("--target", choices=TARGETS, default=None,
                   help="default: the problem's TARGET, else trn2")
    p.add_argument("--device", choices=DEVICES, default="sim")
    p.add_argument("--seeds", type=_seed_list, default=None,
                   help="comma-separated; default: the problem's SEEDS, else 0,1,2,3,4")
    p.add_argument("--warmup", type=_nonneg_int, default=2)
    p.add_argument("--iters", type=_nonneg_int, default=10)
    p.add_argument("--kernel-name", default=None)
    p.add_argument("--workdir", default=None, help="scratch folder (neuron artifacts)")
    p.add_argument("--fake-ms", type=float, default=100.0)
    p.add_argument("--fake-fail", default=None, help="fake device: fail with this kind")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds; on expiry print a timeout failure and exit")
    p.add_argument("--ref-cache", default=None, help="reference cache folder")
    p.add_argument("--no-ref-cache", action="store_true")
    return p


# ------------------------------------------------------------------ helpers

class _Ctx:
    """Mutable state of one run: the stage being executed and stage timings."""

    def __init__(self):
        self.stage = "load"
        self.timings = {}
        self._t0 = None

    def enter(self, stage):
        self.stage = stage
        self._t0 = time.perf_counter()

    def leave(self):
        if self._t0 is not None:
            self.timings[self.stage] = round((time.perf_counter() - self._t0) * 1e3, 3)
        self._t0 = None


def _clean(value):
    """JSON-safe copy: numpy scalars to Python, non-finite floats to None."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    if hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iub":
        return int(value)
    return f if math.isfinite(f) else None


def _base(args_command, device, target):
    return {
        "schema": SCHEMA,
        "harness_version": HARNESS_BASE_VERSION,  # replaced by harness_version() once known
        "command": args_command,
        "status": "ok",
        "device": device,
        "target": target,
        "failure": None,
    }


@contextlib.contextmanager
def _alarm(seconds):
    if not seconds or seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def _fire(signum, frame):
        raise HarnessTimeout()

    old = signal.signal(signal.SIGALRM, _fire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ------------------------------------------------------------------ fake device

def _run_fake(args, out, ctx):
    """Test double: no files read, no checks; every unit of work is a sleep of --fake-ms."""
    wait = max(0.0, args.fake_ms) / 1e3
    seeds = args.seeds or [0, 1, 2, 3, 4]

    def sleep_sample():
        t = time.perf_counter()
        time.sleep(wait)
        return (time.perf_counter() - t) * 1e6

    def maybe_fail(stage):
        if args.fake_fail:
            if args.fake_fail not in KINDS:
                raise HarnessFailure("harness_error", "unknown --fake-fail kind %r" % args.fake_fail)
            raise HarnessFailure(args.fake_fail, "fake device: requested failure", stage=stage)

    ctx.enter("load")
    ctx.leave()
    if args.command in ("verify", "evaluate"):
        ctx.enter("verify")
        maybe_fail("verify")
        entries = []
        for s in seeds:
            sleep_sample()
            entries.append({"seed": s, "ok": True, "max_abs_err": 0.0, "rel_l2_err": 0.0,
                            "message": "fake device: not checked"})
        out["verify"] = {"correct": True, "seeds": entries}
        ctx.leave()
    if args.command in ("benchmark", "evaluate"):
        ctx.enter("benchmark")
        maybe_fail("benchmark")
        for _ in range(args.warmup):
            sleep_sample()
        samples = [sleep_sample() for _ in range(args.iters)]
        out["benchmark"] = {"warmup": args.warmup, "iters": args.iters, "method": "fake-sleep",
                            "latency_us": stats.summarize(samples)}
        ctx.leave()
    if args.command in ("profile", "evaluate"):
        ctx.enter("profile")
        maybe_fail("profile")
        t = sleep_sample()
        out["profile"] = {"metrics": {"total_time": t / 1e6}, "roofline": {},
                          "bottleneck": "unknown"}
        ctx.leave()


# ------------------------------------------------------------------ real devices

def _make_device(args, target, workdir):
    if args.device == "sim":
        from harnesslib.simdev import SimDevice  # noqa: PLC0415
        return SimDevice(target)
    from harnesslib.neuron import NeuronDevice  # noqa: PLC0415
    return NeuronDevice(target, os.path.abspath(args.kernel), workdir, args.command)


def _reference(problem, inputs, seed, cache):
    from harnesslib.refcache import cache_key  # noqa: PLC0415
    key = cache_key(problem.source_sha256, seed)
    hit = cache.get(key)
    if hit is not None:
        return hit
    t = time.perf_counter()
    ref = problem.make_reference(inputs, seed)
    cache.put(key, ref, time.perf_counter() - t)
    return ref


def _is_sim(device):
    return getattr(device, "name", "") == "sim"


def _device_outputs(device, result):
    """(arrays, dtype names) from a device run result."""
    if _is_sim(device):
        return device.outputs(result)
    return result


def _verify(problem, device, kernel, seeds, first_inputs, cache, out):
    """Run every seed; returns the first simulator result (reused by evaluate) or None.

    first_inputs: the already generated inputs of seeds[0].
    """
    from harnesslib import compare  # noqa: PLC0415
    first = None
    entries = []
    out["verify"] = {"correct": False, "seeds": entries}
    for i, seed in enumerate(seeds):
        inputs = first_inputs if i == 0 else problem.make_inputs(seed)
        # The kernel runs first: a kernel that fails to compile or run never pays for the
        # (possibly expensive) reference. The reference gets its own copies of the inputs.
        result = device.run(kernel, inputs, grid=problem.grid, numerics=True,
                            input_dtypes=problem.input_dtypes)
        ref = _reference(problem, inputs, seed, cache)
        outs, names = _device_outputs(device, result)
        if first is None and _is_sim(device):
            first = result
        ok, max_abs, rel_l2, msg = compare.compare_outputs(
            outs, ref, out_names=names, expected_names=problem.output_dtypes,
            rtol=problem.rtol, atol=problem.atol)
        entries.append({"seed": seed, "ok": ok, "max_abs_err": max_abs, "rel_l2_err": rel_l2,
                        "message": msg})
        if not ok:
            raise HarnessFailure("mismatch", "seed %d: %s" % (seed, msg), stage="verify")
    out["verify"]["correct"] = True
    return first


def _benchmark(args, problem, device, kernel, inputs, sim_result, out):
    if _is_sim(device):
        if sim_result is None:
            sim_result = device.run(kernel, inputs, grid=problem.grid,
                                    numerics=False, input_dtypes=problem.input_dtypes)
        lat = device.latency_us(sim_result)
        out["benchmark"] = {
            "warmup": args.warmup, "iters": args.iters, "method": "simulated",
            "note": "simulated latency is deterministic: simulated once, every sample equals it",
            "latency_us": stats.summarize([lat] * max(1, args.iters)),
        }
        return sim_result
    samples, tries, spread = stats.measure_with_spread_gate(
        lambda: device.benchmark_samples(kernel, inputs, args.warmup, args.iters,
                                         grid=problem.grid, input_dtypes=problem.input_dtypes))
    out["benchmark"] = {
        "warmup": args.warmup, "iters": args.iters,
        "method": "neuron-profile" if device.namespace == "nki" else "nki.benchmark-percentiles",
        "spread": spread, "spread_tries": tries,
        "latency_us": stats.summarize(samples),
    }
    return None


def _profile(args, problem, device, kernel, inputs, sim_result, target, out):
    if _is_sim(device):
        if sim_result is None:
            sim_result = device.run(kernel, inputs, grid=problem.grid,
                                    numerics=False, input_dtypes=problem.input_dtypes)
        out["profile"] = device.profile(sim_result)
        return
    from harnesslib import neuron  # noqa: PLC0415
    metrics = device.profile_metrics(kernel, inputs, grid=problem.grid,
                                     input_dtypes=problem.input_dtypes)
    roof = neuron.roofline_from_metrics(metrics, target)
    out["profile"] = {"metrics": metrics, "roofline": roof,
                      "bottleneck": neuron.bottleneck_from_metrics(metrics, roof)}


def _run_device(args, out, ctx):
    ctx.enter("load")
    try:
        import numpy  # noqa: F401,PLC0415
    except ImportError:
        raise HarnessFailure("unavailable", "device %r needs numpy: python module 'numpy' not "
                             "importable by %s" % (args.device, sys.executable))
    from harnesslib.problem import describe_inputs, load_problem, signature  # noqa: PLC0415
    from harnesslib.refcache import RefCache, default_dir  # noqa: PLC0415

    ctx.enter("load")
    for flag, value in (("--kernel", args.kernel), ("--problem", args.problem)):
        if not value:
            raise HarnessFailure("harness_error", "%s is required for %s" % (flag, args.command))
    if not os.path.isfile(args.kernel):
        raise HarnessFailure("harness_error", "kernel file not found: %s" % args.kernel)
    problem = load_problem(args.problem)
    target = args.target or problem.target or "trn2"
    if target not in TARGETS:
        raise HarnessFailure("problem_error", "problem TARGET %r is not one of %s"
                             % (target, ", ".join(TARGETS)))
    out["target"] = target
    workdir = args.workdir or tempfile.mkdtemp(prefix="autocomp-harness-")
    os.makedirs(workdir, exist_ok=True)
    device = _make_device(args, target, workdir)
    kernel_path = os.path.abspath(args.kernel)
    seeds = list(args.seeds or problem.seeds)
    first_inputs = problem.make_inputs(seeds[0])
    from harnesslib import scan  # noqa: PLC0415
    findings = scan.scan_file(kernel_path)
    if findings:
        raise HarnessFailure("forbidden_access", scan.refusal_message(findings),
                             line=findings[0].line)
    kernel = device.load_kernel(kernel_path, list(first_inputs), args.kernel_name,
                                problem.kernel_name)
    out["kernel"] = {"name": kernel.name, "file": kernel_path}
    out["problem"] = {"file": problem.path, "seeds": seeds,
                      "signature": signature(first_inputs, problem.input_dtypes),
                      "inputs": describe_inputs(first_inputs, problem.input_dtypes)}
    if hasattr(device, "namespace"):
        out["kernel"]["namespace"] = device.namespace
    cache = RefCache(None if args.no_ref_cache else (args.ref_cache or default_dir()))
    ctx.leave()

    sim_result = None
    if args.command in ("verify", "evaluate"):
        ctx.enter("verify")
        sim_result = _verify(problem, device, kernel, seeds, first_inputs, cache, out)
        ctx.leave()
    if args.command in ("benchmark", "evaluate"):
        ctx.enter("benchmark")
        sim_result = _benchmark(args, problem, device, kernel, first_inputs, sim_result, out)
        ctx.leave()
    if args.command in ("profile", "evaluate"):
        ctx.enter("profile")
        _profile(args, problem, device, kernel, first_inputs, sim_result, target, out)
        ctx.leave()


def _run_signature(args, out, ctx):
    """The `signature` command: only the problem's inputs(first seed), no kernel, no reference."""
    ctx.enter("load")
    try:
        import numpy  # noqa: F401,PLC0415
    except ImportError:
        raise HarnessFailure("unavailable", "the signature command needs numpy: python module "
                             "'numpy' not importable by %s" % sys.executable)
    from harnesslib.problem import describe_inputs, load_problem, signature  # noqa: PLC0415
    if not args.problem:
        raise HarnessFailure("harness_error", "--problem is required for signature")
    problem = load_problem(args.problem)
    seeds = list(args.seeds or problem.seeds)
    inputs = problem.make_inputs(seeds[0])
    out["problem"] = {"file": problem.path,
                      "signature": signature(inputs, problem.input_dtypes),
                      "inputs": describe_inputs(inputs, problem.input_dtypes)}
    ctx.leave()


def run(argv):
    """Execute one harness invocation in-process and return the result object (not printed).

    Kernel and problem code run with sys.stdout redirected to sys.stderr.
    """
    ctx = _Ctx()
    out = _base(argv[0] if argv else None, None, None)
    try:
        args = build_parser().parse_args(argv)
    except HarnessFailure as f:
        out["status"] = "failed"
        out["failure"] = f.to_json("load")
        return _clean(out)
    out.update(command=args.command, device=args.device, target=args.target or "trn2")
    if args.command == "version":
        return _clean({"schema": SCHEMA, "harness_version": harness_version(args.device),
                       "command": "version", "device": args.device})
    try:
        with contextlib.redirect_stdout(sys.stderr), _alarm(args.timeout):
            out["harness_version"] = harness_version(args.device)
            if args.command == "signature":
                _run_signature(args, out, ctx)
            elif args.device == "fake":
                _run_fake(args, out, ctx)
            else:
                _run_device(args, out, ctx)
    except HarnessFailure as f:
        ctx.leave()
        out["status"] = "failed"
        out["failure"] = f.to_json(ctx.stage)
    except SystemExit as e:
        ctx.leave()
        out["status"] = "failed"
        out["failure"] = {"kind": "runtime_error" if ctx.stage != "load" else "compile_error",
                          "stage": ctx.stage, "line": None,
                          "message": "kernel or problem code called exit(%s)" % (e.code,)}
    except HarnessTimeout:
        ctx.leave()
        out["status"] = "failed"
        out["failure"] = {"kind": "timeout", "stage": ctx.stage,
                          "message": "harness --timeout of %gs expired" % args.timeout, "line": None}
    except Exception as e:  # a harness bug: still a value
        ctx.leave()
        from harnesslib.failures import describe_exception  # noqa: PLC0415
        out["status"] = "failed"
        out["failure"] = {"kind": "harness_error", "stage": ctx.stage,
                          "message": "internal error: %s" % describe_exception(e), "line": None}
    if out.get("verify") and out["status"] == "failed":
        out["verify"]["correct"] = False
    if args.command == "signature":
        keep = ("schema", "harness_version", "command", "status", "failure", "problem")
        return _clean({k: out[k] for k in keep if k in out})
    out["timings_ms"] = ctx.timings
    return _clean(out)


def main(argv=None):
    """Entry point: the real stdout is moved to a private descriptor before any kernel or
    problem code runs (fd 1 points at stderr meanwhile); the result line is encoded without
    `json` and written there; then the process ends with os._exit, so a thread the kernel left
    running can neither write after the result nor keep the process alive."""
    argv = sys.argv[1:] if argv is None else argv
    sys.stdout.flush()
    channel = emit.ResultChannel().open()
    try:
        result = run(argv)
    except BaseException as e:  # run() returns values; this is the last resort
        result = {"schema": SCHEMA, "harness_version": HARNESS_BASE_VERSION, "status": "failed",
                  "command": argv[0] if argv else None, "failure": {
                      "kind": "harness_error", "stage": "load", "line": None,
                      "message": "internal error: %s: %s" % (type(e).__name__, e)}}
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    channel.write_line(result)
    return 0


if __name__ == "__main__":
    main()
    os._exit(0)
