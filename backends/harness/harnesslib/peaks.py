"""Percent of peak under named rules.

A rule turns a problem into a theoretical least latency on a target; percent of peak is that
latency over the measured one (x 100). Rules:

`accelopt`: AccelOpt's published rule for NKIBench: theoretical = max(vector FLOPs / vector
  peak, matmul FLOPs / fp32 matmul peak, minimal bytes / HBM bandwidth). Problems with 16- or
  8-bit float inputs (none in NKIBench) divide matmul FLOPs by 4x the fp32 peak instead (the
  Tensor engine's low-precision rate). trn1 peaks as
  published: 2 engines (Vector, Scalar) x 128 lanes x 1.12 GHz = 286.72 GFLOP/s, 23.75 TFLOP/s
  fp32 matmul, 410 GiB/s. AccelOpt publishes no trn2 constants; trn2 figures here scale the
  trn1 ones by the simulator's trn2/trn1 ratios of the same quantities (Vector clock
  0.96/1.12, Tensor clock 2.4/2.8, HBM bytes/ns 362/410): 245.76 GFLOP/s, 20.357 TFLOP/s,
  362 GiB/s.
`roofline`: the product's own roofline as the profile carries it (the simulator's, or the one
  computed from hardware metrics): the largest share of a peak it reports (`*_pct` figures),
  at most 100 (the simulator's nominal DMA peak is below the rate its long rows stream at, so
  its HBM share can pass 100%). The tools state `floor` instead.
`floor`: the harness's modelled floor (floor.py `floor_us`: HBM bytes once at the model's best
  DMA rate, the problem's FLOPS at peak) over the latency: the one floor every output states.

Counting (accelopt): a problem may state VECTOR_FLOPS, MATMUL_FLOPS and MIN_BYTES (numbers or
callables of the inputs). Otherwise they are counted by running the reference once on arrays
that count the numpy operations applied to them:
  - an element-wise operation counts one FLOP per output element when its operands are all
    arrays of more than one element; operations with a constant scalar operand count nothing
    (they fuse into neighbouring instructions on the hardware, as the published rule assumes);
  - a reduction (np.sum, np.max, ufunc.reduce / accumulate) counts one FLOP per input element;
  - np.matmul / @ / np.dot count 2 x M x N x K matmul FLOPs; other functions count nothing;
  - minimal bytes are the reference's inputs read once plus its outputs written once, at their
    dtype sizes.
The published per-problem counts were made by hand, so counted figures can differ from them by
an operation per element (e.g. whether a division by a constant is counted).
"""
import numpy as np

GIB = float(1 << 30)
# Part of the cache key of stored counts: bump when the counting rules change.
COUNT_VERSION = 1

# target -> (vector FLOP/s, fp32 matmul FLOP/s, HBM bytes/s)
ACCELOPT_PEAKS = {
    "trn1": (2 * 128 * 1.12e9, 23.75e12, 410 * GIB),
    "trn2": (2 * 128 * 0.96e9, 23.75e12 * 2.4 / 2.8, 362 * GIB),
}
ACCELOPT_SOURCE = {
    "trn1": "published (AccelOpt, NKIBench percent of peak)",
    "trn2": "derived: trn1's published peaks scaled by the simulator's trn2/trn1 clock and "
            "bandwidth ratios (AccelOpt publishes no trn2 constants)",
}


class _Tally:
    def __init__(self):
        self.vector = 0
        self.matmul = 0


class _Counted(np.ndarray):
    """An ndarray view whose numpy operations add to `_Counted.tally`."""

    tally = None

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raw = [x.view(np.ndarray) if isinstance(x, _Counted) else x for x in inputs]
        out = kwargs.get("out")
        if out:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, _Counted) else o
                                  for o in out)
        result = getattr(ufunc, method)(*raw, **kwargs)
        _count_ufunc(ufunc, method, raw, result)
        return _wrap(result)

    def __array_function__(self, func, types, args, kwargs):
        result = super().__array_function__(func, types, args, kwargs)
        if func in (np.dot, np.inner) and len(args) >= 2:
            a, b = (np.asarray(x) for x in args[:2])
            if a.ndim and b.ndim and _Counted.tally is not None:
                _Counted.tally.matmul += 2 * int(np.size(result)) * int(a.shape[-1])
        return result


def _count_ufunc(ufunc, method, raw, result):
    tally = _Counted.tally
    if tally is None:
        return
    first = result[0] if isinstance(result, tuple) else result
    if method == "__call__":
        if ufunc is np.matmul:
            a = np.asarray(raw[0])
            tally.matmul += 2 * int(np.size(first)) * int(a.shape[-1] if a.ndim else 1)
            return
        operands = [x for x in raw[:ufunc.nin] if isinstance(x, np.ndarray) and x.size > 1]
        if len(operands) == ufunc.nin:
            tally.vector += int(np.size(first))
    elif method in ("reduce", "accumulate", "reduceat"):
        tally.vector += int(np.size(raw[0]))


def _wrap(value):
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, np.ndarray) and not isinstance(value, _Counted):
        return value.view(_Counted)
    return value


def count_reference(reference_fn, inputs):
    """(vector FLOPs, matmul FLOPs, outputs) of reference_fn(**inputs) run on counting views
    of the input arrays (views: a reference that writes into its inputs writes into them)."""
    tally = _Tally()
    args = {k: (v.view(_Counted) if isinstance(v, np.ndarray) else v)
            for k, v in inputs.items()}
    previous, _Counted.tally = _Counted.tally, tally
    try:
        with np.errstate(all="ignore"):
            value = reference_fn(**args)
    finally:
        _Counted.tally = previous
    items = value if isinstance(value, (tuple, list)) else (value,)
    outs = [np.asarray(v).view(np.ndarray) if isinstance(v, np.ndarray) else np.asarray(v)
            for v in items]
    return tally.vector, tally.matmul, outs


# The Tensor engine's 16- and 8-bit rate is 4x its fp32 rate (nkisim/machine/constants.py).
LOW_PRECISION_MATMUL_SPEEDUP = 4.0
LOW_PRECISION = ("bfloat16", "float16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2")


def matmul_precision(input_dtype_names):
    """"bfloat16" when some input is a 16- or 8-bit float (its matmuls can run at the
    low-precision rate), else "float32"."""
    return "bfloat16" if any(str(n) in LOW_PRECISION for n in input_dtype_names) else "float32"


def accelopt(latency_us, vector_flops, matmul_flops, min_bytes, target, precision="float32",
             cores=1):
    """The accelopt rule's figures for a latency, or None for a target it has no peaks for.
    precision "bfloat16" (16-/8-bit inputs; NKIBench's problems are all fp32) divides the
    matmul FLOPs by the low-precision rate, 4x the published fp32 peak, so a bf16 kernel is
    not credited with more than 100%. The peaks are one physical core's: a launch spanning
    `cores` cores (LNC=2) has that many times each (engines, and HBM bandwidth per core)."""
    peaks = ACCELOPT_PEAKS.get(str(target))
    if peaks is None:
        return None
    cores = max(1, int(cores))
    vec_peak, mm_peak, bw_peak = (p * cores for p in peaks)
    if precision != "float32":
        mm_peak *= LOW_PRECISION_MATMUL_SPEEDUP
    times = {"vector": vector_flops / vec_peak, "matmul": matmul_flops / mm_peak,
             "memory": min_bytes / bw_peak}
    bound = max(times, key=times.get)
    floor_us = times[bound] * 1e6
    out = {"rule": "accelopt", "target": str(target), "theoretical_us": floor_us,
           "bound": bound, "vector_flops": float(vector_flops),
           "matmul_flops": float(matmul_flops), "min_bytes": float(min_bytes),
           "matmul_precision": precision,
           "peak_vector_gflops": vec_peak / 1e9, "peak_matmul_tflops": mm_peak / 1e12,
           "peak_hbm_gibps": bw_peak / GIB, "cores": cores,
           "source": ACCELOPT_SOURCE[str(target)]}
    if latency_us and latency_us > 0:
        out["percent"] = 100.0 * floor_us / latency_us
    return out


def roofline_percent(roofline):
    """The largest share of a peak a roofline reports (its `*_pct` figures other than engine
    activity), or None."""
    shares = [float(v) for k, v in (roofline or {}).items()
              if k.endswith("_pct") and not k.startswith("busiest_engine")
              and isinstance(v, (int, float)) and not isinstance(v, bool)]
    return min(100.0, max(shares)) if shares else None


def floor_percent(latency_us, floor):
    if not floor or not latency_us or latency_us <= 0:
        return None
    floor_us = floor.get("floor_us")
    if not isinstance(floor_us, (int, float)) or floor_us <= 0:
        return None
    return 100.0 * floor_us / latency_us
