"""Device `sim`: the nkisim CPU simulator (backends/nkisim, next to this harness).

The simulator is imported from the folder beside the harness folder (same layout locally and
in the bundle uploaded to a remote host). Kernel files are imported only in a child process
(nkisim/sandbox/process.py), where `import nki...` and `import neuronxcc.nki...` resolve to
proxies of the simulator, loaded by harnesslib/simchild.py; this process replays the recorded
trace (nkisim/sandbox/replay.py).
"""
import gc
import json
import os
import sys

from harnesslib.failures import HarnessFailure, describe_exception, line_in_file
from harnesslib import simchild

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NKISIM_DIR = os.path.join(os.path.dirname(HARNESS_DIR), "nkisim")

_nkisim = None


def import_nkisim():
    """The nkisim module (imported once); unavailable when it cannot be imported."""
    global _nkisim
    if _nkisim is not None:
        return _nkisim
    if NKISIM_DIR not in sys.path:
        sys.path.insert(0, NKISIM_DIR)
    try:
        import nkisim  # noqa: PLC0415
    except Exception as e:
        raise HarnessFailure("unavailable", "device 'sim' needs the nkisim package at %s: %s"
                             % (NKISIM_DIR, describe_exception(e)))
    if not callable(getattr(nkisim, "simulate", None)):
        raise HarnessFailure("unavailable", "device 'sim': the nkisim package at %s has no "
                             "simulate() (incomplete install?)" % NKISIM_DIR)
    _nkisim = nkisim
    return nkisim


def nkisim_version():
    """nkisim.__version__, or None when the simulator cannot be imported."""
    try:
        return str(getattr(import_nkisim(), "__version__", "unknown"))
    except HarnessFailure:
        return None


class _Session:
    """The simulator's side of a KernelHandle: the child that loaded the kernel (until it
    records) and the traces recorded so far, one per input signature."""

    def __init__(self, config, process):
        self.config = config
        self.process = process
        self.traces = {}
        self.checked = set()  # keys of the traces a timed replay accepted


def _child_failure(ans):
    kind = ans.get("kind")
    if kind not in ("compile_error", "runtime_error", "forbidden_access", "timeout",
                    "harness_error", "unavailable"):
        kind = "runtime_error"
    line = ans.get("line")
    return HarnessFailure(kind, str(ans.get("message"))[:2000],
                          line=line if type(line) is int and line > 0 else None)


class SimDevice:
    """Runs kernels on nkisim; one instance per harness run.

    The kernel never runs in this process: `load_kernel` starts a child process that imports
    and selects it, and `run` has that child record the kernel's NKI API calls on shape/dtype
    placeholders (no input data exists there), then replays the trace here on the real
    inputs, once per seed. Outputs, latency and profile come from this process's replay
    only (nkisim MODEL.md, "Provenance").
    """

    name = "sim"

    def __init__(self, target, kernel_path=None, problem_path=None, lnc=None):
        self.nkisim = import_nkisim()
        self.lnc = lnc  # the launch's LNC degree (None: the target's)
        self._hidden = (os.path.abspath(problem_path),) if problem_path else ()
        self.target = target
        self._spare = None
        self._spare_path = os.path.abspath(kernel_path) if kernel_path else None
        try:  # the kernel's process starts now, while the caller makes inputs
            from nkisim import sandbox  # noqa: PLC0415
            self._spare = sandbox.KernelProcess(kernel_path=self._spare_path,
                                                loader=simchild.loader_spec(),
                                                hidden=self._hidden)
        except Exception:  # noqa: BLE001 - load_kernel starts one (and reports why not)
            self._spare = None

    def prepare(self):
        """Install the simulated NKI modules (for callers that import a kernel file here)."""
        self.nkisim.activate()

    def compile_error_types(self):
        return (self.nkisim.NkiCompileError,)

    def load_kernel(self, kernel_path, input_names, explicit_name=None, problem_kernel_name=None):
        """Start the kernel's process, which imports the file and selects the kernel: a
        KernelHandle. Nothing of the kernel file runs in this process."""
        from harnesslib.kernel import KernelHandle  # noqa: PLC0415
        from nkisim import sandbox  # noqa: PLC0415
        path = os.path.abspath(kernel_path)
        if not os.path.isfile(path):
            raise HarnessFailure("harness_error", "kernel file not found: %s" % kernel_path)
        self._check_namespace(path)
        config = {"kernel_path": path, "loader": simchild.loader_spec(), "target": self.target,
                  "input_names": list(input_names), "kernel_name": explicit_name,
                  "problem_kernel": problem_kernel_name}
        if self._hidden:  # the problem's call_kernel(kernel, **inputs) runs beside the kernel
            from harnesslib.binding import hook_source  # noqa: PLC0415
            config["call_hook"] = hook_source(self._hidden[0])
        from harnesslib.kernel import package_names  # noqa: PLC0415 - seen from here
        config["package_names"] = package_names(path, 0)
        proc, self._spare = self._spare, None
        if proc is not None and self._spare_path != path:
            proc.close()  # started for another file: the sandbox does not show this one
            proc = None
        if proc is None:
            proc = sandbox.KernelProcess(kernel_path=path, loader=simchild.loader_spec(),
                                         hidden=self._hidden)
        proc.start(config)
        ans = proc.loaded()
        if not ans.get("ok"):
            raise _child_failure(ans)
        name = ans.get("kernel_name")
        if type(name) is not str or not name.isidentifier():
            proc.close()
            raise HarnessFailure("runtime_error", "the kernel process named no kernel")
        return KernelHandle(name, path, fn=None, ref=_Session(config, proc))

    def _check_namespace(self, path):
        """A kernel whose namespace no SDK builds for the target fails here as on hardware
        (harnesslib/sdkformats.py), so a search repairs or drops it instead of optimizing a
        kernel that cannot ship."""
        from harnesslib import sdkformats  # noqa: PLC0415
        with open(path, encoding="utf-8", errors="replace") as f:
            source = f.read()
        refused = sdkformats.target_problem(self.target, sdkformats.detect_namespace(source),
                                            device="sim")
        if refused:
            raise HarnessFailure(refused[0], "target %s: %s" % (self.target, refused[1]))

    def _trace(self, session, inputs, grid, input_dtypes):
        """(key, trace) of the kernel for these input specs, recorded once per key."""
        from nkisim import sandbox  # noqa: PLC0415
        from nkisim.sandbox import boundary  # noqa: PLC0415
        request = {"inputs": _input_specs(inputs, boundary),
                   "input_dtypes": dict(input_dtypes or {}), "grid": _grid_json(grid)}
        key = json.dumps([request, self.target], sort_keys=True)
        trace = session.traces.get(key)
        if trace is not None:
            return key, trace
        proc = session.process
        session.process = None
        if proc is None:  # another input signature: a fresh process
            proc = sandbox.KernelProcess(session.config)
            ans = proc.loaded()
            if not ans.get("ok"):
                raise _child_failure(ans)
        # the answer is one large JSON document: parsing it with the cyclic collector on
        # costs more than twice the parse (every collection walks the objects made so far)
        collecting = gc.isenabled()
        gc.disable()
        try:
            trace = proc.record(request)
        finally:
            if collecting:
                gc.enable()
        if not trace.get("ok"):
            raise _child_failure(trace)
        session.traces[key] = trace
        return key, trace

    def run(self, handle, inputs, grid=None, numerics=True, input_dtypes=None, timing=True,
            read_only=()):
        """Simulate one call; returns the simulator result. Failures become HarnessFailure.
        timing=False: only the outputs are wanted (the trace was timed on another seed;
        latency and metrics of this result are zero). read_only: names of the inputs the
        kernel must leave alone; a write into one is a `mismatch` at the writing line."""
        path = handle.path
        nk = self.nkisim
        from nkisim.sandbox import boundary, replay  # noqa: PLC0415
        session = handle.ref
        key, trace = self._trace(session, inputs, grid, input_dtypes)
        try:
            result = replay.replay(trace, dict(inputs), target=self.target, grid=grid,
                                   lnc=self.lnc,
                                   numerics=numerics, input_dtypes=input_dtypes,
                                   kernel_path=path, hotspots=timing, timing=timing,
                                   read_only=frozenset(read_only),
                                   checked=key in session.checked)
            if timing:
                session.checked.add(key)
            return result
        except boundary.NkiInputWritten as e:
            raise HarnessFailure("mismatch", e.message, line=e.line)
        except boundary.NkiForbiddenAccess as e:
            raise HarnessFailure("forbidden_access", e.message, line=e.line)
        except nk.NkiCompileError as e:
            raise HarnessFailure("compile_error", e.message,
                                 line=e.line or line_in_file(e.__traceback__, path))
        except nk.NkiRuntimeError as e:
            raise HarnessFailure("runtime_error", e.message,
                                 line=e.line or line_in_file(e.__traceback__, path))
        except RecursionError as e:
            raise HarnessFailure("runtime_error", describe_exception(e),
                                 line=line_in_file(e.__traceback__, path))
        except Exception as e:
            line = line_in_file(e.__traceback__, path)
            raise HarnessFailure("runtime_error", "%s%s" % (
                "" if line else "inside the simulator: ", describe_exception(e)), line=line)

    @staticmethod
    def outputs(result):
        """(arrays, dtype names or None) of a simulator result."""
        outs = result.outputs
        if not isinstance(outs, (tuple, list)):
            outs = (outs,)
        names = getattr(result, "output_dtypes", None)
        if names is not None:
            names = [str(getattr(n, "name", n)) for n in names]
        return list(outs), names

    @staticmethod
    def latency_us(result):
        return float(result.latency_us)

    @staticmethod
    def profile(result):
        """{"metrics", "roofline", "bottleneck"} from a simulator result."""
        return {
            "metrics": dict(getattr(result, "metrics", None) or {}),
            "roofline": dict(getattr(result, "roofline", None) or {}),
            "bottleneck": getattr(result, "bottleneck", None) or "unknown",
        }


def _grid_json(grid):
    if grid is None:
        return None
    if isinstance(grid, (int,)) or hasattr(grid, "__index__"):
        return [int(grid)]
    return [int(g) for g in grid]


def _input_specs(inputs, boundary):
    """name -> {"shape", "dtype"} (arrays) or {"value"} (scalars): all the child learns."""
    import numpy as np  # noqa: PLC0415
    specs = {}
    for name, a in inputs.items():
        if isinstance(a, (np.ndarray, np.generic)) and np.ndim(a) == 0:
            a = np.asarray(a).item()
        if isinstance(a, np.ndarray):
            specs[name] = {"shape": list(a.shape), "dtype": a.dtype.name}
        elif hasattr(a, "shape") and hasattr(a, "dtype") and not boundary.is_value(a):
            specs[name] = {"shape": [int(n) for n in a.shape], "dtype": str(
                getattr(a.dtype, "name", a.dtype))}
        else:
            try:
                specs[name] = {"value": boundary.encode(a, _no_object)}
            except Exception as e:
                raise HarnessFailure("problem_error", "input %r: %s" % (name, e))
    return specs


def _no_object(v):
    raise ValueError("inputs must be arrays or plain values, not %s" % type(v).__name__)
