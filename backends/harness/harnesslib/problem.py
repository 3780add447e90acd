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

    def make_reference(self, inputs, seed):
        """reference(**inputs) as a tuple of numpy arrays; problem_error otherwise."""
        copies = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
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
