"""Floors: the least time any kernel could take for a problem on a target.

Two figures, each with one use:
- the modelled floor `floor_us` = max(unavoidable HBM bytes / the best DMA rate the model
  sustains (`dma_gbps`, long rows), FLOPS / peak compute): the one floor every output states
  ("floor reached", the `floor` percent-of-peak rule, the prompts);
- the physical floor `physical_floor_us` = max(bytes / peak HBM bandwidth, FLOPS / peak
  compute): only the `implausible` check uses it.
The HBM bytes are the problem's inputs read once plus its outputs written once (at their NKI
dtype sizes) and FLOPS is the problem's optional `FLOPS` setting. The peaks come from the
simulator's `backends/nkisim/nkisim/machine/constants.py` and its shipped cost table, loaded by
path and read only, so the floors are the same on every device. A latency below
`slack * physical floor` is `implausible`: slack is 1 on the simulator (its model cannot beat
its own peaks) and 0.5 on hardware (a logical NeuronCore may span two physical cores, LNC=2).
A target the constants do not describe has no floor.

`dma_rates` is the one achievable-bandwidth figure per transfer shape: GB/s a stream of rows
of a given contiguous length sustains under the cost table (the simulator's
costs.CostTable.dma_rate, restated here so that no simulator import is needed; a test checks
they agree). The profile, the prompts and CLAUDE.md quote these figures.
"""
import importlib.util
import json
import os

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONSTANTS_PATH = os.path.join(os.path.dirname(HARNESS_DIR), "nkisim", "nkisim", "machine", "constants.py")
COST_TABLES_PATH = os.path.join(os.path.dirname(CONSTANTS_PATH), "cost_tables.json")
SLACK = {"sim": 1.0}
HARDWARE_SLACK = 0.5
# Bytes per element of NKI dtype names numpy does not know.
NKI_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "tfloat32": 4, "float32r": 4, "float8_e4m3": 1,
                   "float8_e4m3fn": 1, "float8_e5m2": 1, "bool": 1}

# Row lengths (bytes of one contiguous run) the achievable-rate table states.
ROW_BYTES = (512, 2048, 8192, 32768, 131072)

_constants = None


def _load_constants():
    global _constants
    if _constants is None:
        spec = importlib.util.spec_from_file_location("autocomp_nkisim_constants", CONSTANTS_PATH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _constants = module
    return _constants


def _cost_table(name):
    """The simulator's shipped cost table of target `name` (cost_tables.json), {} if absent."""
    try:
        with open(COST_TABLES_PATH) as f:
            return json.load(f).get(name) or {}
    except (OSError, ValueError):
        return {}


def peaks(target):
    """{"peak_hbm_gbps", "peak_tflops", "source"} of a target, or None when unknown."""
    try:
        constants = _load_constants()
        t = constants.TARGETS.get(str(target).lower())
    except Exception:
        return None
    if t is None:
        return None
    flops = [v for k, v in vars(t).items() if k.startswith("peak_flops")]
    # The simulator's best sustained DMA rate (long rows): the faster of the cost table's
    # short-row regime (DMA peak times its efficiency) and its long-row stream rate, capped by
    # HBM. The modelled floor divides the bytes by it.
    costs = _cost_table(t.name)
    dma = float(t.dma_bytes_per_ns) * float(costs.get("dma_efficiency", 1.0))
    dma = min(max(dma, float(costs.get("dma_stream_bytes_per_ns") or 0.0)),
              float(t.hbm_bytes_per_ns))
    return {"peak_hbm_gbps": float(t.hbm_bytes_per_ns), "dma_gbps": dma,
            "dma_rates": {str(r): round(_dma_rate(costs, t, r), 1) for r in ROW_BYTES},
            "peak_tflops": max(flops) / 1e12 if flops else None,
            "source": "backends/nkisim/nkisim/machine/constants.py"}


def _dma_rate(costs, t, row_bytes):
    """GB/s (bytes/ns) of HBM<->SBUF rows of `row_bytes`: the faster of the short-row regime
    (per-run descriptor bytes at dma_efficiency of the nominal rate) and the long-row stream
    (per-run stream descriptor bytes at dma_stream_bytes_per_ns); as costs.dma_data_ns."""
    peak = min(float(t.dma_bytes_per_ns), float(t.hbm_bytes_per_ns))
    minimum = float(costs.get("dma_min_run_bytes") or 0)
    padded = max(float(row_bytes), minimum)
    short = (padded + float(costs.get("dma_descriptor_bytes", 0))) / (
        peak * float(costs.get("dma_efficiency", 1.0)))
    ns = short
    stream = float(costs.get("dma_stream_bytes_per_ns") or 0.0)
    if stream:
        ns = min(ns, (padded + float(costs.get("dma_stream_descriptor_bytes", 0))) / stream)
    return row_bytes / ns


def dma_rate(target, row_bytes):
    """GB/s the model sustains for rows of `row_bytes` on `target`, None for an unknown one."""
    try:
        t = _load_constants().TARGETS.get(str(target).lower())
    except Exception:
        return None
    if t is None or row_bytes <= 0:
        return None
    return _dma_rate(_cost_table(t.name), t, row_bytes)


def dtype_bytes(name, numpy_itemsize=None):
    if name in NKI_DTYPE_BYTES:
        return NKI_DTYPE_BYTES[name]
    try:
        import numpy as np  # noqa: PLC0415
        return int(np.dtype(name).itemsize)
    except (TypeError, ValueError):
        return int(numpy_itemsize or 4)


def tensor_bytes(shape, dtype_name, numpy_itemsize=None):
    n = 1
    for d in shape:
        n *= int(d)
    return n * dtype_bytes(dtype_name, numpy_itemsize)


def compute(target, device, hbm_bytes, flops=None, cores=1):
    """The floor as a dict (figures for the result), or None when the target has no peaks.
    cores: the physical cores of the logical core (LNC degree); each brings its own peaks."""
    p = peaks(target)
    if p is None:
        return None
    if cores > 1:
        p = dict(p)
        for k in ("peak_hbm_gbps", "dma_gbps", "peak_tflops"):
            if p.get(k):
                p[k] = p[k] * cores
    out = {"hbm_bytes": int(hbm_bytes), "peak_hbm_gbps": p["peak_hbm_gbps"],
           "hbm_floor_us": hbm_bytes / (p["peak_hbm_gbps"] * 1e3), "source": p["source"],
           "slack": SLACK.get(device, HARDWARE_SLACK),
           "dma_gbps": p["dma_gbps"], "dma_floor_us": hbm_bytes / (p["dma_gbps"] * 1e3),
           "dma_rates": p["dma_rates"]}
    out["floor_us"] = out["dma_floor_us"]
    out["physical_floor_us"] = out["hbm_floor_us"]
    if flops and p["peak_tflops"]:
        out["flops"] = float(flops)
        out["peak_tflops"] = p["peak_tflops"]
        out["compute_floor_us"] = float(flops) / (p["peak_tflops"] * 1e6)
        out["floor_us"] = max(out["floor_us"], out["compute_floor_us"])
        out["physical_floor_us"] = max(out["physical_floor_us"], out["compute_floor_us"])
    return out


def violation(latency_us, floor, target):
    """The `implausible` message when latency_us is below the floor (with its slack), else None."""
    if floor is None or latency_us is None:
        return None
    physical = floor.get("physical_floor_us", floor["floor_us"])
    limit = physical * floor["slack"]
    if latency_us >= limit:
        return None
    parts = ["%d bytes of HBM traffic (inputs read once, outputs written once) at %s's peak "
             "%.0f GB/s take %.4g us" % (floor["hbm_bytes"], target, floor["peak_hbm_gbps"],
                                         floor["hbm_floor_us"])]
    if "compute_floor_us" in floor:
        parts.append("the problem's %.4g FLOPS at %.4g TFLOPS take %.4g us"
                     % (floor["flops"], floor["peak_tflops"], floor["compute_floor_us"]))
    slack = "" if floor["slack"] == 1.0 else " (x%g slack on hardware)" % floor["slack"]
    return ("measured latency %.4g us is below the physical floor of %.4g us%s: %s"
            % (latency_us, physical, slack, "; ".join(parts)))
