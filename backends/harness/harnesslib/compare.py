"""Comparing kernel outputs with reference outputs.

Dtype policy (numpy has no bfloat16): every array has a *dtype name*. For a kernel output the
name comes from the device (the simulator reports NKI dtype names such as "bfloat16"; on real
hardware the numpy dtype name, or "bfloat16" when ml_dtypes is installed). The expected name is
the problem's OUTPUT_DTYPES entry, else the reference array's numpy dtype name. Names must be
equal, with one allowance: when the device cannot tell a bf16 tensor from a float32 one (it
reports "float32" for an output the problem declares "bfloat16"), the output is accepted and
its values are checked to be exactly representable in bf16. Values are then compared as
float64 (bf16 outputs are compared through their float32 values).

Non-finite values are part of the answer: every NaN, +inf and -inf of the reference must be
the same kind at the same position in the output, and a non-finite output where the reference
is finite fails. A reference with non-finite values is accepted only from a problem that
declares it expects them (EXPECT_NONFINITE = True, see nonfinite_reference).

Two tolerance modes: "elementwise" (|out - ref| <= atol + rtol*|ref| for every value) and
"rel_l2" (each output passes when ||out - ref||_2 < tol * ||ref||_2, the rule NKIBench's
kernels are judged by; an all-zero reference needs an exact output).
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
# Outputs are compared in flat chunks of this many elements, so a comparison never holds more
# than a few chunk-sized float64 temporaries, whatever the output size.
CHUNK = 1 << 20


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
    v = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    for lo in range(0, v.size, CHUNK):
        c = v[lo:lo + CHUNK]
        if np.any(c.view(np.uint32)[np.isfinite(c)] & np.uint32(0xFFFF)):
            return False
    return True


class _OutputCheck:
    """Error statistics of one output against its reference, gathered chunk by chunk."""

    def __init__(self, out, ref, rtol, atol):
        self.out = np.ascontiguousarray(out).reshape(-1)
        self.ref = np.ascontiguousarray(ref).reshape(-1)
        self.shape = tuple(ref.shape)
        self.rtol = rtol
        self.atol = atol
        self.finite = 0           # finite reference values
        self.stray = 0            # non-finite outputs where the reference is finite
        self.stray_nan = 0
        self.first_stray = None   # flat index
        self.nonfinite_differ = 0  # reference non-finite, output another kind or finite
        self.first_differ = None  # flat index
        self.max_abs = 0.0
        self.diff_sq = 0.0
        self.ref_sq = 0.0
        self.over = 0
        self.first_over = None    # flat index
        self.equal = []           # (lo, hi) of chunks found equal, not yet in finite / ref_sq

    def run(self):
        exact = self.rtol == 0.0 and self.atol == 0.0 and self.out.dtype == self.ref.dtype
        for lo in range(0, self.ref.size, CHUNK):
            hi = min(lo + CHUNK, self.ref.size)
            if exact and np.array_equal(self.out[lo:hi], self.ref[lo:hi]):
                # equal and NaN-free: no error; the reference's norm and finite count matter
                # only when some other chunk differs (see settle)
                self.equal.append((lo, hi))
                continue
            self._chunk(lo, hi)
        return self

    def settle(self):
        """Add the equal chunks to `finite` and `ref_sq`; returns what it added to `ref_sq`.
        Needed only when some error is nonzero: with no error at all rel L2 is 0 whatever
        the norm, and no message counts values."""
        added = 0.0
        for lo, hi in self.equal:
            r = self.ref[lo:hi].astype(np.float64)
            fin = np.isfinite(r)
            r = r if fin.all() else r[fin]
            self.finite += r.size
            added += float(np.dot(r, r))
        self.ref_sq += added
        self.equal = []
        return added

    def _chunk(self, lo, hi):
        o = self.out[lo:hi].astype(np.float64)
        r = self.ref[lo:hi].astype(np.float64)
        bad_out = ~np.isfinite(o)
        bad_ref = ~np.isfinite(r)
        stray = bad_out & ~bad_ref
        if stray.any():
            if self.first_stray is None:
                self.first_stray = lo + int(np.argmax(stray))
            self.stray += int(stray.sum())
            self.stray_nan += int(np.isnan(o[stray]).sum())
            return
        if self.stray:
            return
        self.finite += (hi - lo) - int(np.count_nonzero(bad_ref))
        if bad_ref.any():
            # same kind at the same place: NaN for NaN, +inf for +inf, -inf for -inf
            ro, rr = o[bad_ref], r[bad_ref]
            differ = ~((np.isnan(ro) & np.isnan(rr)) | (ro == rr))
            n = int(np.count_nonzero(differ))
            if n:
                if self.first_differ is None:
                    self.first_differ = lo + int(np.flatnonzero(bad_ref)[int(np.argmax(differ))])
                self.nonfinite_differ += n
        if bad_ref.any():
            fin = ~bad_ref
            idx = np.flatnonzero(fin)
            o, r = o[fin], r[fin]
        else:
            idx = None
        d = np.abs(o - r)
        if d.size:
            self.max_abs = max(self.max_abs, float(d.max()))
            self.diff_sq += float(np.dot(d, d))
            self.ref_sq += float(np.dot(r, r))
        over = d > self.atol + self.rtol * np.abs(r)
        n = int(np.count_nonzero(over))
        if n:
            if self.first_over is None:
                k = int(np.argmax(over))
                self.first_over = lo + (int(idx[k]) if idx is not None else k)
            self.over += n

    def index(self, flat):
        return tuple(int(x) for x in np.unravel_index(flat, self.shape)) if self.shape else ()


def compare_outputs(outputs, references, out_names=None, expected_names=None, rtol=None, atol=None,
                    tolerance="elementwise", rel_l2_tol=2e-5):
    """Compare one seed's outputs; returns (ok, max_abs_err, rel_l2_err, message).

    outputs / references: sequences of arrays. out_names: dtype names of the outputs as
    reported by the device (None: take the numpy names). expected_names: expected dtype names
    (None: the references' names). rtol/atol: problem overrides (scalar or per output).
    tolerance: "elementwise" or "rel_l2" (then rel_l2_tol applies and rtol/atol do not).
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
    counted = []  # checks whose errors and norm are in the totals
    for i, (out, ref) in enumerate(zip(outputs, references)):
        if not isinstance(out, np.ndarray):
            try:
                out = np.asarray(out)
            except Exception:
                return False, None, None, "output %d is not an array (%s)" % (i, type(out).__name__)
        if not isinstance(ref, np.ndarray):
            ref = np.asarray(ref)
        got_name = (out_names[i] if out_names and i < len(out_names) and out_names[i]
                    else dtype_name(out))
        want_name = (expected_names[i] if expected_names and i < len(expected_names)
                     else dtype_name(ref))
        if tuple(out.shape) != tuple(ref.shape):
            hint = ""
            if out.size == ref.size:
                hint = ("; same number of values in another layout: a reference module can "
                        "reshape kernel outputs in transform_nki_outputs(outputs, reference)")
            return False, None, None, ("output %d has shape %s, reference %s%s"
                                       % (i, tuple(out.shape), tuple(ref.shape), hint))
        if got_name != want_name:
            lenient = (want_name == "bfloat16" and got_name == "float32")
            if not lenient:
                problems.append("output %d has dtype %s, expected %s" % (i, got_name, want_name))
                continue
            if not _bf16_exact(out):
                problems.append("output %d has dtype float32 values that are not bfloat16 values "
                                "(expected dtype bfloat16)" % i)
                continue
        rt, at = default_tolerance(want_name)
        if _pick(rtol, i) is not None:
            rt = _pick(rtol, i)
        if _pick(atol, i) is not None:
            at = _pick(atol, i)
        if tolerance == "rel_l2":
            rt, at = 0.0, float("inf")  # no element bound: the norms decide below
        c = _OutputCheck(out, ref, rt, at).run()
        if c.over:
            c.settle()  # the message counts finite values
        if c.stray:
            problems.append("output %d has %d non-finite value(s) (%d NaN; first at index %s)%s"
                            % (i, c.stray, c.stray_nan, c.index(c.first_stray),
                               "; NaN marks memory the kernel never wrote" if c.stray_nan else ""))
            continue
        if c.nonfinite_differ:
            flat = c.first_differ
            problems.append("output %d: %d value(s) where the reference is non-finite are not "
                            "the same NaN/+inf/-inf (first at index %s: got %s, want %s)"
                            % (i, c.nonfinite_differ, c.index(flat), _kind(c.out[flat]),
                               _kind(c.ref[flat])))
            continue
        max_abs = max(max_abs, c.max_abs)
        diff_sq += c.diff_sq
        ref_sq += c.ref_sq
        counted.append(c)
        if tolerance == "rel_l2":
            diff, norm = c.diff_sq ** 0.5, c.ref_sq ** 0.5
            if not (diff < rel_l2_tol * norm or diff == 0.0):
                problems.append("output %d: relative L2 error %.3g is not below %g (||out - ref|| "
                                "= %.4g, ||ref|| = %.4g, max abs err %.3g)"
                                % (i, diff / norm if norm else float("inf"), rel_l2_tol, diff,
                                   norm, c.max_abs))
            continue
        if c.over:
            flat = c.first_over
            problems.append("output %d: %d of %d values outside rtol=%g atol=%g (max abs err %.3g "
                            "at %s: got %r, want %r)"
                            % (i, c.over, c.finite, rt, at,
                               c.max_abs, c.index(flat), float(c.out[flat]), float(c.ref[flat])))
    if diff_sq:
        ref_sq += sum(c.settle() for c in counted)
    rel_l2 = (diff_sq ** 0.5) / (ref_sq ** 0.5) if ref_sq > 0 else (diff_sq ** 0.5)
    if problems:
        return False, max_abs, rel_l2, "; ".join(problems)
    return True, max_abs, rel_l2, ""


def _kind(value):
    v = float(value)
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+inf" if v > 0 else "-inf"
    return "%r" % v


def nonfinite_reference(references):
    """(output index, count, first index, kind) of the first reference output holding NaN or
    inf, or None when every reference value is finite (integer outputs always are)."""
    for i, ref in enumerate(references):
        r = np.ascontiguousarray(ref).reshape(-1)
        if r.dtype.kind not in "fc":
            continue
        for lo in range(0, r.size, CHUNK):
            bad = ~np.isfinite(r[lo:lo + CHUNK])
            if bad.any():
                count = int(np.count_nonzero(bad)) + sum(
                    int(np.count_nonzero(~np.isfinite(r[k:k + CHUNK])))
                    for k in range(lo + CHUNK, r.size, CHUNK))
                flat = lo + int(np.argmax(bad))
                shape = tuple(np.shape(ref))
                where = tuple(int(x) for x in np.unravel_index(flat, shape)) if shape else ()
                return i, count, where, _kind(r[flat])
    return None


def region_text(mask):
    """A short description of where `mask` (bool array) is True: its bounding box as a
    slice per axis ("[64:128, :]", ":" for a whole axis), with how many elements it holds."""
    mask = np.asarray(mask)
    count = int(np.count_nonzero(mask))
    if mask.ndim == 0:
        return "[]", count
    parts = []
    for axis in range(mask.ndim):
        others = tuple(a for a in range(mask.ndim) if a != axis)
        hit = np.flatnonzero(mask.any(axis=others) if others else mask)
        lo, hi = int(hit[0]), int(hit[-1]) + 1
        if lo == 0 and hi == mask.shape[axis]:
            parts.append(":")
        elif hi == lo + 1:
            parts.append(str(lo))
        else:
            parts.append("%d:%d" % (lo, hi))
    return "[" + ", ".join(parts) + "]", count
