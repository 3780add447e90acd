"""Device `neuron`: the AWS Neuron SDK on a Trainium host (nki.md §1.2, §1.3, §3, §5).

Two kernel namespaces are supported:
  * `nki.*` (SDK >= 2.27): the kernel runs standalone through `nki.jit` with numpy arrays; the
    NEFF is kept with NKI_ARTIFACTS_DIR (set before `nki` is imported); latency and metrics
    come from `neuron-profile capture` + `view --output-format summary-json`.
  * `neuronxcc.nki.*` (older SDKs): `nki.baremetal` for correctness, `nki.benchmark` for
    latency percentiles, `nki.profile` for the summary JSON.
Everything that builds command lines or reads profiler output is a pure function below, so it
is unit-tested without the SDK.
"""
import glob
import importlib
import inspect
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

from harnesslib import sdkformats
from harnesslib.failures import HarnessFailure, describe_exception, line_in_file

PROFILER_TOOLS = ("neuron-profile", "neuron-explorer")
NEURON_BIN = "/opt/aws/neuron/bin"

# Per NeuronCore peaks used for the roofline of real profiles (nki.md §4.1):
# trn1 NeuronCore-v2: BF16 128*128*2*2.8e9 = 91.75 TFLOPS; HBM 820 GB/s per chip / 2 cores.
# trn2 NeuronCore-v3: BF16 78.6 TFLOPS [derived]; HBM 2.9 TB/s per chip / 8 physical cores.
PEAKS = {
    "trn1": {"peak_tflops": 91.75, "peak_hbm_gbps": 410.0},
    "trn2": {"peak_tflops": 78.6, "peak_hbm_gbps": 362.0},
}

# ---------------------------------------------------------------- pure helpers

def find_tool(which=shutil.which, exists=os.path.exists):
    """Path of neuron-profile (or neuron-explorer) on PATH or in /opt/aws/neuron/bin, or None."""
    for tool in PROFILER_TOOLS:
        found = which(tool)
        if found:
            return found
        candidate = os.path.join(NEURON_BIN, tool)
        if exists(candidate):
            return candidate
    return None


def missing_sdk_parts(namespace, need_profiler, module_available, tool_path):
    """Human-readable list of what is missing for the neuron device.

    namespace: 'nki' or 'neuronxcc'; module_available(name) -> bool; tool_path: result of
    find_tool(). Pure: the caller supplies the probes.
    """
    missing = []
    module = "nki" if namespace == "nki" else "neuronxcc"
    if not module_available(module):
        missing.append("python module '%s' not importable" % module)
    if need_profiler and not tool_path:
        missing.append("'neuron-profile' not on PATH")
    return missing


def unavailable_message(missing):
    return "device 'neuron' needs the AWS Neuron SDK: %s" % " and ".join(missing)


def module_available(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def neuron_env(base, target, artifacts_dir=None, visible_cores=None):
    """Environment for compiling/running on the device (new copy of `base`)."""
    env = dict(base)
    env.setdefault("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    if artifacts_dir:
        env["NKI_ARTIFACTS_DIR"] = artifacts_dir
    if visible_cores is not None:
        env["NEURON_RT_VISIBLE_CORES"] = str(visible_cores)
    path = env.get("PATH", "")
    if NEURON_BIN not in path.split(os.pathsep):
        env["PATH"] = path + os.pathsep + NEURON_BIN if path else NEURON_BIN
    return env


def build_capture_cmd(tool, neff, ntff, inputs=None, num_exec=1, profile_nth=1, extra=()):
    """`neuron-profile capture` command line.

    inputs: ordered {NEFF input name: .npy path}, passed as NAME PATH pairs after the options.
    num_exec runs are executed; every profile_nth-th one is traced (nki.md §3.1).
    """
    cmd = [tool, "capture", "-n", neff, "-s", ntff]
    if num_exec and int(num_exec) > 1:
        cmd += ["--num-exec", str(int(num_exec))]
    if profile_nth and int(profile_nth) > 1:
        cmd += ["--profile-nth-exec", str(int(profile_nth))]
    cmd += list(extra)
    for name, path in (inputs or {}).items():
        cmd += [name, path]
    return cmd


def build_view_cmd(tool, neff, ntff, output_format="summary-json", output_file=None):
    """`neuron-profile view` command line printing (or writing) the given format."""
    cmd = [tool, "view", "-n", neff, "-s", ntff, "--output-format", output_format]
    if output_file:
        cmd += ["--output-file", output_file]
    return cmd


def ntff_for_exec(ntff, k):
    """Trace file of the k-th execution (1-based): profile.ntff, profile_exec_<k>.ntff."""
    if k <= 1:
        return ntff
    root, ext = os.path.splitext(ntff)
    return "%s_exec_%d%s" % (root, k, ext or ".ntff")


def _to_number(v):
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        s = v.strip().rstrip("%").replace(",", "")
        try:
            return float(s)
        except ValueError:
            return None
    return None


def unwrap_summary(obj):
    """The flat summary dict inside summary-json output.

    Accepts the flat dict, `{"n_<hash>": {...}}` (one or more ids; the first dict value that
    looks like a summary wins), a list of those, or `{"summary": [...]}` (legacy json format).
    """
    for _ in range(4):
        if isinstance(obj, list):
            obj = next((x for x in obj if isinstance(x, dict)), {})
            continue
        if not isinstance(obj, dict):
            return {}
        if "summary" in obj and isinstance(obj["summary"], (list, dict)):
            obj = obj["summary"]
            continue
        dict_values = [v for v in obj.values() if isinstance(v, dict)]
        scalar_values = [v for v in obj.values() if not isinstance(v, (dict, list))]
        if dict_values and len(scalar_values) == 0:
            obj = next((v for v in dict_values if "total_time" in v), dict_values[0])
            continue
        return obj
    return obj if isinstance(obj, dict) else {}


def normalize_percent(metrics, mode="auto"):
    """Scale `*_percent` values to 0-100; drop negative ones (tools use them for 'unavailable').

    mode: 'fraction' (multiply by 100), 'percent' (keep), 'auto' (multiply when every
    non-negative percent value is <= 1.0 and at least one is > 0, i.e. the file holds fractions).
    """
    keys = [k for k in metrics if k.endswith("_percent")]
    vals = [metrics[k] for k in keys if metrics[k] is not None and metrics[k] >= 0]
    if mode == "auto":
        scale = 100.0 if vals and max(vals) <= 1.0 and max(vals) > 0 else 1.0
    else:
        scale = 100.0 if mode == "fraction" else 1.0
    out = dict(metrics)
    for k in keys:
        v = out[k]
        if v is None or v < 0:
            del out[k]
        else:
            out[k] = v * scale
    return out


def parse_summary_json(text, percent_mode="auto"):
    """Flat numeric metrics from `neuron-profile view --output-format summary-json` output.

    Tolerant: non-JSON text around the object is skipped, unknown or non-numeric values are
    dropped, `*_percent` fields are normalised to 0-100. Returns {} when nothing is found.
    """
    obj = None
    if isinstance(text, (dict, list)):
        obj = text
    else:
        text = text or ""
        try:
            obj = json.loads(text)
        except ValueError:
            start = text.find("{")
            end = text.rfind("}")
            if start >= 0 and end > start:
                try:
                    obj = json.loads(text[start:end + 1])
                except ValueError:
                    obj = None
    if obj is None:
        return {}
    flat = unwrap_summary(obj)
    metrics = {}
    for k, v in flat.items():
        n = _to_number(v)
        if n is not None and n == n:
            metrics[str(k)] = n
    return normalize_percent(metrics, percent_mode)


def roofline_from_metrics(metrics, target):
    """Roofline numbers from profile metrics; fields that cannot be computed are omitted."""
    peaks = PEAKS.get(target, PEAKS["trn2"])
    out = {"peak_tflops": peaks["peak_tflops"], "peak_hbm_gbps": peaks["peak_hbm_gbps"],
           "ridge_point": peaks["peak_tflops"] * 1e12 / (peaks["peak_hbm_gbps"] * 1e9)}
    t = metrics.get("total_time")
    flops = metrics.get("hardware_flops")
    if flops is not None:
        flops = flops - metrics.get("transpose_flops", 0.0)
    else:
        flops = metrics.get("model_flops")
    hbm = None
    if "hbm_read_bytes" in metrics or "hbm_write_bytes" in metrics:
        hbm = metrics.get("hbm_read_bytes", 0.0) + metrics.get("hbm_write_bytes", 0.0)
    if t and t > 0:
        if flops is not None:
            out["achieved_tflops"] = flops / t / 1e12
            out["compute_pct"] = 100.0 * out["achieved_tflops"] / peaks["peak_tflops"]
        if hbm is not None:
            out["achieved_hbm_gbps"] = hbm / t / 1e9
            out["hbm_pct"] = 100.0 * out["achieved_hbm_gbps"] / peaks["peak_hbm_gbps"]
    if flops is not None and hbm:
        out["arithmetic_intensity"] = flops / hbm
    return out


ENGINE_PERCENTS = (
    ("tensor", "tensor_engine_active_time_percent"),
    ("vector", "vector_engine_active_time_percent"),
    ("scalar", "scalar_engine_active_time_percent"),
    ("gpsimd", "gpsimd_engine_active_time_percent"),
    ("dma", "dma_active_time_percent"),
)


def bottleneck_from_metrics(metrics, roofline):
    """'compute-bound', 'memory-bound', '<engine>-bound' or 'latency-bound' (or 'unknown')."""
    c = roofline.get("compute_pct")
    m = roofline.get("hbm_pct")
    if c is not None and m is not None and max(c, m) >= 50.0:
        return "compute-bound" if c >= m else "memory-bound"
    busy = [(metrics[k], name) for name, k in ENGINE_PERCENTS if k in metrics]
    if busy:
        pct, name = max(busy)
        if pct >= 60.0:
            return "memory-bound" if name == "dma" else "%s-engine-bound" % name
        return "latency-bound"
    if c is None and m is None:
        return "unknown"
    return "latency-bound"


def newest_file(pattern):
    files = glob.glob(pattern, recursive=True)
    return max(files, key=os.path.getmtime) if files else None


# ---------------------------------------------------------------- the device

def _to_device_array(arr, dtype_name):
    if not isinstance(arr, np.ndarray):
        return arr  # a Python scalar bound as a kernel argument
    if not dtype_name or dtype_name == arr.dtype.name:
        return arr
    if dtype_name == "bfloat16":
        try:
            import ml_dtypes  # noqa: PLC0415
        except ImportError:
            raise HarnessFailure("unavailable", "bfloat16 inputs on device 'neuron' need the "
                                 "python module 'ml_dtypes' (not importable)")
        return arr.astype(ml_dtypes.bfloat16)
    return arr.astype(dtype_name)


def _from_device_array(arr):
    """(float-or-native numpy array, dtype name) of a device output."""
    arr = np.asarray(arr)
    name = arr.dtype.name
    if name in ("bfloat16",) or name.startswith("float8"):
        return arr.astype(np.float32), name
    return arr, name


class NeuronDevice:
    """Runs kernels on a local NeuronCore through the Neuron SDK."""

    name = "neuron"

    def __init__(self, target, kernel_path, workdir, command, run_cmd=None):
        self.target = target
        self.kernel_path = kernel_path
        self.workdir = workdir
        with open(kernel_path, encoding="utf-8", errors="replace") as f:
            self.namespace = sdkformats.detect_namespace(f.read()) or "nki"
        refused = sdkformats.target_problem(target, self.namespace)
        if refused:
            raise HarnessFailure(refused[0], "device 'neuron', target %s: %s" % (target,
                                                                                refused[1]))
        self.tool = find_tool()
        need_profiler = command in ("benchmark", "profile", "evaluate")
        missing = missing_sdk_parts(self.namespace, need_profiler, module_available, self.tool)
        if missing:
            raise HarnessFailure("unavailable", unavailable_message(missing))
        self.run_cmd = run_cmd or self._run_cmd
        self.artifacts = os.path.join(workdir, "artifacts")
        os.makedirs(self.artifacts, exist_ok=True)
        self.nki = None
        self.neff = None

    # -- process helpers
    @staticmethod
    def _run_cmd(cmd, env, timeout=600):
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, check=False)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def _tool_env(self):
        return neuron_env(os.environ, self.target, self.artifacts)

    def prepare(self):
        """Set the environment the SDK reads at import time, then import it."""
        os.environ.update(neuron_env(os.environ, self.target, self.artifacts))
        name = "nki" if self.namespace == "nki" else "neuronxcc.nki"
        try:
            self.nki = importlib.import_module(name)
        except Exception as e:
            raise HarnessFailure("unavailable", "importing %s failed: %s" % (name, describe_exception(e)))

    def compile_error_types(self):
        return ()

    def load_kernel(self, kernel_path, input_names, explicit_name=None, problem_kernel_name=None):
        """Import the SDK, then the kernel file, and select the kernel: a KernelHandle."""
        from harnesslib.kernel import load_in_process  # noqa: PLC0415
        self.prepare()
        return load_in_process(kernel_path, input_names, explicit_name, problem_kernel_name,
                               self.compile_error_types())

    def _launch(self, kernel, grid):
        return kernel[grid] if grid else kernel

    def run(self, handle, inputs, grid=None, numerics=True, input_dtypes=None):
        """Compile and run once on the device; returns (outputs, dtype names)."""
        kernel, kernel_path = handle.fn, handle.path
        args = {k: _to_device_array(v, (input_dtypes or {}).get(k)) for k, v in inputs.items()}
        try:
            if self.namespace == "nki":
                # Decorate plain functions; an @nki.jit object must not be wrapped twice.
                fn = self.nki.jit(kernel) if inspect.isfunction(kernel) else kernel
                result = self._launch(fn, grid)(**args)
                self.neff = newest_file(os.path.join(self.artifacts, "**", "*.neff"))
            else:
                neff = os.path.join(self.artifacts, "kernel.neff")
                # artifacts_dir must be an empty folder (nki.md §1.2): a fresh one per run.
                fn = self.nki.baremetal(kernel, save_neff_name=neff,
                                        artifacts_dir=tempfile.mkdtemp(prefix="cc-",
                                                                       dir=self.artifacts))
                result = self._launch(fn, grid)(**args)
                self.neff = neff if os.path.exists(neff) else None
        except HarnessFailure:
            raise
        except Exception as e:
            line = getattr(e, "line", None) or line_in_file(e.__traceback__, kernel_path)
            text = describe_exception(e)
            kind = "runtime_error" if re.search(r"NRT|Nrt|nrt_|runtime", text) else "compile_error"
            raise HarnessFailure(kind, text, line=line)
        outs = result if isinstance(result, (tuple, list)) else (result,)
        converted = [_from_device_array(o) for o in outs]
        return [c[0] for c in converted], [c[1] for c in converted]

    # -- benchmark / profile
    def _save_inputs(self, inputs, input_dtypes):
        paths = {}
        folder = os.path.join(self.workdir, "inputs")
        os.makedirs(folder, exist_ok=True)
        for name, arr in inputs.items():
            if not isinstance(arr, np.ndarray):
                continue  # scalars are compiled into the NEFF, not fed to it
            path = os.path.join(folder, name + ".npy")
            np.save(path, _to_device_array(arr, (input_dtypes or {}).get(name)))
            paths[name] = path
        return paths

    def _view_total_time(self, ntff):
        metrics = self._view(ntff)
        if "total_time" not in metrics:
            raise HarnessFailure("runtime_error", "profile of %s has no total_time" % ntff)
        return metrics["total_time"] * 1e6

    def _view(self, ntff):
        """Summary metrics of one trace: summary-json, else (a tool without it) the Parquet
        tables digested here when pyarrow is importable."""
        code, out, err = self.run_cmd(build_view_cmd(self.tool, self.neff, ntff), self._tool_env())
        if code != 0:
            digest = self._parquet_digest(ntff)
            if digest is None:
                raise HarnessFailure("runtime_error", "neuron-profile view failed (%d): %s"
                                     % (code, (err or out)[-800:]))
            out = digest
        return self._read_profile(out)

    def _parquet_digest(self, ntff, reader=None):
        folder = os.path.join(self.workdir, "parquet_" + os.path.basename(ntff))
        cmd = build_view_cmd(self.tool, self.neff, ntff, "parquet", folder)
        code, _, _ = self.run_cmd(cmd, self._tool_env())
        if code != 0:
            return None
        try:
            reader = reader or getattr(self, "parquet_reader", None) or \
                sdkformats.read_parquet_tables
            tables = reader(folder)
        except ImportError:
            return None
        return sdkformats.digest_from_tables(tables) if tables else None

    def _read_profile(self, text):
        metrics, fmt, schema = sdkformats.parse_profile(text, parse_summary_json)
        if fmt:
            self.profile_format = fmt
        if schema:
            self.profile_schema = schema
        return metrics

    # -- receipt fields (autocomp_harness._receipt)
    def receipt_sdk(self, version_of=None):
        """{distribution: version} of the Neuron Python packages that are installed."""
        if version_of is None:
            from importlib import metadata  # noqa: PLC0415
            version_of = metadata.version
        out = {}
        for dist in ("nki", "neuronx-cc", "libneuronxla", "torch-neuronx", "neuronx-runtime"):
            try:
                out[dist] = str(version_of(dist))
            except Exception:
                continue
        return out or None

    def receipt_neff_hash(self):
        neff = getattr(self, "neff", None)
        if not neff or not os.path.exists(neff):
            return None
        import hashlib  # noqa: PLC0415
        with open(neff, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]

    def receipt_profile_format(self):
        return getattr(self, "profile_format", None)

    def receipt_profile_schema(self):
        return getattr(self, "profile_schema", None)

    def _capture(self, inputs, input_dtypes, num_exec, profile_nth, tag):
        if not self.neff:
            raise HarnessFailure("runtime_error", "no NEFF was produced by the compile step")
        ntff = os.path.join(self.workdir, "%s.ntff" % tag)
        cmd = build_capture_cmd(self.tool, self.neff, ntff, self._save_inputs(inputs, input_dtypes),
                                num_exec=num_exec, profile_nth=profile_nth)
        code, out, err = self.run_cmd(cmd, self._tool_env())
        if code != 0:
            raise HarnessFailure("runtime_error", "neuron-profile capture failed (%d): %s"
                                 % (code, (err or out)[-800:]))
        return ntff

    def benchmark_samples(self, handle, inputs, warmup, iters, grid=None, input_dtypes=None):
        """One measurement: list of per-execution latencies in microseconds."""
        kernel = getattr(handle, "fn", None)
        if self.namespace == "nki":
            ntff = self._capture(inputs, input_dtypes, warmup + iters, 1, "bench")
            return [self._view_total_time(ntff_for_exec(ntff, k))
                    for k in range(warmup + 1, warmup + iters + 1)]
        args = {k: _to_device_array(v, (input_dtypes or {}).get(k)) for k, v in inputs.items()}
        fn = self.nki.benchmark(warmup=warmup, iters=iters)(kernel)
        self._launch(fn, grid)(**args)
        lat = fn.benchmark_result.nc_latency
        # nki.benchmark exposes percentiles only; they stand in for the sample list.
        return [float(lat.get_latency_percentile(p)) for p in (0, 50, 100)]

    def profile_metrics(self, handle, inputs, grid=None, input_dtypes=None):
        """Summary metrics of the second execution (the first carries start-up cost)."""
        kernel = getattr(handle, "fn", None)
        if self.namespace == "nki":
            ntff = self._capture(inputs, input_dtypes, 2, 2, "profile")
            path = ntff_for_exec(ntff, 2)
            return self._view(path if os.path.exists(path) else ntff)
        wd = os.path.join(self.workdir, "nki_profile")
        os.makedirs(wd, exist_ok=True)
        args = {k: _to_device_array(v, (input_dtypes or {}).get(k)) for k, v in inputs.items()}
        fn = self.nki.profile(working_directory=wd, save_neff_name="file.neff",
                              save_trace_name="profile.ntff", overwrite=True, profile_nth=2,
                              num_execs=2)(kernel)
        self._launch(fn, grid)(**args)
        report = newest_file(os.path.join(wd, "json_reports", "*.json"))
        if not report:
            raise HarnessFailure("runtime_error", "nki.profile wrote no json_reports/*.json in %s" % wd)
        with open(report, encoding="utf-8") as f:
            return self._read_profile(f.read())
