"""Stress inputs: a problem's `STRESS = {name: fn(inputs) -> inputs}` (PROTOCOL.md "Stress
inputs").

Drawn seeds come from one distribution; a kernel can be right on all of them and wrong on what
the problem claims (a softmax without the row-max subtraction passes every input drawn from
3*N(0,1)). Each stress function takes the inputs of a drawn seed and returns a variant that
tests the claim (rows shifted by a large constant, extreme magnitudes, aligned vectors, zeros,
ties). verify runs the kernel on every stress input after the drawn seeds and compares it with
the reference on that input.

A malformed STRESS is the problem's fault (`problem_error`), never the kernel's: not a dict of
short names to functions, a function that raises, or a result whose names, array shapes,
dtypes or scalar values differ from the inputs it was given (the kernel is built for those).
"""
import numpy as np

from harnesslib.failures import HarnessFailure, describe_exception

MAX_NAME_CHARS = 40
MAX_STRESS_INPUTS = 8


def check_spec(module):
    """The module's STRESS as an ordered tuple of (name, function), () without one;
    problem_error for a malformed declaration."""
    spec = getattr(module, "STRESS", None)
    if spec is None:
        return ()
    if not isinstance(spec, dict):
        raise HarnessFailure("problem_error", "STRESS must be a dict {name: function(inputs) -> "
                             "inputs}, got %s" % type(spec).__name__)
    if len(spec) > MAX_STRESS_INPUTS:
        raise HarnessFailure("problem_error", "STRESS declares %d inputs; at most %d (each one "
                             "is a full kernel run per verify)" % (len(spec), MAX_STRESS_INPUTS))
    out = []
    for name, fn in spec.items():
        if not (isinstance(name, str) and name and len(name) <= MAX_NAME_CHARS
                and all(c.isalnum() or c in "_-." for c in name) and name.isascii()):
            raise HarnessFailure("problem_error", "STRESS name %.60r must be 1..%d ASCII letters, "
                                 "digits, '_', '-' or '.'" % (name, MAX_NAME_CHARS))
        if not callable(fn):
            raise HarnessFailure("problem_error", "STRESS[%r] must be a function(inputs) -> "
                                 "inputs, got %s" % (name, type(fn).__name__))
        out.append((name, fn))
    return tuple(out)


def make(name, fn, base, check_inputs):
    """fn(copy of base) checked against base: same names, arrays of the same shape and dtype,
    scalars unchanged. check_inputs(value, what) normalises the dict as inputs(seed)'s is."""
    copies = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in base.items()}
    what = "STRESS[%r]" % name
    try:
        value = fn(copies)
    except Exception as e:
        raise HarnessFailure("problem_error", "%s(inputs) raised %s"
                             % (what, describe_exception(e, limit=400)))
    if not isinstance(value, dict):
        raise HarnessFailure("problem_error", "%s(inputs) must return a dict of inputs like "
                             "inputs(seed)'s, got %s" % (what, type(value).__name__))
    value = check_inputs(value, what)
    if set(value) != set(base):
        missing = sorted(set(base) - set(value))
        extra = sorted(set(value) - set(base))
        raise HarnessFailure("problem_error", "%s(inputs) must return the same names as "
                             "inputs(seed)%s%s" % (
                                 what, "; missing %s" % ", ".join(missing) if missing else "",
                                 "; unexpected %s" % ", ".join(extra) if extra else ""))
    out = {}
    for k in base:  # the seed's order: inputs may be bound by position
        v, b = value[k], base[k]
        if isinstance(b, np.ndarray):
            if not isinstance(v, np.ndarray):
                raise HarnessFailure("problem_error", "%s(inputs)[%r] is %s, inputs(seed) gives "
                                     "an array" % (what, k, type(v).__name__))
            if v.shape != b.shape or v.dtype != b.dtype:
                raise HarnessFailure("problem_error", "%s(inputs)[%r] is %s %s, inputs(seed) "
                                     "gives %s %s: a stress input keeps shapes and dtypes"
                                     % (what, k, v.dtype, tuple(v.shape), b.dtype,
                                        tuple(b.shape)))
            out[k] = np.ascontiguousarray(v)
        else:
            if isinstance(v, np.ndarray) or type(v) is not type(b) or v != b:
                raise HarnessFailure("problem_error", "%s(inputs)[%r] is %.40r, inputs(seed) gives "
                                     "%.40r: a stress input keeps scalar inputs as they are"
                                     % (what, k, v, b))
            out[k] = v
    return out
