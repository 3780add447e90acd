"""Loading and validating a problem file (design.md §5.1, PROTOCOL.md "Problem files").

Two formats are accepted (PROTOCOL.md is the one description of both):

1. A problem file (a Python module):
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
  BIND              "name" (default: inputs are passed as keyword arguments named like the
                    inputs) or "position" (in input order, whatever the kernel calls them)
  TOLERANCE         "elementwise" (default, RTOL/ATOL) or "rel_l2": each output passes when
                    ||out - ref||_2 < REL_L2 * ||ref||_2 (REL_L2 default 2e-5)
  VECTOR_FLOPS, MATMUL_FLOPS, MIN_BYTES   figures for the percent-of-peak rules (number or
                    callable(**inputs)); counted from the reference when absent (peaks.py)
  call_kernel(kernel, **inputs)  calls the entry point itself where the kernel runs (config
                    objects, Enums, `kernel[lnc](...)`): harnesslib/binding.py
  STRESS            {name: function(inputs) -> inputs}: variants of a drawn seed's inputs that
                    test the claim, not the draw (shifted rows, extreme magnitudes, aligned
                    vectors); verify checks each after the seeds (harnesslib/stress.py)

2. A reference module (NKIBench's format): get_inputs() -> list of arrays/scalars drawn from
   numpy's global generator, forward(*inputs) -> output(s); optional
   transform_to_nki_inputs(inputs) -> the kernel's arguments and
   transform_nki_outputs(kernel_outputs, reference) -> outputs shaped like the reference.
   Inputs are bound by position, each seed runs np.random.seed(seed) before get_inputs(),
   seeds default to 0, 21, 42, 63, 84, and outputs compare by relative L2 error (2e-5).
   The optional settings of format 1 apply as well.
Any error while importing or calling these is a `problem_error`.
"""
import hashlib
import importlib.util
import inspect
import math
import os
import sys

import numpy as np

from harnesslib.failures import HarnessFailure, describe_exception

DEFAULT_SEEDS = (0, 1, 2, 3, 4)
REFERENCE_MODULE_SEEDS = (0, 21, 42, 63, 84)
DEFAULT_REL_L2 = 2e-5
TOLERANCE_MODES = ("elementwise", "rel_l2")
BIND_MODES = ("name", "position")


def load_module(path, prefix):
    """Import a Python file under a unique module name; its folder is put on sys.path first."""
    path = os.path.abspath(path)
    digest = hashlib.sha1(path.encode()).hexdigest()[:10]
    name = "%s_%s" % (prefix, digest)
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return exec_file_as(name, path)


def exec_file_as(name, path):
    """Run the Python file `path` as module `name` (registered in sys.modules while it runs,
    removed again when it fails) and return the module."""
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
        self.format = "problem"
        self.bind = _choice(module, "BIND", BIND_MODES, "name")
        self.tolerance = _choice(module, "TOLERANCE", TOLERANCE_MODES, "elementwise")
        self.rel_l2 = float(getattr(module, "REL_L2", DEFAULT_REL_L2))
        self.call_kernel = getattr(module, "call_kernel", None)  # binding.py; runs sandboxed
        if self.call_kernel is not None:
            from harnesslib.binding import check_hook  # noqa: PLC0415
            check_hook(self.call_kernel)
        from harnesslib import stress  # noqa: PLC0415
        self.stress = stress.check_spec(module)
        self.peak_specs = {k: getattr(module, k, None)
                           for k in ("VECTOR_FLOPS", "MATMUL_FLOPS", "MIN_BYTES")}
        with open(self.path, "rb") as f:
            self.source_sha256 = hashlib.sha256(f.read()).hexdigest()

    def transform_outputs(self, outputs, reference):
        """The kernel's outputs as the reference holds them (identity in this format)."""
        return list(outputs)

    def reference_inputs(self, inputs, seed):
        """The arguments reference() was called with for these kernel inputs: {name: value}."""
        return inputs

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
        return _checked_inputs(value, "inputs(%d)" % seed)

    def make_stress(self, name, fn, base):
        """The stress input `name` made from a drawn seed's inputs `base` (stress.py)."""
        from harnesslib import stress  # noqa: PLC0415
        return stress.make(name, fn, base, _checked_inputs)

    def stress_reference(self, inputs, name):
        """reference(**inputs) for a stress input (the function may write into `inputs`)."""
        return self._call_reference(inputs, "stress input %r" % name)

    def _call_reference(self, inputs, what):
        try:
            value = self.reference_fn(**inputs)
        except Exception as e:
            raise HarnessFailure("problem_error", "reference(...) for %s raised %s"
                                 % (what, describe_exception(e)))
        return _reference_arrays(value)

    def make_reference(self, inputs, seed, copy_inputs=True):
        """reference(**inputs) as a tuple of numpy arrays; problem_error otherwise. The
        reference gets copies of the input arrays unless copy_inputs is False (the caller
        does not use them afterwards, so a reference that writes into them harms nothing)."""
        copies = {k: v.copy() if copy_inputs and isinstance(v, np.ndarray) else v
                  for k, v in inputs.items()}
        return self._call_reference(copies, "seed %d" % seed)


class ReferenceModuleProblem(Problem):
    """A reference module (NKIBench's format): get_inputs()/forward(...) and the optional
    transform hooks; bound by position, seeded through numpy's global generator, compared by
    relative L2 error unless the module says otherwise."""

    def __init__(self, path, module):
        module_defaults = {"SEEDS": REFERENCE_MODULE_SEEDS, "BIND": "position",
                           "TOLERANCE": "rel_l2"}
        for name, value in module_defaults.items():
            if not hasattr(module, name):
                setattr(module, name, value)
        self.get_inputs_fn = module.get_inputs
        self.forward_fn = module.forward
        self.to_nki = getattr(module, "transform_to_nki_inputs", None)
        self.from_nki = getattr(module, "transform_nki_outputs", None)
        module.inputs = self._inputs
        module.reference = self._reference
        super().__init__(path, module)
        if self.stress and self.to_nki is not None:
            raise HarnessFailure("problem_error", "STRESS needs the kernel's inputs to be "
                                 "get_inputs()'s: a reference module with "
                                 "transform_to_nki_inputs cannot declare it")
        self.format = "reference-module"
        self._raw = None  # (seed, inputs as get_inputs() made them) of the latest seed
        self._names = None

    def _draw(self, seed):
        np.random.seed(seed)
        try:
            raw = self.get_inputs_fn()
        except Exception as e:
            raise HarnessFailure("problem_error", "get_inputs() for seed %d raised %s"
                                 % (seed, describe_exception(e)))
        if isinstance(raw, (np.ndarray, int, float, bool, np.generic)):
            raw = [raw]
        if not isinstance(raw, (list, tuple)) or not raw:
            raise HarnessFailure("problem_error", "get_inputs() must return a non-empty list of "
                                 "numpy arrays and scalars, got %s" % type(raw).__name__)
        self._raw = (seed, list(raw))
        return list(raw)

    def _input_names(self, count):
        """The kernel arguments' names: forward's parameter names when they are as many as
        the kernel's arguments (the inputs are not regrouped), else input0, input1, ..."""
        if self._names is None or len(self._names) != count:
            names = []
            try:
                params = list(inspect.signature(self.forward_fn).parameters.values())
                if all(p.kind == p.POSITIONAL_OR_KEYWORD for p in params):
                    names = [p.name for p in params]
            except (TypeError, ValueError):
                names = []
            if len(names) != count:
                names = ["input%d" % i for i in range(count)]
            self._names = names
        return self._names

    def _inputs(self, seed):
        raw = self._draw(seed)
        args = raw
        if self.to_nki is not None:
            try:
                args = self.to_nki(list(raw))
            except Exception as e:
                raise HarnessFailure("problem_error", "transform_to_nki_inputs(...) for seed %d "
                                     "raised %s" % (seed, describe_exception(e)))
            if isinstance(args, tuple):
                args = list(args)
            if not isinstance(args, list) or not args:
                raise HarnessFailure("problem_error", "transform_to_nki_inputs(...) must return "
                                     "a non-empty list, got %s" % type(args).__name__)
        return dict(zip(self._input_names(len(args)), args))

    def reference_inputs(self, inputs, seed):
        raw = self._raw[1] if self._raw is not None and self._raw[0] == seed else self._draw(seed)
        return {"input%d" % i: v for i, v in enumerate(raw)}

    def _reference(self, **inputs):
        return self.forward_fn(*inputs.values())

    def make_reference(self, inputs, seed, copy_inputs=True):
        raw = self.reference_inputs(inputs, seed)
        self._raw = None  # the reference is the last reader of get_inputs()'s arrays
        return Problem.make_reference(self, raw, seed, copy_inputs=copy_inputs)

    def transform_outputs(self, outputs, reference):
        """transform_nki_outputs(kernel outputs, reference outputs) when the module has it:
        both as one value, or a tuple when there are several."""
        outputs = list(outputs)
        if self.from_nki is None:
            return outputs
        k_res = outputs[0] if len(outputs) == 1 else tuple(outputs)
        ref = reference[0] if len(reference) == 1 else tuple(reference)
        try:
            value = self.from_nki(k_res, ref)
        except Exception as e:
            raise HarnessFailure("problem_error", "transform_nki_outputs(...) raised %s (kernel "
                                 "outputs: %s; reference: %s)" % (
                                     describe_exception(e), _shapes(outputs), _shapes(reference)))
        items = list(value) if isinstance(value, (tuple, list)) else [value]
        return [np.asarray(v) for v in items]


def _shapes(arrays):
    return ", ".join(str(tuple(getattr(a, "shape", ()))) for a in arrays) or "none"


def _choice(module, name, allowed, default):
    value = getattr(module, name, default)
    if value not in allowed:
        raise ValueError("%s must be one of %s, got %r" % (name, ", ".join(map(repr, allowed)),
                                                           value))
    return value


def _constant(v, what, k):
    """A Python scalar, or a tuple (nested) of them, as a kernel's compile-time constant
    argument (numpy scalars become Python ones); problem_error for anything else."""
    if isinstance(v, np.generic) and not isinstance(v, np.ndarray):
        v = v.item()
    if isinstance(v, tuple):
        return tuple(_constant(item, what, k) for item in v)
    if not isinstance(v, (bool, int, float)):
        raise HarnessFailure("problem_error", "%s[%r] is or holds %s, not a numpy array, a "
                             "Python int/float/bool or a tuple of them"
                             % (what, k, type(v).__name__))
    if isinstance(v, float) and not math.isfinite(v):
        raise HarnessFailure("problem_error", "%s[%r] is or holds %r: scalar inputs must "
                             "be finite" % (what, k, v))
    return v


def _checked_inputs(value, what):
    """A dict of numpy arrays and constants: Python scalars and (nested) tuples of them, such
    as a kernel's `padding=((0, 0), (1, 1))` (numpy scalars become Python ones)."""
    out = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise HarnessFailure("problem_error", "%s: key %r is not a string" % (what, k))
        out[k] = v if isinstance(v, np.ndarray) else _constant(v, what, k)
    return out


def _reference_arrays(value):
    """Reference outputs as a tuple of numpy arrays; problem_error otherwise."""
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
    cls = _problem_format(module)
    try:
        return cls(path, module)
    except HarnessFailure:
        raise
    except Exception as e:
        raise HarnessFailure("problem_error", "invalid problem settings: %s" % describe_exception(e))


AUTO_KERNEL_NAMES = ("kernel", "optimized_kernel")


def positional_parameters(kernel_path, count, explicit=None):
    """(kernel function name, its first `count` parameter names) for binding inputs by
    position, read from the kernel file's source (nothing of it runs here). The function is
    the one named (--kernel-name, the problem's KERNEL), else one called `kernel` or
    `optimized_kernel`, else the single top-level function that takes `count` positional
    arguments (decorated ones win a tie). compile_error when none or several fit."""
    import ast  # noqa: PLC0415
    try:
        with open(kernel_path, encoding="utf-8", errors="replace") as f:
            tree = ast.parse(f.read())
    except SyntaxError as e:
        raise HarnessFailure("compile_error", "syntax error: %s" % e.msg, line=e.lineno)
    except (OSError, ValueError) as e:
        raise HarnessFailure("harness_error", "cannot read the kernel file: %s" % e)
    funcs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef,
                                                            ast.AsyncFunctionDef))}

    def fits(fn):
        a = fn.args
        positional = a.posonlyargs + a.args
        required = len(positional) - len(a.defaults)
        return required <= count <= len(positional)

    def describe(fn):
        return "%s(%s)" % (fn.name, ", ".join(x.arg for x in fn.args.posonlyargs + fn.args.args))

    name = explicit or next((n for n in AUTO_KERNEL_NAMES if n in funcs), None)
    if name is None:
        matching = [f for f in funcs.values() if fits(f)]
        if len(matching) > 1:
            matching = [f for f in matching if f.decorator_list] or matching
        if len(matching) != 1:
            raise HarnessFailure(
                "compile_error", "the problem binds its %d input(s) by position and %s; "
                "functions found: %s. Name the kernel `kernel`, set KERNEL in the problem file "
                "or pass the kernel_name argument (--kernel-name on the command line)" % (count, "no function takes that many arguments"
                                          if not matching else "several functions do",
                                          ", ".join(describe(f) for f in funcs.values())
                                          or "none"))
        name = matching[0].name
    fn = funcs.get(name)
    if fn is None:
        raise HarnessFailure("compile_error", "kernel file defines no top-level function %r; "
                             "functions found: %s" % (name, ", ".join(funcs) or "none"))
    if not fits(fn):
        raise HarnessFailure("compile_error", "the problem passes %d input(s) by position, but "
                             "kernel %s takes a different number of arguments (in a reference "
                             "module the inputs are what transform_to_nki_inputs() returns, "
                             "else what get_inputs() returns)" % (count, describe(fn)),
                             line=fn.lineno)
    return name, [x.arg for x in fn.args.posonlyargs + fn.args.args][:count]


# (class, functions it needs, optional functions): the accepted formats, in the order tried
FORMATS = (
    ("problem file", ("inputs", "reference"), ()),
    ("reference module (NKIBench)", ("get_inputs", "forward"),
     ("transform_to_nki_inputs", "transform_nki_outputs")),
)


def _problem_format(module):
    """The class that reads this module, or a problem_error naming what each format needs."""
    def has(name):
        return callable(getattr(module, name, None))
    if has("inputs") and has("reference"):
        return Problem
    if has("get_inputs") and has("forward"):
        return ReferenceModuleProblem
    found = sorted(n for n in ("inputs", "reference", "get_inputs", "forward",
                               "transform_to_nki_inputs", "transform_nki_outputs") if has(n))
    needs = "; ".join("a %s defines %s%s" % (
        label, " and ".join("%s()" % n for n in required),
        (" (optional: %s)" % ", ".join("%s()" % n for n in optional)) if optional else "")
        for label, required, optional in FORMATS)
    raise HarnessFailure("problem_error", "the problem file matches no accepted format: %s. "
                         "It defines %s (PROTOCOL.md \"Problem files\")"
                         % (needs, ", ".join("%s()" % n for n in found) or "none of these"))
