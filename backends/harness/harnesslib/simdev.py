"""Device `sim`: the nkisim CPU simulator (backends/nkisim, next to this harness).

The simulator is imported from the folder beside the harness folder (same layout locally and
in the bundle uploaded to a remote host) and activated before the kernel file is imported, so
`import nki...` and `import neuronxcc.nki...` resolve to it.
"""
import json
import os
import sys

from harnesslib.failures import HarnessFailure, describe_exception, line_in_file

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


class SimHandle:
    """A kernel loaded for the simulator: where it is and how to choose it. Its traces
    (one per input signature) are recorded in a child process on first use."""

    def __init__(self, kernel_path, kernel_name=None, problem_kernel=None):
        self.kernel_path = os.path.abspath(kernel_path)
        self.kernel_name = kernel_name
        self.problem_kernel = problem_kernel
        self.traces = {}
        self.name = None


class SimDevice:
    """Runs kernels on nkisim; one instance per harness run.

    The kernel never runs in this process: `load_kernel` names it, and `run` has a child
    process record its NKI API calls on shape/dtype placeholders (no input data exists
    there), then replays that trace here on the real inputs. Outputs, latency and profile
    come from this process's replay only (nkisim MODEL.md, "Provenance").
    """

    name = "sim"

    def __init__(self, target):
        self.nkisim = import_nkisim()
        self.target = target
        self._handles = {}

    def prepare(self):
        """Install the simulated NKI modules (for callers that import a kernel file here)."""
        self.nkisim.activate()

    def compile_error_types(self):
        return (self.nkisim.NkiCompileError,)

    def load_kernel(self, kernel_path, kernel_name=None, problem_kernel=None):
        """A handle for `run`; nothing of the kernel file is executed in this process."""
        if not os.path.isfile(kernel_path):
            raise HarnessFailure("harness_error", "kernel file not found: %s" % kernel_path)
        return SimHandle(kernel_path, kernel_name, problem_kernel)

    def _legacy_handle(self, kernel, kernel_path):
        """Handle for a kernel object already imported by the caller: its module attribute
        name, so the child selects the same kernel."""
        key = (id(kernel), kernel_path)
        hit = self._handles.get(key)
        if hit is not None:
            return hit[0]
        name = None
        for mod in list(sys.modules.values()):
            f = getattr(mod, "__file__", None)
            if not f or os.path.abspath(f) != os.path.abspath(kernel_path):
                continue
            for n, v in vars(mod).items():
                if v is kernel and not n.startswith("__"):
                    name = n
                    break
            if name:
                break
        if name is None:
            name = getattr(kernel, "__name__", None)
        h = SimHandle(kernel_path, kernel_name=name)
        self._handles[key] = (h, kernel)
        return h

    def run(self, kernel, inputs, kernel_path=None, grid=None, numerics=True,
            input_dtypes=None):
        """Simulate one call; returns the simulator result. Failures become HarnessFailure.

        kernel: a handle from `load_kernel` (or a kernel object the caller imported)."""
        if isinstance(kernel, SimHandle):
            handle = kernel
        else:
            handle = self._legacy_handle(kernel, kernel_path)
        path = handle.kernel_path
        nk = self.nkisim
        from nkisim import boundary, replay, sandbox  # noqa: PLC0415
        specs = _input_specs(inputs, boundary)
        key = json.dumps([specs, grid, sorted((input_dtypes or {}).items()), self.target],
                         sort_keys=True, default=str)
        trace = handle.traces.get(key)
        if trace is None:
            trace = sandbox.record_trace({
                "kernel_path": path, "harness_dir": HARNESS_DIR, "target": self.target,
                "inputs": specs, "input_dtypes": dict(input_dtypes or {}),
                "grid": _grid_json(grid), "kernel_name": handle.kernel_name,
                "problem_kernel": handle.problem_kernel})
            if not trace.get("ok"):
                kind = trace.get("kind")
                if kind not in ("compile_error", "runtime_error", "forbidden_access",
                                "timeout", "harness_error"):
                    kind = "runtime_error"
                line = trace.get("line")
                raise HarnessFailure(kind, str(trace.get("message"))[:2000],
                                     line=line if type(line) is int else None)
            handle.traces[key] = trace
            handle.name = trace.get("kernel_name")
        try:
            return replay.replay(trace, dict(inputs), target=self.target, grid=grid,
                                 numerics=numerics, input_dtypes=input_dtypes,
                                 kernel_path=path)
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
