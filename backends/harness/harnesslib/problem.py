"""Loading and validating a problem file (design.md §5.1).

Contract of a problem file (a Python module):
  inputs(seed) -> dict[str, np.ndarray | int | float | bool]   named as the kernel's
                    parameters; Python scalars are bound as kernel arguments as they are
  reference(**inputs) -> ndarray | tuple  expected outputs, computed in float32/float64
optional:
  RTOL, ATOL        float, or a sequence with one value per output, overriding dtype defaults
  SEEDS             sequence of ints (default 0..4)
  KERNEL            name of the kernel function when the kernel file has several
  TARGET            default target ("trn1"/"trn2") when the caller does not give one
  GRID              SPMD launch grid, a tuple of ints (kernel[g0, g1](...))
  INPUT_DTYPES      {name: NKI dtype name} for inputs numpy cannot represent (bf16 inputs are
                    float32 arrays holding bf16-rounded values, declared here as "bfloat16")
  OUTPUT_DTYPES     sequence of NKI dtype names the kernel outputs must have (default: the
                    reference outputs' numpy dtype names)
  OUTPUTS           output parameters the harness allocates and passes to the kernel
                    (`kernel(x, out)`), in reference order: {name: (shape, dtype)}, or
                    {name: None} / a sequence of names to take shape and dtype from the
                    reference output at that position, or a callable(**inputs) returning such
                    a dict. The outputs compared are those arrays after the run (float arrays
                    start NaN-filled, so an output the kernel never writes fails).
  FLOPS             the problem's floating-point operations (number, or callable(**inputs));
                    with it the physical floor also covers peak compute
Any error while importing or calling these is a `problem_error`.
"""
import hashlib
import importlib.util
import math
import os
import sys

import numpy as np

from harnesslib.failures import HarnessFailure, describe_exception

DEFAULT_SEEDS = (0, 1, 2, 3, 4)


def load_module(path, prefix):
    """Import a Python file under a unique module name; its folder is put on sys.path first."""
    path = os.path.abspath(path)
    digest = hashlib.sha1(path.encode()).hexdigest()[:10]
    name = "%s_%s" % (prefix, digest)
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot import %s" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


class Problem:
    """A loaded problem file; attribute names follow the file's optional settings."""

    def __init__(self, path, module):
        self.path = os.path.abspath(path)
        self.module = module
        self.inputs_fn = module.inputs
        self.reference_fn = module.reference
        self.rtol = getattr(module, "RTOL", None)
        self.atol = getattr(module, "ATOL", None)
        self.seeds = tuple(int(s) for s in getattr(module, "SEEDS", DEFAULT_SEEDS))
        self.kernel_name = getattr(module, "KERNEL", None)
        self.target = getattr(module, "TARGET", None)
        grid = getattr(module, "GRID", None)
        self.grid = tuple(int(g) for g in grid) if grid else None
        self.input_dtypes = dict(getattr(module, "INPUT_DTYPES", {}) or {})
        out = getattr(module, "OUTPUT_DTYPES", None)
        self.output_dtypes = tuple(str(d) for d in out) if out else None
        self.outputs_spec = getattr(module, "OUTPUTS", None)
        self.flops_spec = getattr(module, "FLOPS", None)
        with open(self.path, "rb") as f:
            self.source_sha256 = hashlib.sha256(f.read()).hexdigest()

    def make_inputs(self, seed):
        """inputs(seed) checked to be a dict of numpy arrays and Python scalars (numpy scalars
        become Python ones); problem_error otherwise."""
        try:
            value = self.inputs_fn(seed)
        except Exception as e:
            raise HarnessFailure("problem_error", "inputs(%d) raised %s" % (seed, describe_exception(e)))
        if not isinstance(value, dict) or not value:
            raise HarnessFailure("problem_error",
                                 "inputs(%d) must return a non-empty dict of numpy arrays, got %s"
                                 % (seed, type(value).__name__))
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise HarnessFailure("problem_error", "inputs(%d): key %r is not a string" % (seed, k))
            if isinstance(v, np.generic) and not isinstance(v, np.ndarray):
                v = v.item()
            if not isinstance(v, (np.ndarray, bool, int, float)):
                raise HarnessFailure("problem_error", "inputs(%d)[%r] is %s, not a numpy array "
                                     "or a Python int/float/bool" % (seed, k, type(v).__name__))
            if isinstance(v, float) and not math.isfinite(v):
                raise HarnessFailure("problem_error", "inputs(%d)[%r] is %r: scalar inputs must "
                                     "be finite" % (seed, k, v))
            out[k] = v
        return out

    def make_reference(self, inputs, seed, copy_inputs=True):
        """reference(**inputs) as a tuple of numpy arrays; problem_error otherwise. The
        reference gets copies of the input arrays unless copy_inputs is False (the caller
        does not use them afterwards, so a reference that writes into them harms nothing)."""
        copies = {k: v.copy() if copy_inputs and isinstance(v, np.ndarray) else v
                  for k, v in inputs.items()}
        try:
            value = self.reference_fn(**copies)
        except Exception as e:
            raise HarnessFailure("problem_error", "reference(...) for seed %d raised %s"
                                 % (seed, describe_exception(e)))
        items = value if isinstance(value, (tuple, list)) else (value,)
        out = []
        for i, v in enumerate(items):
            if not isinstance(v, np.ndarray):
                try:
                    v = np.asarray(v)
                except Exception:
                    v = None
                if v is None or v.dtype == object:
                    raise HarnessFailure("problem_error", "reference output %d is not an array" % i)
            out.append(v)
        return tuple(out)


def _output_entries(problem, inputs):
    """[(name, spec or None)] of the problem's OUTPUTS for these inputs."""
    spec = problem.outputs_spec
    if callable(spec):
        try:
            spec = spec(**inputs)
        except Exception as e:
            raise HarnessFailure("problem_error", "OUTPUTS(...) raised %s" % describe_exception(e))
    if isinstance(spec, dict):
        entries = list(spec.items())
    elif isinstance(spec, (list, tuple)) and all(isinstance(n, str) for n in spec):
        entries = [(n, None) for n in spec]
    else:
        raise HarnessFailure("problem_error", "OUTPUTS must be a dict {name: (shape, dtype) or "
                             "None}, a sequence of names, or a callable returning the dict; got "
                             "%s" % type(spec).__name__)
    for name, entry in entries:
        if not isinstance(name, str) or not name.isidentifier():
            raise HarnessFailure("problem_error", "OUTPUTS name %r is not an identifier" % (name,))
        if name in inputs:
            raise HarnessFailure("problem_error", "OUTPUTS name %r is also an input" % name)
        if entry is not None and not (isinstance(entry, (tuple, list)) and len(entry) == 2):
            raise HarnessFailure("problem_error", "OUTPUTS[%r] must be (shape, dtype) or None"
                                 % name)
    return entries


def _host_dtype(name):
    """(numpy dtype holding the values, NKI dtype name) for a declared dtype."""
    text = str(getattr(name, "name", name))
    if text in ("bfloat16", "tfloat32", "float32r") or text.startswith("float8"):
        return np.dtype(np.float32), text
    dt = np.dtype(text)
    return dt, dt.name


def _filled(shape, dtype):
    if dtype.kind == "f" or dtype.kind == "c":
        return np.full(shape, np.nan, dtype=dtype)
    if dtype.kind in "iu":
        return np.full(shape, np.iinfo(dtype).max, dtype=dtype)
    return np.zeros(shape, dtype=dtype)


def output_names(problem, inputs):
    """Names of the problem's OUTPUTS parameters (validated), [] without OUTPUTS."""
    if problem.outputs_spec is None:
        return []
    return [name for name, _ in _output_entries(problem, inputs)]


def outputs_need_reference(problem):
    """True when some OUTPUTS entry takes its shape from the reference."""
    spec = problem.outputs_spec
    if spec is None or callable(spec):
        return False
    if isinstance(spec, dict):
        return any(v is None for v in spec.values())
    return True


def make_outputs(problem, inputs, reference=None):
    """{name: (array, NKI dtype name)} freshly allocated for the problem's OUTPUTS, or {}."""
    if problem.outputs_spec is None:
        return {}
    out = {}
    for i, (name, entry) in enumerate(_output_entries(problem, inputs)):
        try:
            if entry is None:
                if reference is None or i >= len(reference):
                    raise ValueError("no reference output %d to take its shape from" % i)
                declared = (problem.output_dtypes[i] if problem.output_dtypes
                            and i < len(problem.output_dtypes) else reference[i].dtype.name)
                shape = reference[i].shape
            else:
                shape, declared = entry
            host, nki_name = _host_dtype(declared)
            shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
            out[name] = (_filled(shape, host), nki_name)
        except HarnessFailure:
            raise
        except Exception as e:
            raise HarnessFailure("problem_error", "OUTPUTS[%r]: %s" % (name, describe_exception(e)))
    return out


def problem_flops(problem, inputs):
    """The problem's FLOPS for these inputs, or None."""
    spec = problem.flops_spec
    if spec is None:
        return None
    try:
        value = spec(**inputs) if callable(spec) else spec
        value = float(value)
    except Exception as e:
        raise HarnessFailure("problem_error", "FLOPS: %s" % describe_exception(e))
    if not math.isfinite(value) or value < 0:
        raise HarnessFailure("problem_error", "FLOPS must be a finite number >= 0, got %r" % value)
    return value


def is_array(value):
    return isinstance(value, np.ndarray)


def input_dtype(name, value, input_dtypes):
    """NKI dtype name of an input: INPUT_DTYPES first, else numpy's name; 'int'/'float'/'bool'
    for Python scalars."""
    if is_array(value):
        return str((input_dtypes or {}).get(name, value.dtype.name))
    return type(value).__name__


def describe_inputs(inputs, input_dtypes=None):
    """{name: {"shape", "dtype"}} for arrays, {name: {"dtype", "value"}} for scalars."""
    out = {}
    for k, v in inputs.items():
        if is_array(v):
            out[k] = {"shape": [int(d) for d in v.shape], "dtype": input_dtype(k, v, input_dtypes)}
        else:
            out[k] = {"dtype": input_dtype(k, v, input_dtypes), "value": v}
    return out


def _scalar_text(value):
    if isinstance(value, bool):
        return "True" if value else "False"
    return repr(value)


def signature(inputs, input_dtypes=None):
    """Canonical input signature: `name:dtype[d0,d1];...` sorted by name; scalars as
    `name:int=3` / `name:float=0.5` / `name:bool=True`. Part of every evaluation's cache key."""
    parts = []
    for k in sorted(inputs):
        v = inputs[k]
        dtype = input_dtype(k, v, input_dtypes)
        if is_array(v):
            parts.append("%s:%s[%s]" % (k, dtype, ",".join(str(int(d)) for d in v.shape)))
        else:
            parts.append("%s:%s=%s" % (k, dtype, _scalar_text(v)))
    return ";".join(parts)


def load_problem(path):
    """Load and validate a problem file; raises HarnessFailure(problem_error)."""
    if not os.path.isfile(path):
        raise HarnessFailure("problem_error", "problem file not found: %s" % path)
    try:
        module = load_module(path, "autocomp_problem")
    except SyntaxError as e:
        raise HarnessFailure("problem_error", "problem file does not parse: %s (line %s)"
                             % (e.msg, e.lineno))
    except Exception as e:
        raise HarnessFailure("problem_error", "importing the problem file raised %s"
                             % describe_exception(e))
    missing = [n for n in ("inputs", "reference") if not callable(getattr(module, n, None))]
    if missing:
        raise HarnessFailure("problem_error", "problem file must define %s()"
                             % " and ".join(missing))
    try:
        return Problem(path, module)
    except Exception as e:
        raise HarnessFailure("problem_error", "invalid problem settings: %s" % describe_exception(e))
