"""Device `neuron` with the kernel confined: the SDK imports, compiles and runs kernel code only
in a child inside the OS sandbox (nkisim/sandbox/confine.py), never in the harness process.

Parent (`SandboxedNeuronDevice`, the device the harness uses): saves the inputs as .npy files
in `<workdir>/sandbox/in`, starts `python3 -I -B neuron_child.py` confined, sends one JSON
request, reads one JSON answer (bounded), and loads the outputs the child saved in
`<workdir>/sandbox/out` (numpy files, no pickle). The sandbox shows the child the interpreter,
the harness library, the kernel file, the SDK (its Python prefix and /opt/aws/neuron) and the
Neuron device nodes (/dev/neuron*), with `<workdir>/sandbox` writable; never the problem file,
the reference cache or the harness's result channel. Unlike on `sim`, process creation stays
allowed (the compiler runs as subprocesses) and there is no address-space limit (the runtime
maps device memory); the PID namespace still ends every process with the evaluation.

On the `nki` namespace the latency and profile come from `neuron-profile`, run by this process
on the NEFF the child compiled; on `neuronxcc` they come from the SDK's own `nki.benchmark` /
`nki.profile` inside the child (a kernel could forge those figures; the physical floor still
applies).
"""
import importlib.util
import json
import os
import select
import subprocess
import sys
import tempfile
import time

import numpy as np

from harnesslib.failures import HarnessFailure

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NKISIM_DIR = os.path.join(os.path.dirname(HARNESS_DIR), "nkisim")
CHILD = os.path.join(HARNESS_DIR, "harnesslib", "neuron_child.py")
MAX_ANSWER_BYTES = 16 << 20
TIMEOUT_S = float(os.environ.get("AUTOCOMP_NEURON_CHILD_TIMEOUT", "3600"))


def load_confine():
    """nkisim/sandbox/confine.py as a module, without importing the simulator package."""
    path = os.path.join(NKISIM_DIR, "nkisim", "sandbox", "confine.py")
    mod = sys.modules.get("autocomp_confine")
    if mod is None:
        spec = importlib.util.spec_from_file_location("autocomp_confine", path)
        if spec is None:
            raise HarnessFailure("unavailable", "the kernel sandbox needs %s" % path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules["autocomp_confine"] = mod
    return mod


def _sdk_paths(namespace):
    """Folders holding the SDK's Python package (bound and put on the child's sys.path)."""
    name = "nki" if namespace == "nki" else "neuronxcc"
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    if not locations and spec is not None and spec.origin:
        locations = [os.path.dirname(spec.origin)]
    return sorted({os.path.dirname(os.path.abspath(p)) for p in locations})


def _device_nodes():
    try:
        return sorted(os.path.join("/dev", n) for n in os.listdir("/dev") if n.startswith("neuron"))
    except OSError:
        return []


class SandboxedNeuronDevice:
    """The `neuron` device of harnesslib/neuron.py with every kernel call in a confined child."""

    name = "neuron"

    def __init__(self, target, kernel_path, workdir, command, run_cmd=None, problem_path=None):
        from harnesslib.neuron import NeuronDevice  # noqa: PLC0415
        self.box = os.path.join(os.path.abspath(workdir), "sandbox")
        os.makedirs(self.box, exist_ok=True)
        # checks the SDK is present; imports nothing of the kernel; runs neuron-profile here
        self.inner = NeuronDevice(target, kernel_path, self.box, command, run_cmd=run_cmd)
        self.namespace = self.inner.namespace
        self.target = target
        self.command = command
        self.kernel_path = os.path.abspath(kernel_path)
        self.problem_path = problem_path  # never shown to the kernel, even beside it
        self.calls = 0
        self.confine = load_confine()

    # -- the child
    def _child(self, request):
        confine = self.confine
        request = dict(request, target=self.target, command=self.command, box=self.box,
                       harness_dir=HARNESS_DIR, nkisim_dir=NKISIM_DIR,
                       kernel_path=self.kernel_path, sdk_paths=_sdk_paths(self.namespace))
        visible = [os.path.join(HARNESS_DIR, "harnesslib"), os.path.join(NKISIM_DIR, "nkisim"),
                   self.kernel_path] + request["sdk_paths"]
        visible += confine.local_modules(self.kernel_path, exclude=[self.problem_path])
        visible += [p for p in ("/opt/aws/neuron", "/sys") if os.path.isdir(p)]
        ans_r, ans_w = os.pipe()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOCOMP_")}
        env.update(confine.limits_env(TIMEOUT_S + 60, memory_mb=0, file_mb=4096, nproc=4096))
        env["AUTOCOMP_ANSWER_FD"] = str(ans_w)
        env["HOME"] = "/tmp"
        log = tempfile.TemporaryFile(prefix="neuron-child-")
        try:
            cmd = confine.command([sys.executable, "-I", "-B", CHILD],
                                  visible=[p for p in visible if os.path.exists(p)],
                                  writable=[self.box], devices=_device_nodes())
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=log, env=env,
                                    pass_fds=(ans_w,), close_fds=True)
        except confine.Unavailable as e:
            raise HarnessFailure("unavailable", str(e))
        except OSError as e:
            raise HarnessFailure("runtime_error", "cannot start the kernel process: %s" % e)
        finally:
            os.close(ans_w)
        try:
            try:
                proc.stdin.write((json.dumps(request) + "\n").encode())
                proc.stdin.close()
            except OSError:
                pass
            data = _read_answer(ans_r, proc, time.monotonic() + TIMEOUT_S)
        finally:
            os.close(ans_r)
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            log.seek(0)
            text = log.read(1 << 16).decode("utf-8", "replace")
            log.close()
            if text:
                sys.stderr.write(text)
        if data is None:
            problem = confine.startup_problem(text)
            if problem:
                raise HarnessFailure("unavailable", problem)
            raise HarnessFailure("runtime_error", "the kernel process ended without an answer")
        try:
            answer = json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            answer = None
        if type(answer) is not dict or type(answer.get("ok")) is not bool:
            raise HarnessFailure("runtime_error", "the kernel process wrote no valid answer")
        if not answer["ok"]:
            kind = answer.get("kind")
            if kind not in ("compile_error", "runtime_error", "timeout", "unavailable"):
                kind = "runtime_error"
            line = answer.get("line")
            raise HarnessFailure(kind, str(answer.get("message"))[:2000],
                                 line=line if type(line) is int and line > 0 else None)
        return answer

    def _in_box(self, path):
        real = os.path.realpath(str(path))
        if not real.startswith(os.path.realpath(self.box) + os.sep):
            raise HarnessFailure("runtime_error", "the kernel process named a file outside its "
                                 "folder")
        return real

    def _save_inputs(self, inputs):
        """name -> {"file"} (arrays; the child converts them to the device dtype) or
        {"value"} (scalars)."""
        self.calls += 1
        folder = os.path.join(self.box, "in%d" % self.calls)
        os.makedirs(folder, exist_ok=True)
        out = {}
        for name, value in inputs.items():
            if isinstance(value, np.ndarray):
                path = os.path.join(folder, name + ".npy")
                np.save(path, value, allow_pickle=False)
                out[name] = {"file": path}
            else:
                if isinstance(value, np.generic):
                    value = value.item()
                out[name] = {"value": value}
        return out

    # -- the device interface (harnesslib/neuron.py NeuronDevice)
    def compile_error_types(self):
        return ()

    def load_kernel(self, kernel_path, input_names, explicit_name=None, problem_kernel_name=None):
        from harnesslib.kernel import KernelHandle  # noqa: PLC0415
        select_args = {"input_names": list(input_names), "kernel_name": explicit_name,
                       "problem_kernel": problem_kernel_name}
        ans = self._child(dict(select_args, op="load"))
        name = ans.get("kernel_name")
        if type(name) is not str or not name.isidentifier():
            raise HarnessFailure("runtime_error", "the kernel process named no kernel")
        return KernelHandle(name, self.kernel_path, fn=None, ref=select_args)

    def _op(self, op, handle, inputs, grid, input_dtypes, **extra):
        return self._child(dict(handle.ref, op=op, inputs=self._save_inputs(inputs),
                                input_dtypes=dict(input_dtypes or {}),
                                grid=list(grid) if isinstance(grid, (list, tuple)) else grid,
                                out_dir=os.path.join(self.box, "out%d" % self.calls), **extra))

    def run(self, handle, inputs, grid=None, numerics=True, input_dtypes=None):
        ans = self._op("run", handle, inputs, grid, input_dtypes)
        outs, names = [], []
        for item in ans.get("outputs") or ():
            if type(item) is not dict:
                raise HarnessFailure("runtime_error", "the kernel process wrote no valid answer")
            try:
                outs.append(np.load(self._in_box(item.get("file")), allow_pickle=False))
            except (OSError, ValueError) as e:
                raise HarnessFailure("runtime_error", "output unreadable: %s" % e)
            names.append(str(item.get("dtype")))
        neff = ans.get("neff")
        self.inner.neff = self._in_box(neff) if neff else None
        return outs, names

    def benchmark_samples(self, handle, inputs, warmup, iters, grid=None, input_dtypes=None):
        if self.namespace == "nki":
            return self.inner.benchmark_samples(handle, inputs, warmup, iters, grid, input_dtypes)
        ans = self._op("benchmark", handle, inputs, grid, input_dtypes, warmup=warmup,
                       iters=iters)
        return [float(x) for x in ans.get("samples") or ()]

    def profile_metrics(self, handle, inputs, grid=None, input_dtypes=None):
        if self.namespace == "nki":
            return self.inner.profile_metrics(handle, inputs, grid, input_dtypes)
        ans = self._op("profile", handle, inputs, grid, input_dtypes)
        metrics = ans.get("metrics")
        if type(metrics) is not dict:
            raise HarnessFailure("runtime_error", "the kernel process wrote no metrics")
        return {str(k): float(v) for k, v in metrics.items()
                if type(v) in (int, float) and v == v}

    def receipt_sdk(self, version_of=None):
        return self.inner.receipt_sdk(version_of)

    def receipt_neff_hash(self):
        return self.inner.receipt_neff_hash()

    def receipt_profile_format(self):
        return self.inner.receipt_profile_format()

    def receipt_profile_schema(self):
        return self.inner.receipt_profile_schema()


def _read_answer(fd, proc, deadline):
    """The first line written to fd (bytes), or None when the child ends without one."""
    buf = b""
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HarnessFailure("timeout", "the kernel process did not answer within %gs"
                                 % TIMEOUT_S)
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            if proc.poll() is not None:
                ready, _, _ = select.select([fd], [], [], 0)
                if not ready:
                    return None
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None
        buf += chunk
        if len(buf) > MAX_ANSWER_BYTES:
            raise HarnessFailure("runtime_error", "the kernel process's answer is too large")
    return buf.split(b"\n", 1)[0]
