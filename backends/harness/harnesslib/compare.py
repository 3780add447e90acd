"""Comparing kernel outputs with reference outputs.

Dtype policy (numpy has no bfloat16): every array has a *dtype name*. For a kernel output the
name comes from the device (the simulator reports NKI dtype names such as "bfloat16"; on real
hardware the numpy dtype name, or "bfloat16" when ml_dtypes is installed). The expected name is
the problem's OUTPUT_DTYPES entry, else the reference array's numpy dtype name. Names must be
equal, with one allowance: when the device cannot tell a bf16 tensor from a float32 one (it
reports "float32" for an output the problem declares "bfloat16"), the output is accepted and
its values are checked to be exactly representable in bf16. Values are then compared as
float64 (bf16 outputs are compared through their float32 values).
"""
import numpy as np

# (rtol, atol) by expected output dtype name.
DEFAULT_TOLERANCES = {
    "float64": (1e-6, 1e-8),
    "float32": (1e-4, 1e-5),
    "tfloat32": (2e-3, 1e-4),
    "float32r": (2e-3, 1e-4),
    "float16": (2e-3, 1e-3),
    "bfloat16": (2e-2, 1e-2),
    "float8_e4m3": (1.3e-1, 6e-2),
    "float8_e4m3fn": (1.3e-1, 6e-2),
    "float8_e5m2": (2.5e-1, 1.2e-1),
}
EXACT = (0.0, 0.0)


def dtype_name(arr):
    """NKI-style name of a numpy array's dtype."""
    name = arr.dtype.name
    return {"bool": "bool", "float": "float64"}.get(name, name)


def default_tolerance(name):
    """(rtol, atol) for an expected dtype name; integers and bool compare exactly."""
    return DEFAULT_TOLERANCES.get(name, EXACT)


def _pick(value, index):
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return float(value[index]) if index < len(value) else None
    return float(value)


def _bf16_exact(values):
    v = np.ascontiguousarray(values, dtype=np.float32)
    finite = np.isfinite(v)
    return not np.any(v.view(np.uint32)[finite] & np.uint32(0xFFFF))


def compare_outputs(outputs, references, out_names=None, expected_names=None, rtol=None, atol=None):
    """Compare one seed's outputs; returns (ok, max_abs_err, rel_l2_err, message).

    outputs / references: sequences of arrays. out_names: dtype names of the outputs as
    reported by the device (None: take the numpy names). expected_names: expected dtype names
    (None: the references' names). rtol/atol: problem overrides (scalar or per output).
    The first problem found is reported in `message`; errors are aggregated over all outputs
    (max of max-abs errors, rel L2 over all elements).
    """
    outputs = list(outputs)
    references = list(references)
    if len(outputs) != len(references):
        return False, None, None, ("kernel returned %d output(s), reference has %d"
                                   % (len(outputs), len(references)))
    max_abs = 0.0
    diff_sq = 0.0
    ref_sq = 0.0
    problems = []
    for i, (out, ref) in enumerate(zip(outputs, references)):
        if not isinstance(out, np.ndarray):
            try:
                out = np.asarray(out)
            except Exception:
                return False, None, None, "output %d is not an array (%s)" % (i, type(out).__name__)
        got_name = (out_names[i] if out_names and i < len(out_names) and out_names[i]
                    else dtype_name(out))
        want_name = (expected_names[i] if expected_names and i < len(expected_names)
                     else dtype_name(ref))
        if tuple(out.shape) != tuple(ref.shape):
            return False, None, None, ("output %d has shape %s, reference %s"
                                       % (i, tuple(out.shape), tuple(ref.shape)))
        if got_name != want_name:
            lenient = (want_name == "bfloat16" and got_name == "float32")
            if not lenient:
                problems.append("output %d has dtype %s, expected %s" % (i, got_name, want_name))
                continue
            if not _bf16_exact(out):
                problems.append("output %d has dtype float32 values that are not bfloat16 values "
                                "(expected dtype bfloat16)" % i)
                continue
        o = out.astype(np.float64)
        r = ref.astype(np.float64)
        bad_out = ~np.isfinite(o)
        bad_ref = ~np.isfinite(r)
        stray = bad_out & ~bad_ref
        if stray.any():
            n_nan = int(np.isnan(o[stray]).sum())
            problems.append("output %d has %d non-finite value(s) (%d NaN; first at index %s)%s"
                            % (i, int(stray.sum()), n_nan,
                               tuple(int(x) for x in np.argwhere(stray)[0]),
                               "; NaN marks memory the kernel never wrote" if n_nan else ""))
            continue
        both = bad_out & bad_ref
        if both.any() and not np.array_equal(o[both], r[both], equal_nan=True):
            problems.append("output %d: non-finite values differ from the reference" % i)
            continue
        fin = ~bad_ref
        d = np.abs(o[fin] - r[fin])
        if d.size:
            max_abs = max(max_abs, float(d.max()))
        diff_sq += float(np.dot(d, d)) if d.size else 0.0
        ref_sq += float(np.dot(r[fin], r[fin])) if d.size else 0.0
        rt, at = default_tolerance(want_name)
        if _pick(rtol, i) is not None:
            rt = _pick(rtol, i)
        if _pick(atol, i) is not None:
            at = _pick(atol, i)
        over = d > at + rt * np.abs(r[fin])
        if over.any():
            idx = np.argwhere(fin)[np.argmax(over)]
            problems.append("output %d: %d of %d values outside rtol=%g atol=%g (max abs err %.3g "
                            "at %s: got %r, want %r)"
                            % (i, int(over.sum()), int(over.size), rt, at, float(d.max()),
                               tuple(int(x) for x in idx), float(o[tuple(idx)]), float(r[tuple(idx)])))
    rel_l2 = (diff_sq ** 0.5) / (ref_sq ** 0.5) if ref_sq > 0 else (diff_sq ** 0.5)
    if problems:
        return False, max_abs, rel_l2, "; ".join(problems)
    return True, max_abs, rel_l2, ""
