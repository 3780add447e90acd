"""Device `sim`: the nkisim CPU simulator (backends/nkisim, next to this harness).

The simulator is imported from the folder beside the harness folder (same layout locally and
in the bundle uploaded to a remote host) and activated before the kernel file is imported, so
`import nki...` and `import neuronxcc.nki...` resolve to it.
"""
import inspect
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


class SimDevice:
    """Runs kernels on nkisim; one instance per harness run."""

    name = "sim"

    def __init__(self, target):
        self.nkisim = import_nkisim()
        self.target = target
        self._params = set()
        try:
            self._params = set(inspect.signature(self.nkisim.simulate).parameters)
        except (TypeError, ValueError):
            pass

    def prepare(self):
        """Install the simulated NKI modules; call before importing the kernel file."""
        self.nkisim.activate()

    def compile_error_types(self):
        return (self.nkisim.NkiCompileError,)

    def load_kernel(self, kernel_path, input_names, explicit_name=None, problem_kernel_name=None):
        """Activate the simulator, import the kernel file and select the kernel: a KernelHandle."""
        from harnesslib.kernel import load_in_process  # noqa: PLC0415
        self.prepare()
        return load_in_process(kernel_path, input_names, explicit_name, problem_kernel_name,
                               self.compile_error_types())

    def run(self, handle, inputs, grid=None, numerics=True, input_dtypes=None):
        """Simulate one call; returns the simulator result. Failures become HarnessFailure."""
        kernel, kernel_path = handle.fn, handle.path
        kwargs = {"target": self.target, "grid": grid}
        if "numerics" in self._params:
            kwargs["numerics"] = numerics
        if input_dtypes and "input_dtypes" in self._params:
            kwargs["input_dtypes"] = dict(input_dtypes)
        nk = self.nkisim
        try:
            return nk.simulate(kernel, dict(inputs), **kwargs)
        except nk.NkiCompileError as e:
            raise HarnessFailure("compile_error", e.message,
                                 line=e.line or line_in_file(e.__traceback__, kernel_path))
        except nk.NkiRuntimeError as e:
            raise HarnessFailure("runtime_error", e.message,
                                 line=e.line or line_in_file(e.__traceback__, kernel_path))
        except RecursionError as e:
            raise HarnessFailure("runtime_error", describe_exception(e),
                                 line=line_in_file(e.__traceback__, kernel_path))
        except Exception as e:
            line = line_in_file(e.__traceback__, kernel_path)
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
