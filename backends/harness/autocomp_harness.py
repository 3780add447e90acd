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

from harnesslib import emit, memory, stats, threads  # noqa: E402
from harnesslib.failures import (KINDS, HarnessFailure, HarnessTimeout,  # noqa: E402
                                 describe_exception)

SCHEMA = "autocomp-harness/1"
# The one place the harness version lives. Bump on any change to harness behaviour or output.
HARNESS_BASE_VERSION = "1.1.0"

COMMANDS = ("verify", "benchmark", "profile", "evaluate", "version", "signature")
TARGETS = ("trn1", "trn2", "trn3")
DEVICES = ("sim", "neuron", "fake", "sim-perturbed")
# Devices priced by the simulator: `sim-perturbed` is a fake device for tests and demos, the
# simulator with a hidden cost table (its calibratable fields scaled by seeded factors).
SIM_DEVICES = ("sim", "sim-perturbed")
# Relative run-to-run spread (one standard deviation) of sim-perturbed's latency samples.
PERTURBED_NOISE = 0.0025


def source_digest(*paths):
    """First 8 hex digits of a SHA-256 over the .py and .json files (paths relative to the
    given folder + bytes) of files or folders (the simulator's cost tables are data: a changed
    table is a changed simulator; a module moved to another subfolder is a changed package)."""
    h = hashlib.sha256()
    for top in paths:
        files = [top] if os.path.isfile(top) else []
        for root, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            files += [os.path.join(root, n) for n in sorted(names)
                      if n.endswith((".py", ".json"))]
        base = os.path.dirname(top) if os.path.isfile(top) else top
        for path in files:
            h.update(os.path.relpath(path, base).encode() + b"\0")
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
    if device not in SIM_DEVICES:
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
    p.add_argument("--lnc", type=int, choices=(1, 2), default=None,
                   help="logical NeuronCore degree (physical cores per launch); default: the "
                        "target's (trn1 1, trn2/trn3 2)")
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
    p.add_argument("--fixed-seeds", action="store_true",
                   help="make inputs from the seeds as given (default: each evaluation draws "
                        "its input seeds from them and a fresh secret)")
    p.add_argument("--seed-secret", default=None,
                   help="hex secret of an earlier evaluation: draw the same input seeds again")
    p.add_argument("--ref-cache", default=None, help="reference cache folder")
    p.add_argument("--no-ref-cache", action="store_true")
    p.add_argument("--cost-table", default=None,
                   help="JSON cost table the simulator prices with (sim, sim-perturbed's base)")
    p.add_argument("--device-seed", type=_nonneg_int, default=None,
                   help="sim-perturbed: the seed of the hidden cost table")
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

def _check_device_options(args):
    """--cost-table and --device-seed fit the device (before anything is loaded)."""
    if args.device == "sim-perturbed" and args.device_seed is None:
        raise HarnessFailure("harness_error", "bad arguments: --device sim-perturbed needs "
                             "--device-seed N (a non-negative integer)")
    if args.device != "sim-perturbed" and args.device_seed is not None:
        raise HarnessFailure("harness_error", "bad arguments: --device-seed applies to --device "
                             "sim-perturbed only")
    if args.cost_table is not None and args.device not in SIM_DEVICES:
        raise HarnessFailure("harness_error", "bad arguments: --cost-table applies to the "
                             "simulator (--device sim or sim-perturbed) only")


_RESTORE = []  # undoes the cost table a run installed


def _use_cost_table(args, target, out):
    """Install the table the simulator prices with in this process (the kernel's process only
    records; every cost is charged in this one's replay) and name it in the result."""
    from harnesslib import simdev  # noqa: PLC0415
    simdev.import_nkisim()
    from nkisim.machine import costs  # noqa: PLC0415
    shipped = costs.table(target)
    t, name = shipped, "shipped"
    if args.cost_table is not None:
        try:
            t, name = costs.load_override(args.cost_table, target)
        except costs.CostTableError as e:
            raise HarnessFailure("harness_error", "bad arguments: --cost-table: %s" % e)
    if args.device == "sim-perturbed":
        t, name = costs.perturbed_table(args.device_seed, target, base=t), "hidden"
    if t is not shipped:  # in-process callers (run()) get the table back afterwards
        costs.set_table(t)
        _RESTORE.append(lambda: costs.set_table(shipped))
    out["cost_table"] = {"name": name, "digest": costs.digest(t)}


# LNC degree per target when --lnc is not given (nkisim/machine/cores.py DEFAULT_LNC)
DEFAULT_LNC = {"trn1": 1, "trn2": 2, "trn3": 2}


def _lnc(args, target):
    """The launch's LNC degree: --lnc, else the target's; trn1 has no LNC=2."""
    default = DEFAULT_LNC.get(target, 1)
    if args.lnc is None:
        return default
    if args.lnc > default:
        raise HarnessFailure("harness_error", "--lnc %d: target %s has no logical NeuronCore of "
                             "degree %d (its NeuronCores are not grouped; LNC=1 only)"
                             % (args.lnc, target, args.lnc))
    return args.lnc


def _make_device(args, target, workdir):
    if args.device in SIM_DEVICES:
        from harnesslib import floor  # noqa: PLC0415
        if floor.peaks(target) is None:
            raise HarnessFailure("unavailable", "device %r models trn1, trn2 and trn3 only; target "
                                 "%r needs device 'neuron'" % (args.device, target))
        from harnesslib.simdev import SimDevice  # noqa: PLC0415
        return SimDevice(target, os.path.abspath(args.kernel),
                         problem_path=os.path.abspath(args.problem), lnc=_lnc(args, target))
    from harnesslib.neuron_sandbox import SandboxedNeuronDevice  # noqa: PLC0415
    return SandboxedNeuronDevice(target, os.path.abspath(args.kernel), workdir, args.command,
                                 problem_path=os.path.abspath(args.problem))


def draw_seeds(seeds, secret_hex):
    """Input seeds of one evaluation: each of the problem's seeds mixed with the secret
    (SHA-256, 31 bits), so a kernel cannot know the inputs it will be judged on."""
    try:
        secret = bytes.fromhex(secret_hex)
    except ValueError:
        raise HarnessFailure("harness_error", "--seed-secret must be hexadecimal")
    out = []
    for s in seeds:
        h = hashlib.sha256(secret + b"\0" + str(int(s)).encode()).digest()
        out.append(int.from_bytes(h[:4], "little") & 0x7FFFFFFF)
    return out


def _reference(problem, inputs, seed, cache, copy_inputs=True):
    from harnesslib.refcache import cache_key  # noqa: PLC0415
    key = cache_key(problem.source_sha256, seed)
    hit = cache.get(key)
    if hit is not None:
        return hit
    t = time.perf_counter()
    ref = problem.make_reference(inputs, seed, copy_inputs=copy_inputs)
    cache.put(key, ref, time.perf_counter() - t)
    return ref


def _is_sim(device):
    return getattr(device, "name", "") == "sim"


class _DeviceRun:
    """What the stages of one device run share."""

    def __init__(self, args, problem, device, kernel, seeds, first_inputs, cache, target,
                 problem_seeds=None):
        self.args = args
        self.problem = problem
        self.device = device
        self.kernel = kernel
        self.seeds = seeds  # the input seeds (drawn, see draw_seeds)
        self.problem_seeds = problem_seeds or seeds  # the seeds they were drawn from
        self.first_inputs = first_inputs
        self.cache = cache
        self.target = target
        self.out_shapes = None     # [(shape, NKI dtype name)] of the outputs, once known
        self.sim_result = None     # a simulation of seeds[0] (reused by benchmark and profile)
        self.input_facts = None    # (input HBM bytes, FLOPS) of seeds[0], see _input_facts
        self.bind = None           # {input name: kernel parameter} when bound by position
        self.peak_counts = None    # (vector FLOPs, matmul FLOPs) counted, see _peak_counts
        self.counting_original = None
        self.peak_count_error = None

    def call(self, inputs, numerics, reference=None, timing=True):
        """Run the kernel once: (device result, output arrays, output dtype names or None).
        timing=False (simulator only): outputs only, for a kernel whose timing is known."""
        from harnesslib.problem import is_array, make_outputs  # noqa: PLC0415
        problem, device = self.problem, self.device
        allocated = make_outputs(problem, inputs, reference)
        call_args = dict(inputs)
        dtypes = dict(problem.input_dtypes)
        for name, (arr, nki_name) in allocated.items():
            call_args[name] = arr
            if nki_name != arr.dtype.name:
                dtypes[name] = nki_name
        # the kernel may write only the OUTPUTS parameters: the reference (run after the
        # kernel when it is not cached) must see the inputs as inputs(seed) made them
        read_only = [n for n in inputs if n not in allocated and is_array(inputs[n])]
        if self.bind:  # bound by position: the kernel's parameter names
            call_args = {self.bind.get(k, k): v for k, v in call_args.items()}
            dtypes = {self.bind.get(k, k): v for k, v in dtypes.items()}
            read_only = [self.bind.get(k, k) for k in read_only]
        if _is_sim(device):
            extra = {"read_only": read_only}
            if not timing:
                extra["timing"] = False
            digests = None
        else:
            extra = {}
            digests = _digests(inputs, read_only) if numerics else None
        try:
            result = device.run(self.kernel, call_args, grid=problem.grid, numerics=numerics,
                                input_dtypes=dtypes, **extra)
        except HarnessFailure as e:  # a binding mismatch gets what to do (failures.py)
            from harnesslib.failures import explain_binding  # noqa: PLC0415
            e.message = explain_binding(e.message, self.kernel.name, list(call_args))
            raise
        if digests is not None:
            _check_unchanged(inputs, digests)
        if allocated:
            return (result, [arr for arr, _ in allocated.values()],
                    [nki_name for _, nki_name in allocated.values()])
        if _is_sim(device):
            outs, names = device.outputs(result)
        else:
            outs, names = result
        return result, outs, names

    def reference_if_outputs_need_it(self, inputs, seed):
        from harnesslib.problem import outputs_need_reference  # noqa: PLC0415
        if outputs_need_reference(self.problem):
            return _reference(self.problem, inputs, seed, self.cache)
        return None

    def simulate_first(self):
        """A timing-only simulation of seeds[0] unless one exists already."""
        if self.sim_result is None:
            ref = self.reference_if_outputs_need_it(self.first_inputs, self.seeds[0])
            self.sim_result, outs, names = self.call(self.first_inputs, False, ref)
            if self.out_shapes is None:
                self.out_shapes = [(o.shape, (names[i] if names else o.dtype.name))
                                   for i, o in enumerate(outs)]
        return self.sim_result


def _digests(inputs, names):
    """name -> digest of the bytes of each named input array (one read of each)."""
    import hashlib  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    out = {}
    for name in names:
        h = hashlib.blake2b(digest_size=16)
        h.update(memoryview(np.ascontiguousarray(inputs[name])).cast("B"))
        out[name] = h.digest()
    return out


def _check_unchanged(inputs, digests):
    """A device run must leave its inputs as they were: a kernel that writes into one (and
    could so change what the reference computes) fails verification."""
    changed = [n for n, d in _digests(inputs, digests).items() if d != digests[n]]
    if changed:
        raise HarnessFailure("mismatch", "the kernel wrote into its input %s: inputs are "
                             "read-only (return the results, or write them to the problem's "
                             "OUTPUTS parameters)" % ", ".join(repr(n) for n in changed))


def _shares_inputs(outputs, inputs):
    """True when an output array may share memory with an input array (a kernel that
    returns its input): the reference must then not write into the inputs."""
    import numpy as np  # noqa: PLC0415
    arrays = [v for v in inputs.values() if isinstance(v, np.ndarray)]
    return any(isinstance(o, np.ndarray) and np.may_share_memory(o, a)
               for o in outputs for a in arrays)


def _verify(run, out):
    """Run every seed against the reference; stops at the first failing seed.

    Memory is the expensive resource at full shape (fresh pages cost more CPU than the math
    on some hosts), so a seed's arrays are released before the next seed's inputs are made,
    and the reference reads the inputs in place when nothing needs them afterwards."""
    problem = run.problem
    entries = []
    out["verify"] = {"correct": False, "seeds": entries}
    sim = _is_sim(run.device)
    for i, seed in enumerate(run.seeds):
        inputs = run.first_inputs if i == 0 else problem.make_inputs(seed)
        # The kernel runs first: a kernel that fails to compile or run never pays for the
        # (possibly expensive) reference, unless OUTPUTS takes its shapes from the reference.
        # The reference gets its own copies of the inputs when they are used again (the first
        # seed's inputs on a real device, where benchmark and profile run on them).
        ref = run.reference_if_outputs_need_it(inputs, seed)
        # the simulator's timing does not depend on data: later seeds only need values
        result, outs, names = run.call(inputs, True, ref, timing=(i == 0))
        if ref is None:
            counting = i == 0 and _profiles(run.args) and _count_peaks_needed(run)
            if counting:  # the percent-of-peak counts come with this reference run
                _install_counting_reference(run)
            try:
                ref = _reference(problem, inputs, seed, run.cache,
                                 copy_inputs=(i == 0 and not sim) or _shares_inputs(outs, inputs))
            finally:
                if counting:
                    problem.reference_fn = run.counting_original
        if i == 0:
            expected = problem.output_dtypes or [r.dtype.name for r in ref]
            run.out_shapes = [(r.shape, expected[j] if j < len(expected) else r.dtype.name)
                              for j, r in enumerate(ref)]
        ok, max_abs, rel_l2, msg = _judge(run, result if sim else None, outs, names, ref)
        shown = run.problem_seeds[i]
        entry = {"seed": shown, "ok": ok, "max_abs_err": max_abs, "rel_l2_err": rel_l2,
                 "message": msg}
        if shown != seed:
            entry["input_seed"] = seed
        entries.append(entry)
        if not ok:
            line = None
            if "never wrote" in msg:
                from harnesslib.failures import unwritten_output_hint  # noqa: PLC0415
                hint, line = unwritten_output_hint(run.kernel.path)
                if hint:
                    msg += ". Likely cause: " + hint
            raise HarnessFailure("mismatch", "seed %d: %s" % (shown, msg), stage="verify",
                                 line=line)
        if i == 0 and sim:
            _check_inputs_read(run, result, seed, ref)
        if i == 0 and sim:
            # benchmark and profile reuse this run's timing; its output arrays are not needed
            result.outputs = ()
            run.sim_result = result
            _release_first_inputs(run)
        del inputs, ref, result, outs
    if problem.stress:
        _verify_stress(run, out["verify"])
    out["verify"]["correct"] = True


def _verify_stress(run, section):
    """The problem's stress inputs (harnesslib/stress.py), each made from a drawn seed's inputs
    (the i-th from seeds[i % len(seeds)]) and compared with the reference on it; stops at the
    first failing one. Every failure, the problem's or the kernel's, names the stress input."""
    from harnesslib.problem import outputs_need_reference  # noqa: PLC0415
    problem = run.problem
    sim = _is_sim(run.device)
    entries = section.setdefault("stress", [])
    started = time.perf_counter()
    for i, (name, fn) in enumerate(problem.stress):
        seed = run.seeds[i % len(run.seeds)]
        try:
            inputs = problem.make_stress(name, fn, problem.make_inputs(seed))
            # the reference reads copies when the inputs are used afterwards (by the kernel,
            # or through an output that shares an input's memory)
            ref = problem.stress_reference(_copies(inputs), name) \
                if outputs_need_reference(problem) else None
            result, outs, names = run.call(inputs, True, ref, timing=False)
            if ref is None:
                shared = _shares_inputs(outs, inputs)
                ref = problem.stress_reference(_copies(inputs) if shared else inputs, name)
            ok, max_abs, rel_l2, msg = _judge(run, result if sim else None, outs, names, ref)
        except HarnessFailure as e:
            if not e.message.startswith("STRESS["):
                e.message = "stress input %r: %s" % (name, e.message)
            e.stage = e.stage or "verify"
            raise
        if sim:  # the simulator checked above that every output element was written
            msg = msg.replace("; NaN marks memory the kernel never wrote", "")
        entries.append({"name": name, "ok": ok, "max_abs_err": max_abs, "rel_l2_err": rel_l2})
        if not ok:
            raise HarnessFailure("mismatch", "stress input %r: %s" % (name, msg), stage="verify")
        del inputs, ref, result, outs
    section["stress_ms"] = round((time.perf_counter() - started) * 1e3, 1)


def _judge(run, sim_result, outs, names, ref):
    """One run's outputs against the reference, for a drawn seed or a stress input alike: the
    output contract (sim_result: the simulator's, None elsewhere), the problem's output
    transform, then the comparison; (ok, max_abs_err, rel_l2_err, message)."""
    from harnesslib import compare  # noqa: PLC0415
    problem = run.problem
    _check_contract(run, sim_result, ref)
    outs = problem.transform_outputs(outs, ref)
    return compare.compare_outputs(
        outs, ref, out_names=names, expected_names=problem.output_dtypes,
        rtol=problem.rtol, atol=problem.atol, tolerance=problem.tolerance,
        rel_l2_tol=problem.rel_l2)


def _copies(inputs):
    import numpy as np  # noqa: PLC0415
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}


def _check_contract(run, result, ref):
    """The output contract (PROTOCOL.md "Output contract") beyond the values: a reference
    with NaN or inf needs the problem's EXPECT_NONFINITE = True, and on the simulator every
    element of every result was written by an instruction (an unwritten element would hold
    whatever the memory held, which a NaN reference row could not tell apart)."""
    from harnesslib import compare  # noqa: PLC0415
    if not getattr(run.problem.module, "EXPECT_NONFINITE", False):
        found = compare.nonfinite_reference(ref)
        if found is not None:
            i, count, where, kind = found
            raise HarnessFailure(
                "problem_error", "the reference's output %d has %d non-finite value(s) (first "
                "%s at index %s): a problem whose reference is NaN or inf somewhere must say it "
                "expects that with EXPECT_NONFINITE = True (the output must then hold the same "
                "NaN/+inf/-inf at the same places)" % (i, count, kind, where), stage="verify")
    for i, mask in enumerate(getattr(result, "unwritten", None) or ()):
        if mask is not None:
            region, count = compare.region_text(mask)
            raise HarnessFailure(
                "mismatch", "output %d%s never written (%d of %d elements): every element of "
                "a result must be written by an instruction" % (i, region, count, mask.size),
                stage="verify")


def _check_inputs_read(run, result, seed, ref):
    """Outputs that match while no instruction read an input the reference depends on were
    not computed from the inputs (answers shipped as constants): refused. An input the kernel
    ignores passes when the reference ignores it too (recomputed with that input replaced,
    it stays within the problem's tolerance)."""
    import numpy as np  # noqa: PLC0415
    from harnesslib import compare  # noqa: PLC0415
    from harnesslib.problem import is_array  # noqa: PLC0415
    read = getattr(result, "inputs_read", None)
    if read is None:
        return
    problem = run.problem
    fresh = None
    for name in run.first_inputs:
        kernel_name = run.bind.get(name, name) if run.bind else name
        if kernel_name in read or not is_array(run.first_inputs[name]):
            continue
        if fresh is None:
            fresh = problem.make_inputs(seed)  # the reference may have used the others in place
        other = _perturbed(problem, fresh, name, seed)
        if other is None:
            continue
        changed = dict(fresh)
        changed[name] = other
        ref2 = problem.make_reference(changed, seed, copy_inputs=True)
        same, _, _, _ = compare.compare_outputs(list(ref2), list(ref),
                                                expected_names=problem.output_dtypes,
                                                rtol=problem.rtol, atol=problem.atol,
                                                tolerance=problem.tolerance,
                                                rel_l2_tol=problem.rel_l2)
        if not same:
            raise HarnessFailure(
                "forbidden_access", "the kernel's outputs match the reference, but no instruction "
                "of the kernel read its input %r, on which the reference depends: outputs must be "
                "computed from the inputs" % name, stage="verify")


def _perturbed(problem, inputs, name, seed):
    """Another value of input `name` that the problem itself produces (another seed's), or None
    when its generator gives this input one value only. Values the problem never produces (a
    shuffle, noise) are not tried: a kernel may rely on what the problem guarantees (a mask that
    is always all true, say), and that is not a constant answer."""
    import numpy as np  # noqa: PLC0415
    a = inputs[name]
    for k in (1, 2):
        b = problem.make_inputs((seed * 7919 + 104729 * k) & 0x7FFFFFFF).get(name)
        if isinstance(b, np.ndarray) and b.shape == a.shape and b.dtype == a.dtype \
                and not np.array_equal(a, b, equal_nan=True):
            return b
    return None


def _profiles(args):
    return args.command in ("profile", "evaluate")


def _count_peaks_needed(run):
    specs = run.problem.peak_specs
    return run.peak_counts is None and (specs.get("VECTOR_FLOPS") is None
                                        or specs.get("MATMUL_FLOPS") is None)


def _install_counting_reference(run):
    """Make the problem's next reference() call count its operations into run.peak_counts."""
    import numpy as np  # noqa: PLC0415
    from harnesslib import peaks  # noqa: PLC0415
    original = run.problem.reference_fn
    run.counting_original = original

    def counting(**inputs):
        started = time.perf_counter()
        try:
            vector, matmul, outs = peaks.count_reference(original, inputs)
        except Exception as e:  # the reference works only on plain arrays: not countable
            run.peak_counts = False
            run.peak_count_error = describe_exception(e, limit=300)
            return original(**inputs)
        run.peak_counts = (vector, matmul)
        # kept beside the cached reference (same rule: only when the reference was slow), so
        # a reference served from the cache does not have to run again to be counted
        run.cache.put(_peak_counts_key(run), (np.array([vector, matmul], dtype=np.float64),),
                      time.perf_counter() - started)
        return tuple(outs)
    run.problem.reference_fn = counting


def _peak_counts_key(run):
    from harnesslib import peaks  # noqa: PLC0415
    from harnesslib.refcache import cache_key  # noqa: PLC0415
    return "%s-peaks%d" % (cache_key(run.problem.source_sha256, run.seeds[0]),
                           peaks.COUNT_VERSION)


def _peak_counts(run):
    """(vector FLOPs, matmul FLOPs) of the problem for the accelopt rule: the problem's
    VECTOR_FLOPS / MATMUL_FLOPS, else counted from one reference run (peaks.py)."""
    problem = run.problem
    specs = problem.peak_specs
    if _count_peaks_needed(run):
        hit = run.cache.get(_peak_counts_key(run))
        if hit is not None and len(hit) == 1 and hit[0].shape == (2,):
            run.peak_counts = (float(hit[0][0]), float(hit[0][1]))
    if _count_peaks_needed(run):
        inputs = run.first_inputs if run.first_inputs is not None else \
            problem.make_inputs(run.seeds[0])
        _install_counting_reference(run)
        try:
            problem.make_reference(inputs, run.seeds[0], copy_inputs=True)
        finally:
            problem.reference_fn = run.counting_original
    counted = run.peak_counts
    values = []
    for i, key in enumerate(("VECTOR_FLOPS", "MATMUL_FLOPS")):
        spec = specs.get(key)
        if spec is None:
            if not counted:
                return None
            values.append(float(counted[i]))
            continue
        try:
            value = float(spec(**problem.make_inputs(run.seeds[0])) if callable(spec) else spec)
        except Exception as e:
            raise HarnessFailure("problem_error", "%s: %s" % (key, describe_exception(e)))
        values.append(value)
    return values


def _peaks(run, section, latency_us):
    """`percent_of_peak` of a profile: every rule's figures (peaks.py), the accelopt rule
    first; the numbers are also put into the roofline (`pct_of_peak_*`, `peak_*`) so every
    consumer of the roofline sees them."""
    from harnesslib import peaks  # noqa: PLC0415
    counts = _peak_counts(run)
    fl = section.get("floor")
    if fl is None:
        try:
            fl = _floor(run)
        except HarnessFailure:
            fl = None
    hbm, _ = _input_facts(run)
    for shape, dtype_name in run.out_shapes or ():
        from harnesslib import floor as floor_mod  # noqa: PLC0415
        hbm += floor_mod.tensor_bytes(shape, dtype_name)
    spec = run.problem.peak_specs.get("MIN_BYTES")
    if spec is not None:
        try:
            hbm = float(spec(**run.problem.make_inputs(run.seeds[0])) if callable(spec) else spec)
        except Exception as e:
            raise HarnessFailure("problem_error", "MIN_BYTES: %s" % describe_exception(e))
    roof = section.setdefault("roofline", {})
    rules = []
    notes = []
    acc = None
    if counts is None:
        notes.append("accelopt: the reference's operations could not be counted (%s); set "
                     "VECTOR_FLOPS and MATMUL_FLOPS in the problem"
                     % (run.peak_count_error or "unknown reason"))
    else:
        acc = peaks.accelopt(latency_us, counts[0], counts[1], hbm, run.target,
                             peaks.matmul_precision(run.problem.input_dtypes.values()),
                             cores=_launch_cores(run))
        if acc is None:
            notes.append("accelopt: no peaks for target %s" % run.target)
    if acc is not None:
        rules.append(acc)
        roof["peak_vector_gflops_accelopt"] = acc["peak_vector_gflops"]
        roof["peak_matmul_tflops_accelopt"] = acc["peak_matmul_tflops"]
        roof["peak_hbm_gibps_accelopt"] = acc["peak_hbm_gibps"]
        roof["theoretical_us_accelopt"] = acc["theoretical_us"]
        if "percent" in acc:
            roof["pct_of_peak_accelopt"] = acc["percent"]
    own = peaks.roofline_percent(roof)
    if own is not None:
        rules.append({"rule": "roofline", "percent": own,
                      "peak_tflops": roof.get("peak_tflops"),
                      "peak_hbm_gbps": roof.get("peak_hbm_gbps")})
        roof["pct_of_peak_roofline"] = own
    pct = peaks.floor_percent(latency_us, fl)
    if pct is not None:
        rules.append({"rule": "floor", "percent": pct, "theoretical_us": fl.get("floor_us"),
                      "peak_tflops": fl.get("peak_tflops"),
                      "peak_hbm_gbps": fl.get("peak_hbm_gbps")})
        roof["pct_of_peak_floor"] = pct
    section["percent_of_peak"] = {"latency_us": latency_us, "rules": rules}
    if notes:
        section["percent_of_peak"]["notes"] = notes


def _input_facts(run):
    """(HBM bytes of the array inputs, the problem's FLOPS) for the floor, from the first
    seed's inputs; computed once, so the inputs can be released (_release_first_inputs). A
    failing FLOPS spec is kept and raised where the floor is used."""
    if run.input_facts is None:
        from harnesslib import floor  # noqa: PLC0415
        from harnesslib.problem import input_dtype, is_array, problem_flops  # noqa: PLC0415
        problem = run.problem
        hbm = 0
        for name, value in run.first_inputs.items():
            if is_array(value):
                hbm += floor.tensor_bytes(value.shape,
                                          input_dtype(name, value, problem.input_dtypes),
                                          value.dtype.itemsize)
        try:
            flops = problem_flops(problem, run.first_inputs)
        except HarnessFailure as e:
            flops = e
        run.input_facts = (hbm, flops)
    return run.input_facts


def _release_first_inputs(run):
    """On the simulator, benchmark and profile reuse the first seed's simulation: its input
    arrays are needed no longer, and dropping them lets the next seed reuse their memory
    (fresh pages cost more CPU than the arithmetic on them)."""
    _input_facts(run)
    run.first_inputs = None


def _floor(run):
    """The problem's physical floor on this target (harnesslib/floor.py), or None."""
    from harnesslib import floor  # noqa: PLC0415
    hbm, flops = _input_facts(run)
    if isinstance(flops, HarnessFailure):
        raise flops
    for shape, dtype_name in run.out_shapes or ():
        hbm += floor.tensor_bytes(shape, dtype_name)
    return floor.compute(run.target, run.args.device, hbm, flops, cores=_launch_cores(run))


def _launch_cores(run):
    """Physical cores the launch spans (its floor is theirs): on the simulator, the cores its
    programs ran on (nkisim/machine/cores.py); on hardware, the LNC degree for a GRID of
    exactly LNC programs (the LNC launch), else 1."""
    lnc = _lnc(run.args, run.target)
    if lnc == 1:
        return 1
    if _is_sim(run.device) and run.sim_result is not None:
        ends = getattr(run.sim_result, "core_end_us", None) or ()
        return max(1, sum(1 for e in ends if e > 0))
    return lnc if tuple(run.problem.grid or ()) == (lnc,) else 1


def _check_floor(run, latency_us, section, stage):
    from harnesslib import floor as floor_mod  # noqa: PLC0415
    fl = _floor(run)
    if fl is None:
        return
    section["floor"] = fl
    msg = floor_mod.violation(latency_us, fl, run.target)
    if msg:
        raise HarnessFailure("implausible", msg, stage=stage)


def _perturbed_samples(run, latency_us):
    """sim-perturbed's samples: the simulated latency with a small run-to-run spread, drawn
    from the device seed, the kernel and the evaluation's input seeds (so a repeated
    evaluation with --fixed-seeds gives the same samples) and the attempt number."""
    import random  # noqa: PLC0415
    args = run.args
    h = hashlib.sha256(repr((args.device_seed, run.kernel.path, run.kernel.name,
                             list(run.seeds))).encode())
    with open(run.kernel.path, "rb") as f:
        h.update(f.read())
    attempt = [0]

    def measure():
        attempt[0] += 1
        rng = random.Random(h.hexdigest() + ":%d" % attempt[0])
        return [latency_us * math.exp(rng.gauss(0.0, PERTURBED_NOISE))
                for _ in range(max(1, args.iters))]
    return measure


def _benchmark(run, out):
    args, device, problem = run.args, run.device, run.problem
    if _is_sim(device) and args.device == "sim-perturbed":
        samples, tries, spread = stats.measure_with_spread_gate(
            _perturbed_samples(run, device.latency_us(run.simulate_first())))
        out["benchmark"] = {
            "warmup": args.warmup, "iters": args.iters, "method": "fake-device",
            "note": "fake device: the simulator with a hidden cost table, samples spread",
            "spread": spread, "spread_tries": tries,
            "latency_us": stats.summarize(samples),
        }
    elif _is_sim(device):
        lat = device.latency_us(run.simulate_first())
        out["benchmark"] = {
            "warmup": args.warmup, "iters": args.iters, "method": "simulated",
            "note": "simulated latency is deterministic: simulated once, every sample equals it",
            "latency_us": stats.summarize([lat] * max(1, args.iters)),
        }
    else:
        samples, tries, spread = stats.measure_with_spread_gate(
            lambda: device.benchmark_samples(run.kernel, run.first_inputs, args.warmup,
                                             args.iters, grid=problem.grid,
                                             input_dtypes=problem.input_dtypes))
        out["benchmark"] = {
            "warmup": args.warmup, "iters": args.iters,
            "method": "neuron-profile" if device.namespace == "nki" else "nki.benchmark-percentiles",
            "spread": spread, "spread_tries": tries,
            "latency_us": stats.summarize(samples),
        }
    _check_floor(run, out["benchmark"]["latency_us"].get("min"), out["benchmark"], "benchmark")


HOTSPOT_ROWS = 8
HOTSPOT_TEXT_CHARS = 80


def _source_lines(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def hotspot_rows(rows, latency_us, kernel_path, limit=HOTSPOT_ROWS):
    """Profile hotspots: the busiest rows (by time) with the kernel source line's text and
    the share of the makespan; rows are {line, engine, instructions, time_us}."""
    lines = _source_lines(kernel_path)
    out = []
    for row in rows or ():
        if not isinstance(row, dict):
            continue
        line = row.get("line")
        try:
            t = float(row.get("time_us") or 0.0)
        except (TypeError, ValueError):
            continue
        text = ""
        if isinstance(line, int) and 1 <= line <= len(lines):
            text = lines[line - 1].strip()
            if len(text) > HOTSPOT_TEXT_CHARS:
                text = text[:HOTSPOT_TEXT_CHARS - 3] + "..."
        out.append({"line": line, "text": text, "engine": row.get("engine"),
                    "share_pct": 100.0 * t / latency_us if latency_us and latency_us > 0 else None,
                    "time_us": t, "instructions": row.get("instructions")})
    out.sort(key=lambda r: -r["time_us"])
    return out[:limit]


def sim_profile(device, result, kernel_path):
    """The profile section of a simulator result: the device's metrics, roofline and
    bottleneck, plus `hotspots` (from the result's `hotspots` rows) and `waits` (passed
    through) when the result has them."""
    profile = device.profile(result)
    hot = getattr(result, "hotspots", None)
    if hot is not None:
        profile["hotspots"] = hotspot_rows(hot, device.latency_us(result), kernel_path)
    waits = getattr(result, "waits", None)
    if waits is not None:
        profile["waits"] = [dict(w) for w in waits if isinstance(w, dict)]
    named = getattr(result, "bottleneck_engine", None)
    if named:
        profile["bottleneck_engine"] = str(named)
    ends = getattr(result, "core_end_us", None)
    if ends:
        # the end of each physical core of the logical core (imbalance between them)
        profile["lnc"] = int(getattr(result, "lnc", len(ends)))
        profile["core_end_us"] = [float(e) for e in ends]
    effects = getattr(result, "compiler_effects", None)
    if effects:
        # what the simulator assumed the compiler does to the kernel as written
        profile["compiler_effects"] = [str(e) for e in effects]
    return profile


def _profile(run, out):
    device = run.device
    if _is_sim(device):
        out["profile"] = sim_profile(device, run.simulate_first(), run.kernel.path)
    else:
        from harnesslib import neuron  # noqa: PLC0415
        metrics = device.profile_metrics(run.kernel, run.first_inputs, grid=run.problem.grid,
                                         input_dtypes=run.problem.input_dtypes)
        roof = neuron.roofline_from_metrics(metrics, run.target)
        out["profile"] = {"metrics": metrics, "roofline": roof,
                          "bottleneck": neuron.bottleneck_from_metrics(metrics, roof)}
    total = out["profile"].get("metrics", {}).get("total_time")
    if "benchmark" not in out and isinstance(total, (int, float)):
        _check_floor(run, total * 1e6, out["profile"], "profile")
    latency = (out.get("benchmark") or {}).get("latency_us", {}).get("min")
    if latency is None and isinstance(total, (int, float)):
        latency = total * 1e6
    _peaks(run, out["profile"], latency)


def _receipt(args, out, device):
    """How the result was measured (PROTOCOL.md `receipt`); fields that are unknown are left
    out."""
    problem = out.get("problem") or {}
    r = {"device": args.device, "target": out.get("target"), "lnc": out.get("lnc"),
         "harness_version": out.get("harness_version"),
         "seeds": problem.get("seeds") or args.seeds, "warmup": args.warmup, "iters": args.iters,
         "input_signature": problem.get("signature"),
         "input_seeds": problem.get("input_seeds"), "seed_secret": problem.get("seed_secret")}
    if args.device in SIM_DEVICES:
        from harnesslib import simdev  # noqa: PLC0415
        r["simulator_version"] = simdev.nkisim_version()
        r["profile_format"] = "nkisim"
        r["profile_schema"] = "nkisim-%s" % r["simulator_version"]
    elif args.device == "fake":
        r["profile_format"] = "fake"
    elif device is not None:
        for key in ("sdk", "neff_hash", "profile_format", "profile_schema"):
            value = getattr(device, "receipt_" + key, lambda: None)()
            if value:
                r[key] = value
    return {k: v for k, v in r.items() if v is not None}


def _run_device(args, out, ctx, holder):
    ctx.enter("load")
    try:
        import numpy  # noqa: F401,PLC0415
    except ImportError:
        raise HarnessFailure("unavailable", "device %r needs numpy: python module 'numpy' not "
                             "importable by %s" % (args.device, sys.executable))
    from harnesslib import scan  # noqa: PLC0415
    from harnesslib.problem import (describe_inputs, is_array, load_problem,  # noqa: PLC0415
                                    output_names, signature)
    from harnesslib.refcache import RefCache, default_dir  # noqa: PLC0415

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
    out["lnc"] = _lnc(args, target)
    if args.device in SIM_DEVICES:
        _use_cost_table(args, target, out)
    kernel_path = os.path.abspath(args.kernel)
    problem_seeds = list(args.seeds or problem.seeds)
    if args.fixed_seeds and args.seed_secret is None:
        seeds, secret = problem_seeds, None
    else:
        secret = args.seed_secret or os.urandom(16).hex()
        seeds = draw_seeds(problem_seeds, secret)
    first_inputs = problem.make_inputs(seeds[0])
    # the signature (part of the evaluation's key) describes the problem's own first seed: a
    # scalar input made from the seed would otherwise differ in every evaluation
    sig_inputs = first_inputs
    if secret is not None and not all(is_array(v) for v in first_inputs.values()):
        sig_inputs = problem.make_inputs(problem_seeds[0])
    out["problem"] = {"file": problem.path, "seeds": problem_seeds,
                      "signature": signature(sig_inputs, problem.input_dtypes),
                      "inputs": describe_inputs(sig_inputs, problem.input_dtypes)}
    del sig_inputs
    if secret is not None:
        out["problem"]["input_seeds"] = seeds
        out["problem"]["seed_secret"] = secret
    params = list(first_inputs)
    if problem.outputs_spec is not None:
        out["problem"]["outputs"] = output_names(problem, first_inputs)
        params += out["problem"]["outputs"]
    arrays = [n for n in params if n not in first_inputs or is_array(first_inputs[n])]
    bind_name, bind = None, None
    if problem.bind == "position":
        # the kernel's own parameter names replace the inputs' (PROTOCOL.md "Problem files")
        from harnesslib.problem import positional_parameters  # noqa: PLC0415
        bind_name, kernel_params = positional_parameters(
            kernel_path, len(params), args.kernel_name or problem.kernel_name)
        bind = dict(zip(params, kernel_params))
        arrays = [bind[n] for n in arrays]
        params = kernel_params
        out["problem"]["bind"] = "position"
    findings = scan.scan_file(kernel_path, arrays,
                              args.kernel_name or bind_name or problem.kernel_name, params)
    if findings:
        raise HarnessFailure("forbidden_access", scan.refusal_message(findings),
                             line=findings[0].line)
    workdir = args.workdir or tempfile.mkdtemp(prefix="autocomp-harness-")
    os.makedirs(workdir, exist_ok=True)
    device = _make_device(args, target, workdir)
    holder.append(device)
    kernel = device.load_kernel(kernel_path, params, args.kernel_name,
                                bind_name or problem.kernel_name)
    out["kernel"] = {"name": kernel.name, "file": kernel_path}
    if hasattr(device, "namespace"):
        out["kernel"]["namespace"] = device.namespace
    # references of drawn seeds are never asked for again: the cache serves fixed seeds only
    cache = RefCache(None if args.no_ref_cache or secret is not None
                     else (args.ref_cache or default_dir()))
    run = _DeviceRun(args, problem, device, kernel, seeds, first_inputs, cache, target,
                     problem_seeds)
    run.bind = bind
    del first_inputs  # the run owns them (and may release them early)
    ctx.leave()

    if args.command in ("verify", "evaluate"):
        ctx.enter("verify")
        _verify(run, out)
        ctx.leave()
    if args.command in ("benchmark", "evaluate"):
        ctx.enter("benchmark")
        _benchmark(run, out)
        ctx.leave()
    if args.command in ("profile", "evaluate"):
        ctx.enter("profile")
        _profile(run, out)
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
    device_holder = []
    if args.command == "version":
        return _clean({"schema": SCHEMA, "harness_version": harness_version(args.device),
                       "command": "version", "device": args.device})
    try:
        with contextlib.redirect_stdout(sys.stderr), _alarm(args.timeout):
            out["harness_version"] = harness_version(args.device)
            _check_device_options(args)
            if args.command == "signature":
                _run_signature(args, out, ctx)
            elif args.device == "fake":
                _run_fake(args, out, ctx)
            else:
                _run_device(args, out, ctx, device_holder)
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
    while _RESTORE:
        _RESTORE.pop()()
    if out.get("verify") and out["status"] == "failed":
        out["verify"]["correct"] = False
    if args.command == "signature":
        keep = ("schema", "harness_version", "command", "status", "failure", "problem")
        return _clean({k: out[k] for k in keep if k in out})
    try:
        out["receipt"] = _receipt(args, out, device_holder[0] if device_holder else None)
    except Exception as e:  # a receipt must never cost the result
        out["receipt"] = {"device": args.device, "error": str(e)}
    out["timings_ms"] = ctx.timings
    return _clean(out)


def _device_arg(argv):
    """The --device value in argv (default 'sim'), read before argument parsing."""
    device = "sim"
    for i, a in enumerate(argv):
        if a == "--device" and i + 1 < len(argv):
            device = argv[i + 1]
        elif a.startswith("--device="):
            device = a.split("=", 1)[1]
    return device


def _not_dumpable():
    """Linux: no core dumps, and /proc/<pid>/{fd,mem,environ} of this process closed to other
    processes of the same user (prctl PR_SET_DUMPABLE 0)."""
    try:
        import ctypes  # noqa: PLC0415
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass


def main(argv=None):
    """Entry point: the real stdout is moved to a private descriptor before any kernel or
    problem code runs (fd 1 points at stderr meanwhile); the result line is encoded without
    `json` and written there; then the process ends with os._exit, so a thread the kernel left
    running can neither write after the result nor keep the process alive."""
    argv = sys.argv[1:] if argv is None else argv
    _not_dumpable()
    memory.reuse_freed_memory()
    if _device_arg(argv) in SIM_DEVICES:
        threads.single_threaded_blas()
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
