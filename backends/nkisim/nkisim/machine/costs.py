"""Cost tables: the free parameters of the timing model, one table per target, as data.

The hardware facts that are not fitted (clocks, partition count, capacities, peak rates) live
in constants.py. What an instruction or a transfer costs is priced from a `CostTable` read
from cost_tables.json beside this module; the simulator (core.py, isa.py, language.py,
simulator.py, timing.py) and export_facts.py read the same table, and calibrate.py fits it to
the public hardware anchors and writes it back.

A table may also come from an override file (`load_override`, the harness's `--cost-table`)
holding a subset of the fields, the rest taken from the shipped table; and a seeded fake
device scales the calibratable fields of a table (`perturbed_table`, the harness's
`--device sim-perturbed`).
"""
import hashlib
import json
import math
import os

from . import constants as C

TABLE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cost_tables.json")

# Every field a table holds, with its meaning (units in the name or the text).
FIELDS = {
    "vector_fixed_cycles": "VectorE static access overhead per instruction (cycles)",
    "vector_min_ii_cycles": "VectorE minimum initiation interval (cycles)",
    "vector_fixed_overlaps_min_ii": "true: an instruction takes max(min_ii, fixed + N x c); "
                                    "false: fixed + max(min_ii, N x c)",
    "vector_tt_cycles_per_elem": "VectorE tensor_tensor cycles per output element, both "
                                 "inputs in SBUF (fp32 or mixed dtypes)",
    "vector_cycles_per_elem": "VectorE cycles per element of other instructions",
    "vector_reciprocal_factor": "VectorE reciprocal cycles per element",
    "bn_aggr_factor": "VectorE bn_aggr cycles per element",
    "scalar_fixed_cycles": "ScalarE static access overhead per instruction (cycles)",
    "scalar_min_ii_cycles": "ScalarE minimum initiation interval (cycles)",
    "gpsimd_startup_cycles": "GpSimdE start-up per instruction (cycles)",
    "gpsimd_elems_per_cycle_32": "GpSimdE elements per cycle per partition per stream, 32-bit",
    "gpsimd_elems_per_cycle_16": "GpSimdE elements per cycle per partition per stream, 16-bit",
    "matmul_init_cycles": "TensorE pipeline fill when idle (cycles)",
    "matmul_fp32_factor": "TensorE slow-down for fp32 operands",
    "perf_mode_sbuf_16bit": "VectorE perf-mode speed-up, 16-bit SBUF->SBUF contiguous",
    "perf_mode_psum_16bit": "VectorE perf-mode speed-up, 16-bit with PSUM or strided",
    "perf_mode_tensor_tensor_16bit": "VectorE perf-mode speed-up of tensor_tensor, 16-bit SBUF",
    "dma_fixed_ns": "fixed latency of one DMA transfer (ns)",
    "dma_efficiency": "share of the nominal DMA rate sustained",
    "dma_descriptor_bytes": "per-descriptor (contiguous run) overhead in byte-equivalents",
    "dma_transpose_efficiency": "share of copy throughput of a transposing DMA",
    "dma_min_run_bytes": "a contiguous run shorter than this costs as much as one this long",
    "dma_stream_bytes_per_ns": "rate (bytes/ns) HBM<->on-chip transfers of long rows reach "
                               "(second regime; 0 = none)",
    "dma_stream_descriptor_bytes": "per-run overhead in byte-equivalents of the long-row "
                                   "regime",
    # instructions of the NKI 0.3+ API (nkisim/api/isa_predicated.py, isa_gather.py): priced
    # as their engine's streaming pass at these per-element rates (not calibrated)
    "tensor_copy_predicated_cycles_per_elem": "VectorE tensor_copy_predicated cycles per "
                                              "element",
    "range_select_cycles_per_elem": "VectorE range_select cycles per element",
    "select_reduce_cycles_per_elem": "VectorE select_reduce cycles per element",
    "tensor_scalar_cumulative_cycles_per_elem": "VectorE tensor_scalar_cumulative cycles per "
                                                "element",
    "nc_stream_shuffle_cycles_per_elem": "VectorE nc_stream_shuffle cycles per element per "
                                         "partition",
    "nc_match_replace8_cycles_per_elem": "VectorE nc_match_replace8 cycles per element",
    "nc_n_gather_streams": "GpSimdE nc_n_gather element streams (indices, data, output)",
    "nonzero_with_count_streams": "GpSimdE nonzero_with_count element streams",
    "load_reuse_stream_bytes": "duplicate-load elimination: a repeated nl.load is not issued "
                               "when at most this many bytes per partition of other data were "
                               "loaded into SBUF since the kept tile's last use (reuse "
                               "distance; decided by the effect probe load_reuse_distance)",
}


class CostTable:
    """One target's cost parameters (attributes named as in FIELDS)."""

    def __init__(self, name, values):
        missing = [k for k in FIELDS if k not in values]
        if missing:
            raise ValueError("cost table %s lacks %s" % (name, ", ".join(missing)))
        unknown = [k for k in values if k not in FIELDS and k != "sources"]
        if unknown:
            raise ValueError("cost table %s has unknown fields %s" % (name, ", ".join(unknown)))
        self.name = name
        self.sources = dict(values.get("sources", {}))
        for k in FIELDS:
            setattr(self, k, values[k])

    def as_dict(self):
        d = {k: getattr(self, k) for k in FIELDS}
        d["sources"] = dict(self.sources)
        return d

    def replace(self, **kw):
        d = self.as_dict()
        d.update(kw)
        return CostTable(self.name, d)

    # ---- engine costs in cycles ------------------------------------------------------------
    def vector_cycles(self, work):
        """Cycles of a VectorE instruction whose streaming part takes `work` cycles."""
        ii = self.vector_min_ii_cycles
        if self.vector_fixed_overlaps_min_ii:
            c = self.vector_fixed_cycles + work
            return c if c > ii else ii
        return self.vector_fixed_cycles + (work if work > ii else ii)

    def scalar_cycles(self, n):
        ii = self.scalar_min_ii_cycles
        return self.scalar_fixed_cycles + (n if n > ii else ii)

    def gpsimd_cycles(self, n, itemsize, streams):
        epc = self.gpsimd_elems_per_cycle_16 if itemsize <= 2 else self.gpsimd_elems_per_cycle_32
        return self.gpsimd_startup_cycles + streams * n / epc

    # ---- DMA --------------------------------------------------------------------------------
    def dma_effective_bytes(self, nbytes, runs):
        """Bytes of bandwidth a transfer of `nbytes` in `runs` contiguous runs occupies."""
        eff = nbytes + runs * self.dma_descriptor_bytes
        if self.dma_min_run_bytes and runs:
            short = runs * self.dma_min_run_bytes
            if short > nbytes:
                eff += short - nbytes
        return eff

    def dma_data_ns(self, nbytes, runs, peak, hbm_side=True):
        """ns of DMA bandwidth a transfer of `nbytes` in `runs` contiguous runs takes at a
        nominal rate of `peak` bytes/ns: the faster of two regimes, short rows (per-run
        overhead `dma_descriptor_bytes` at `dma_efficiency` of the nominal rate) and, for
        transfers between HBM and on-chip memory, long-row streams (per-run overhead
        `dma_stream_descriptor_bytes` at `dma_stream_bytes_per_ns`)."""
        ns = self.dma_effective_bytes(nbytes, runs) / (peak * self.dma_efficiency)
        if self.dma_stream_bytes_per_ns and hbm_side:
            eff = nbytes + runs * self.dma_stream_descriptor_bytes
            if self.dma_min_run_bytes and runs and runs * self.dma_min_run_bytes > nbytes:
                eff += runs * self.dma_min_run_bytes - nbytes
            s = eff / self.dma_stream_bytes_per_ns
            if s < ns:
                ns = s
        return ns

    def spill_ns(self, save_bytes, saves, reload_bytes, reloads, bandwidth):
        """ns of DMA bandwidth the spill traffic takes: `saves` transfers SBUF -> HBM of
        `save_bytes` in all and `reloads` back of `reload_bytes`, each transfer one row per
        partition (C.PMAX runs), at `bandwidth` bytes/ns (the short-row HBM rate)."""
        eff = (self.dma_effective_bytes(save_bytes, saves * C.PMAX) +
               self.dma_effective_bytes(reload_bytes, reloads * C.PMAX))
        return eff / bandwidth

    def transfer_ns(self, target, src_bytes, src_runs, src_hbm, dst_bytes, dst_runs,
                    dst_hbm):
        """ns of DMA bandwidth one transfer takes: its bytes in its descriptors (the runs of
        the side that needs more, both walked in the transfer's element order). HBM -> HBM
        reads and writes HBM: each side is charged, each with its own runs."""
        if src_hbm and dst_hbm:
            peak = hbm_dma_peak(target)
            return (self.dma_data_ns(src_bytes, src_runs, peak, True) +
                    self.dma_data_ns(dst_bytes, dst_runs, peak, True))
        hbm_side = src_hbm or dst_hbm
        peak = hbm_dma_peak(target) if hbm_side else target.dma_bytes_per_ns
        nbytes = src_bytes if src_bytes > dst_bytes else dst_bytes
        n = src_runs if src_runs > dst_runs else dst_runs
        return self.dma_data_ns(nbytes, n, peak, hbm_side)

    def dma_rate(self, row_bytes, peak):
        """Bytes/ns an HBM-side stream of `row_bytes`-long runs sustains (nominal `peak`)."""
        return row_bytes / self.dma_data_ns(row_bytes, 1, peak)


# ---- engine cost formulas that depend on operands ---------------------------------------
def pe_broadcast_cycles(table, n, itemsize):
    """TensorE cycles of broadcasting a one-partition row of `n` elements to all partitions
    (a ones-row matmul per PSUM bank of output, 512 fp32, at max(64, N_moving) cycles, x4
    for fp32 data), or None above four banks (2048 elements: the broadcast stays on GpSimdE
    in SBUF, leaving PSUM to the matmuls [model])."""
    if n > C.GEMM_MOVING_FMAX * C.PSUM_NUM_BANKS // 2:
        return None
    cyc = 0
    while n > 0:
        chunk = n if n < C.GEMM_MOVING_FMAX else C.GEMM_MOVING_FMAX
        cyc += chunk if chunk > 64 else 64
        n -= chunk
    if itemsize == 4:
        cyc *= table.matmul_fp32_factor
    return cyc


def perf_factor(table, target, kind, ins, outs):
    """trn2 VectorE perf mode speed-up (nki.md §4.2) of an instruction of `kind` over tiles
    `ins` (non-tiles ignored) and `outs`; 1 on targets without it."""
    if not target.vector_perf_mode:
        return 1.0
    ts = [t for t in ins if hasattr(t, "st")] + list(outs)
    for t in ts:
        if t.st.dt.itemsize != 2:
            return 1.0
    any_psum = False
    for t in ts:
        if t.st.kind == "psum":
            any_psum = True
    if kind == "tensor_tensor":
        for t in ins:
            if hasattr(t, "st") and t.st.kind != "sbuf":
                return 1.0
        return table.perf_mode_tensor_tensor_16bit
    if any_psum:
        return table.perf_mode_psum_16bit
    for t in ts:
        if not _contiguous_inner(t):
            return table.perf_mode_psum_16bit
    return table.perf_mode_sbuf_16bit


def _contiguous_inner(t):
    """True when the innermost axis of view t is unit-stride in its storage (the trn2 4x
    perf mode needs it; nki.md §4.2)."""
    sk, vd = t.sk, t.vd
    if sk is None:
        return False
    if not vd or vd[-1] < 0:
        return True
    k = sk[vd[-1]]
    if type(k) is int or k[2] == 1:
        return True
    return vd[-1] == len(sk) - 1 and k[1] == 1


# ---- DMA descriptors: contiguous runs along a transfer's traversal order -----------------
def runs(t):
    """Contiguous memory runs (DMA descriptors) of view `t` walked in its element order (the
    order a DMA pairs source and destination elements: row-major over the view's axes).
    A run grows from the innermost view axis outwards while each axis steps through memory
    by exactly the run so far; on-chip, each partition row is its own run. So a transposing
    view (innermost axis striding through memory) has runs of one element, each its own
    descriptor, whatever its storage's own layout."""
    sk = t.sk
    if sk is None:
        return _adv_runs(t)
    st = t.st
    shape = st.shape
    pdim = st.pdim if st.kind != "hbm" else -1
    stride = [0] * len(shape)
    acc = 1
    for d in range(len(shape) - 1, -1, -1):
        if d == pdim:
            continue  # partitions are separate rows of memory
        stride[d] = acc
        acc *= shape[d]
    run = 1
    for d in reversed(t.vd):
        if d < 0:
            continue
        k = sk[d]
        if type(k) is int:
            continue
        cnt, step = k[2], k[1]
        if cnt <= 1:
            continue
        if d == pdim or step * stride[d] != run:
            break
        run *= cnt
    if run <= 0 or t.size <= 0:
        return 1
    return max(1, t.size // run)


def _adv_runs(t):
    """Contiguous runs of an index-array view (`ap()` patterns, gathers) walked in its
    element order: one more at every step that is not +1 in memory, over the whole index
    array (a pattern contiguous in its first row and scattered after is charged for the
    scatter)."""
    import numpy as np
    adv = t.adv
    if adv is None or t.size <= 1:
        return 1
    try:
        full = np.broadcast_arrays(*adv)
        flat = np.ravel_multi_index(tuple(a.ravel() for a in full), t.st.shape)
    except ValueError:
        last = t.shape[-1] if t.shape else 1
        return max(1, t.size // max(1, last))
    if flat.size != t.size:  # a view over the indexed elements: price it per row
        last = t.shape[-1] if t.shape else 1
        return max(1, t.size // max(1, last))
    return 1 + int(np.count_nonzero(np.diff(flat) != 1))


_TABLES = {}


def load(path=TABLE_FILE):
    """All tables in a cost-table file, by target name."""
    with open(path) as f:
        raw = json.load(f)
    return {name: CostTable(name, vals) for name, vals in raw.items() if not name.startswith("_")}


def table(target):
    """The shipped cost table of `target` (a constants.Target or a target name)."""
    name = target if isinstance(target, str) else target.name
    name = C.get_target(name).name
    if not _TABLES:
        _TABLES.update(load())
    return _TABLES[name]


def set_table(t):
    """Use table `t` for its target in this process (calibration tries candidate tables)."""
    if not _TABLES:
        _TABLES.update(load())
    _TABLES[t.name] = t


def reset():
    """Forget tables set with set_table (the shipped file is read again on next use)."""
    _TABLES.clear()


def hbm_dma_peak(target):
    """Nominal bytes/ns of a core's DMA queues between HBM and on-chip memory: the lower of
    the DMA and HBM rates."""
    return min(target.dma_bytes_per_ns, target.hbm_bytes_per_ns)


def hbm_dma_bandwidth(target):
    """Bytes/ns a core's DMA queues sustain between HBM and on-chip memory in the short-row
    regime (the rate spill traffic and collectives are priced at)."""
    return hbm_dma_peak(target) * table(target).dma_efficiency


def onchip_dma_bandwidth(target):
    return target.dma_bytes_per_ns * table(target).dma_efficiency


# ---- override files, digests and the seeded fake device -------------------------------------

# Fields a device calibration fits (backends/nkisim/calibration/device/probes.json has probes
# that isolate each one), per target. trn1: VectorE's access overhead overlaps its minimum
# initiation interval (max(min_ii, fixed + N x c)), so min_ii shows only while it exceeds
# the fixed cost and is not fitted; the long-row DMA regime exists on trn1 only.
_CALIBRATABLE_COMMON = (
    "vector_fixed_cycles", "vector_tt_cycles_per_elem", "vector_cycles_per_elem",
    "scalar_fixed_cycles", "scalar_min_ii_cycles", "gpsimd_startup_cycles",
    "gpsimd_elems_per_cycle_32", "matmul_init_cycles", "matmul_fp32_factor", "dma_fixed_ns",
    "dma_efficiency", "dma_descriptor_bytes", "dma_transpose_efficiency")
CALIBRATABLE = {
    "trn1": _CALIBRATABLE_COMMON + ("dma_stream_bytes_per_ns", "dma_stream_descriptor_bytes"),
    "trn2": _CALIBRATABLE_COMMON + ("vector_min_ii_cycles",),
    "trn3": _CALIBRATABLE_COMMON + ("vector_min_ii_cycles",),
}
# Fields that are a share of a nominal rate: a perturbed value stays at most 1.
SHARES = ("dma_efficiency", "dma_transpose_efficiency")
PERTURB_RANGE = (0.7, 1.4)


def calibratable(target):
    """The fields a device calibration of `target` fits, in a fixed order."""
    name = target if isinstance(target, str) else target.name
    return CALIBRATABLE[C.get_target(name).name]


def values_of(t):
    """{field: value} of the FIELDS of table `t` (no sources)."""
    return {k: getattr(t, k) for k in FIELDS}


def digest(t):
    """16 hex digits of the SHA-256 of the canonical JSON of table `t`'s FIELDS: two tables
    that price every instruction alike have the same digest."""
    text = json.dumps(values_of(t), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class CostTableError(ValueError):
    """An override file that cannot be used; the message says what to fix."""


def _number(v):
    return type(v) in (int, float) and math.isfinite(v)


def parse_override(raw, target, base=None, origin="cost table"):
    """(CostTable, name) of an override document `raw` for `target`: `{"target", "name",
    "values": {FIELD: number}}`, fields not given taken from `base` (default: the shipped
    table of the target). CostTableError when it does not fit."""
    target = C.get_target(target if isinstance(target, str) else target.name).name
    if not isinstance(raw, dict):
        raise CostTableError("%s: expected a JSON object {\"target\", \"name\", \"values\"}"
                             % origin)
    extra = sorted(k for k in raw if k not in ("target", "name", "values"))
    if extra:
        raise CostTableError("%s: unknown keys %s (allowed: target, name, values)"
                             % (origin, ", ".join(extra)))
    if raw.get("target") != target:
        raise CostTableError("%s is for target %r, the evaluation's target is %r"
                             % (origin, raw.get("target"), target))
    name = raw.get("name", "override")
    if type(name) is not str or not name or len(name) > 200:
        raise CostTableError("%s: name must be a non-empty string" % origin)
    values = raw.get("values")
    if not isinstance(values, dict):
        raise CostTableError("%s: values must be an object {field: number}" % origin)
    unknown = sorted(k for k in values if k not in FIELDS)
    if unknown:
        raise CostTableError("%s: unknown fields %s (known: %s)"
                             % (origin, ", ".join(unknown), ", ".join(FIELDS)))
    base = base or table(target)
    merged = base.as_dict()
    for k, v in values.items():
        if k == "vector_fixed_overlaps_min_ii":
            if type(v) is not bool:
                raise CostTableError("%s: %s must be true or false" % (origin, k))
        elif not _number(v) or v < 0:
            raise CostTableError("%s: %s must be a finite non-negative number, not %r"
                                 % (origin, k, v))
        merged[k] = v
    for k in ("dma_efficiency", "dma_transpose_efficiency", "gpsimd_elems_per_cycle_32",
              "gpsimd_elems_per_cycle_16", "matmul_fp32_factor"):
        if not merged[k] > 0:
            raise CostTableError("%s: %s must be positive" % (origin, k))
    merged["sources"] = {"all": "override %s" % name}
    return CostTable(target, merged), name


def load_override(path, target, base=None):
    """(CostTable, name) read from override file `path` (see parse_override)."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as e:
        raise CostTableError("cannot read cost table %s: %s" % (path, e.strerror or e))
    except ValueError as e:
        raise CostTableError("cost table %s is not valid JSON: %s" % (path, e))
    return parse_override(raw, target, base, origin="cost table %s" % path)


def perturbation_factors(seed, target):
    """{field: factor} the fake device `sim-perturbed` with seed `seed` scales `target`'s
    calibratable fields by: log-uniform in PERTURB_RANGE, a fixed function of (seed, field)."""
    if type(seed) is not int or seed < 0:
        raise ValueError("device seed must be a non-negative integer")
    lo, hi = (math.log(x) for x in PERTURB_RANGE)
    out = {}
    for k in calibratable(target):
        h = hashlib.sha256(("sim-perturbed:%d:%s" % (seed, k)).encode()).digest()
        u = int.from_bytes(h[:8], "little") / 2.0 ** 64
        out[k] = math.exp(lo + u * (hi - lo))
    return out


def perturbed_table(seed, target, base=None):
    """The hidden table of the fake device: `base` (default the shipped table of `target`)
    with its calibratable fields scaled by perturbation_factors(seed, target); shares are
    capped at 1."""
    name = C.get_target(target if isinstance(target, str) else target.name).name
    base = base or table(name)
    vals = base.as_dict()
    for k, f in perturbation_factors(seed, name).items():
        v = vals[k] * f
        vals[k] = min(v, 1.0) if k in SHARES else v
    vals["sources"] = {"all": "hidden"}
    return CostTable(name, vals)
