"""`simulate`: run a kernel on the simulator and report outputs, latency and metrics."""
import inspect
import itertools
import os

import numpy as np

from . import constants as C
from . import cores as CORES
from . import costs as K
from ..data import dtypes as D
from .. import errors as E
from . import runtime
from . import spills
from ..data.buffers import Storage, Tensor, shared_hbm
from ..data import contract
from .timing import ENGINE_NAMES


class SimResult:
    """Outcome of one simulation.

    outputs: tuple of numpy arrays in the kernel's return order (bf16 as float32);
    latency_us: makespan in microseconds; metrics: neuron-profile summary-json names and units;
    roofline: achieved vs peak figures; bottleneck: 'compute-bound', 'memory-bound' or
    'underutilized'; instructions: number of simulated instructions (engines + DMA);
    output_dtypes: NKI dtype name of each output ('bfloat16', 'float32', ...);
    hotspots: busiest (kernel line, engine) pairs, each {line, engine, instructions, time_us};
    waits: (with hotspots) where an engine sat idle waiting for another engine's or a DMA's
    result, each {engine, waiting_on, idle_pct, line}, largest first, top 5; line is the
    kernel line of the instruction waited for;
    busiest_engine: name of the compute engine with the most active time;
    bottleneck_engine: the busiest resource by name ('TensorE-bound', 'VectorE-bound',
    'ScalarE-bound', 'GpSimdE-bound', 'DMA-bound' or 'underutilized'); the roofline also
    holds per-engine element-rate ceilings, the DMA rate this kernel can reach beside the
    nominal peak, and the floor each resource puts under the latency (floor_*_us);
    compiler_effects: what the simulator assumed the compiler does to the kernel as
    written, one sentence each (e.g. "line 42: 65,536 instructions grouped into 1,024
    (...)"), so a figure that depends on it says so.
    All values in metrics and roofline are numbers."""

    def __init__(self, outputs, returned_tuple, latency_us, metrics, roofline, bottleneck,
                 instructions, output_dtypes=()):
        self.outputs = outputs
        self.output_dtypes = output_dtypes
        self.returned_tuple = returned_tuple
        self.latency_us = latency_us
        self.metrics = metrics
        self.roofline = roofline
        self.bottleneck = bottleneck
        self.instructions = instructions
        self.hotspots = []
        self.waits = []
        self.compiler_effects = []
        self.bottleneck_engine = None
        self.busiest_engine = None

    def __repr__(self):
        return ("SimResult(latency_us=%.3f, instructions=%d, bottleneck=%s)"
                % (self.latency_us, self.instructions, self.bottleneck))


def unwrap(kernel_fn):
    """(function, grid) behind a decorated kernel / launcher."""
    grid = getattr(kernel_fn, "grid", None)
    fn = kernel_fn
    for _ in range(10):
        inner = getattr(fn, "nkisim_func", None)
        if inner is None or inner is fn:
            break
        fn = inner
    for _ in range(10):
        inner = getattr(fn, "__wrapped__", None)
        if inner is None:
            break
        fn = inner
    return fn, grid


def _norm_grid(grid):
    if grid is None:
        return (1,)
    if isinstance(grid, (int, np.integer)):
        return (int(grid),)
    return tuple(int(g) for g in grid)


def _input_tensor(arr, numerics, dtype=None, read_only=False):
    """The HBM tensor of an input array. read_only: its data refuses writes (numpy raises
    ValueError), without a copy when the array is used as it is."""
    a = np.asarray(arr)
    dt = D.lookup(a.dtype) if dtype is None else D.lookup(dtype)
    if dt is None:
        raise E.NkiCompileError("unsupported input dtype %s" % (a.dtype if dtype is None
                                                                else dtype,))
    if dt is D.FLOAT64:
        dt = D.FLOAT32
    data = D.quantize(a, dt) if numerics else None
    if data is not None and (data is a and not a.flags.writeable or not data.flags.c_contiguous):
        data = np.ascontiguousarray(data).copy()
    if data is not None and data.ndim == 0:
        data = data.reshape(1)
    if data is not None and read_only:
        data = data.view()
        data.flags.writeable = False
    st = Storage(tuple(a.shape) if a.ndim else (1,), dt, shared_hbm, data=data, name="input")
    return Tensor.root(st)


class TensorSpec:
    """Shape-and-dtype stand-in for an input array, for `numerics=False` runs (the timing
    model never reads input values, so no data needs to be generated)."""

    def __init__(self, shape, dtype="float32"):
        self.shape = tuple(int(n) for n in shape)
        self.dtype = dtype

    def __repr__(self):
        return "TensorSpec(%s, %s)" % (list(self.shape), self.dtype)


def _spec_tensor(spec, dtype=None):
    dt = D.lookup(dtype if dtype is not None else spec.dtype)
    if dt is None:
        raise E.NkiCompileError("unsupported input dtype %r" % (spec.dtype,))
    if dt is D.FLOAT64:
        dt = D.FLOAT32
    return Tensor.root(Storage(spec.shape, dt, shared_hbm, data=None, fill=False, name="input"))


def _host_value(a):
    """Arrays (ndim >= 1, or array-likes with dtype and shape) stay arrays and become HBM
    tensors; numpy scalars and 0-d arrays become Python scalars."""
    if isinstance(a, np.ndarray):
        return a if a.ndim >= 1 else a.item()
    if isinstance(a, np.generic):
        return a.item()
    if hasattr(a, "dtype") and hasattr(a, "shape") and not isinstance(a, Tensor):
        arr = np.asarray(a)
        return arr if arr.ndim >= 1 else arr.item()
    return a


def _kernel_file(fn):
    try:
        f = inspect.getsourcefile(fn) or fn.__code__.co_filename
    except (TypeError, AttributeError):
        f = getattr(getattr(fn, "__code__", None), "co_filename", None)
    names = set()
    if f:
        names.add(f)
        names.add(os.path.abspath(f))
    code = getattr(fn, "__code__", None)
    if code is not None:
        names.add(code.co_filename)
    return names


def simulate(kernel_fn, inputs, target="trn2", grid=None, numerics=True, input_dtypes=None,
             hotspots=True, lnc=None):
    """Run `kernel_fn` (decorated or not) with `inputs` (parameter name -> numpy array or
    Python value) on the simulator. `input_dtypes` (name -> dtype name, e.g. 'bfloat16')
    gives an HBM input an NKI dtype numpy lacks; its values are rounded to that dtype.
    With numerics=False only the instruction trace and timing are computed (outputs are
    NaN-filled); the trace never depends on data values, so timing is identical.
    With hotspots=True, `res.hotspots` lists the kernel lines that keep engines and DMA
    busiest. `lnc` is the logical core's degree (1 or 2; default: the target's, 2 on trn2
    and trn3, machine/cores.py says which programs run on which physical core); ValueError
    for a degree the target lacks. Raises NkiCompileError / NkiRuntimeError on failure."""
    fn, g = unwrap(kernel_fn)
    if grid is None:
        grid = g
    return _run(fn, (), dict(inputs), target, grid, numerics, input_dtypes, hotspots, lnc)


def simulate_call(fn, args, kwargs, grid=None, target=None, numerics=True):
    """Simulate a kernel called with positional/keyword arguments (decorator path); the LNC
    degree comes from NEURON_LOGICAL_NC_CONFIG when set, as on a Neuron host."""
    if target is None:
        target = os.environ.get("NKISIM_TARGET") or _env_target()
    lnc = os.environ.get("NEURON_LOGICAL_NC_CONFIG") or None
    return _run(fn, tuple(args), dict(kwargs), target, grid, numerics, lnc=lnc)


def _env_target():
    t = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2").lower()
    return {"gen2": "trn1", "inf2": "trn1", "gen3": "trn2", "gen4": "trn3"}.get(
        t, t if t in ("trn1", "trn2", "trn3") else "trn2")


def _run(fn, args, kwargs, target, grid, numerics, input_dtypes=None, hotspots=False,
         lnc=None):
    tgt = C.get_target(target)
    layout = CORES.grid_layout(grid)
    grid = _norm_grid(grid)
    degree = CORES.lnc_for(tgt.name, lnc)
    if runtime.CUR is not None:
        raise RuntimeError("nkisim.simulate is not reentrant")
    sim = runtime.Sim(tgt, numerics)
    sim.grid = grid
    CORES.attach(sim, grid, degree, layout)
    if hotspots:
        sim.sched.start_attribution(E.current_kernel_line)
    E.set_kernel_files(_kernel_file(fn))
    runtime.CUR = sim
    originals = {}
    try:
        sig = None
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            pass
        call_args = []
        call_kwargs = {}
        dts = input_dtypes or {}
        names = list(inspect.signature(fn).parameters) if sig is not None else []
        for i, a in enumerate(args):
            if isinstance(a, TensorSpec):
                if numerics:
                    raise E.NkiCompileError("TensorSpec inputs need numerics=False")
                call_args.append(_spec_tensor(a, dts.get(names[i]) if i < len(names) else None))
                continue
            a = _host_value(a)
            if isinstance(a, np.ndarray):
                t = _input_tensor(a, numerics, dts.get(names[i]) if i < len(names) else None)
                originals[id(t.st)] = (a, t)
                call_args.append(t)
            else:
                call_args.append(a)
        for k, a in kwargs.items():
            if isinstance(a, TensorSpec):
                if numerics:
                    raise E.NkiCompileError("TensorSpec inputs need numerics=False")
                call_kwargs[k] = _spec_tensor(a, dts.get(k))
                continue
            a = _host_value(a)
            if isinstance(a, np.ndarray):
                t = _input_tensor(a, numerics, dts.get(k))
                originals[id(t.st)] = (a, t)
                call_kwargs[k] = t
            else:
                call_kwargs[k] = a
        if sig is not None and not args:
            params = sig.parameters
            has_var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
            for k in call_kwargs:
                if k not in params and not has_var_kw:
                    raise E.NkiCompileError("kernel %s has no parameter named %r"
                                            % (fn.__name__, k))
            for name, p in params.items():
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                if name not in call_kwargs and p.default is p.empty:
                    raise E.NkiCompileError("missing input %r for kernel %s"
                                            % (name, fn.__name__))
        ret = None
        with np.errstate(all="ignore"):
            for pid in itertools.product(*[range(n) for n in grid]):
                sim.program_id = pid
                sim.shared_index = 0
                CORES.start_program(sim, pid)
                r = fn(*call_args, **call_kwargs)
                if ret is None:
                    ret = r
        return finish(sim, ret, originals, numerics)
    except E.NkiError as e:
        if e.line is None:
            e.line = E.traceback_kernel_line(e.__traceback__)
            e.args = (str(e),)
        raise
    except RecursionError:
        raise
    except Exception as e:
        line = E.traceback_kernel_line(e.__traceback__)
        err = E.NkiCompileError("%s: %s" % (type(e).__name__, e), line)
        raise err.with_traceback(e.__traceback__) from None
    finally:
        runtime.CUR = None
        sim.last_st = None
        sim.pool = None
        E.set_kernel_files(())


def finish(sim, ret, originals, numerics):
    """The result of a kernel run (direct or replayed) that returned `ret`: capacity check,
    outputs, inputs the kernel wrote copied back to the caller's arrays (`originals`: storage
    id -> (array, tensor)), metrics, hotspots and waits."""
    sim.sched.close_loops()
    sim.sched.flush_groups()
    unwritten = contract.output_contract(ret, numerics)
    cores = getattr(sim, "cores", None)
    if cores is not None:
        cores.select_last()  # spills are charged to the core that ends last
    _check_capacity(sim)
    core_end_us = cores.close() if cores is not None else [sim.sched.makespan / 1000.0]
    outputs, returned_tuple, out_dts = _collect(ret, numerics)
    for a, t in originals.values():
        if numerics and t.st.dep.wr and a.flags.writeable and t.st.data is not None \
                and not np.shares_memory(a, t.st.data):
            try:
                np.copyto(a, t.st.data.reshape(a.shape), casting="unsafe")
            except (TypeError, ValueError):
                pass
    res = _result(sim, outputs, returned_tuple)
    # the physical cores of the launch: LNC degree and each core's end (a core no program
    # ran on ends at 0)
    res.lnc = cores.n if cores is not None else 1
    res.core_end_us = core_end_us
    res.output_dtypes = out_dts
    res.unwritten = unwritten  # per output: where no instruction wrote it (data/contract.py)
    res.hotspots = sim.sched.hotspots()
    res.waits = sim.sched.waits()
    res.compiler_effects = sim.sched.compiler_effects()
    note = getattr(getattr(sim, "placement", None), "note", None)
    if note:
        res.compiler_effects.append(note)
    # arguments accepted and not honoured (api/objects.placement records them)
    for (line, what), n in sorted((getattr(sim, "ignored_arguments", None) or {}).items(),
                                  key=lambda kv: (kv[0][0] or 0, kv[0][1])):
        res.compiler_effects.append("%s%s given %d time(s), not honoured: the simulator "
                                    "places on-chip tensors itself"
                                    % ("line %d: " % line if line else "", what, n))
    return res


def _check_capacity(sim):
    """Peak SBUF/PSUM use with last-use liveness (an allocation is live from its creation to
    the last instruction that touches it, as the compiler's allocator sees it).

    An SBUF or PSUM tensor with block dimensions is allocated block by block: each block
    is live from the first instruction that touches it to the last (a block never touched
    takes no space), as the compiler's allocator places them.

    PSUM over capacity, or SBUF tiles allocated together (no instruction in between) that
    alone exceed capacity, raise the out-of-memory compile error at the allocation that
    first exceeds it. Otherwise live SBUF data beyond capacity is spilled, as the compiler
    does: every byte per partition over capacity is saved to HBM and reloaded once, and the
    transfers take the DMA time the kernel's own transfers leave idle (see _charge_spills).
    Blocks of block-dimension tensors are always spillable (never the refused group)."""
    from ..data.buffers import capacity_message
    blocks = []  # (start, end time of the first access) of each block event
    for kind, cap in (("sbuf", sim.sbuf_cap), ("psum", sim.psum_cap)):
        events = []
        for i, (seq, pb, dep, k, line, _) in enumerate(sim.allocs):
            if k != kind:
                continue
            blk = dep.blk
            if blk is not None:
                for b, first in enumerate(blk.first):
                    if first < 0:
                        continue
                    j = -1 - len(blocks)
                    blocks.append((first - 0.5, blk.first_end[b], line, i))
                    events.append((first - 0.5, 1, pb, j))
                    events.append((blk.last[b] + 0.25, 0, pb, j))
                continue
            start = seq + 0.5
            end = dep.last + 0.25 if dep.last > seq else start + 0.01
            events.append((start, 1, pb, i))
            events.append((end, 0, pb, i))
        events.sort()
        cur = 0
        peak = 0
        over = 0     # high-water mark over capacity in this stretch over capacity
        spilled = 0
        spill_from = None  # when SBUF first overflows
        group_seq = None
        group = 0
        live_blocks = {}  # PSUM block tensor -> its blocks live now
        for pos, is_start, pb, i in events:
            if kind == "psum" and i < 0:
                # a PSUM block: the tensor holds at most two blocks' banks at once (its
                # block tiles rotate through two buffers); PSUM cannot spill
                t = blocks[-1 - i][3]
                n = live_blocks.get(t, 0)
                live_blocks[t] = n + 1 if is_start else n - 1
                if is_start and n < 2:
                    cur += pb
                    if cur > peak:
                        peak = cur
                    if cur > cap:
                        raise E.NkiCompileError(capacity_message(kind, cur, cap,
                                                                 sim.target.name),
                                                blocks[-1 - i][2])
                elif not is_start and n <= 2:
                    cur -= pb
                continue
            if is_start and i < 0:  # a block of a block-dimension tensor
                cur += pb
                if cur > peak:
                    peak = cur
                if cur - cap > over:
                    spilled += cur - cap - over
                    over = cur - cap
                    if spill_from is None:
                        spill_from = blocks[-1 - i][1]
            elif is_start:
                cur += pb
                seq = sim.allocs[i][0]
                if seq != group_seq:
                    group_seq, group = seq, 0
                group += pb
                if cur > peak:
                    peak = cur
                if cur > cap and (kind == "psum" or group > cap):
                    line = sim.allocs[i][4]
                    raise E.NkiCompileError(
                        capacity_message(kind, cur if kind == "psum" else group, cap,
                                         sim.target.name), line)
                if cur - cap > over:
                    spilled += cur - cap - over
                    over = cur - cap
                    if spill_from is None:
                        spill_from = sim.allocs[i][5]
            else:
                # within one stretch over capacity, spilled bytes are its high-water mark
                # over capacity (tiles that come and go while long-lived data sits in HBM
                # reuse each other's space); the stretch ends when live data fits again
                cur -= pb
                if cur <= cap:
                    over = 0
        if kind == "sbuf":
            sim.sbuf_peak = peak
            if spilled:
                _charge_spills(sim, spilled * C.PMAX, spill_from)
        else:
            sim.psum_peak = peak
    sim.allocs = []


def _charge_spills(sim, nbytes, not_before):
    """Charge the spill traffic of a kernel whose live SBUF data overflowed (spills.py: a
    residency replay of its accesses; `nbytes`, the liveness sweep's bytes over capacity,
    is a lower bound on the bytes saved)."""
    spills.charge(sim, nbytes, not_before)


def _collect(ret, numerics):
    if ret is None:
        return (), False, ()
    items = ret if isinstance(ret, (tuple, list)) else (ret,)
    out = []
    dts = []
    for t in items:
        dts.append(t.st.dt.name if isinstance(t, Tensor) else str(np.asarray(t).dtype))
        if isinstance(t, Tensor):
            if t.st.data is not None and numerics:
                if t.sk is not None and t.box is None and t.vd == tuple(range(len(t.st.shape))) \
                        and not t.st.alias and t.st.kind == "hbm":
                    a = t.st.data
                else:
                    a = np.array(t.read(), copy=True)
                if t.st.dt is D.BOOL:
                    a = a.astype(np.bool_)
            else:
                npdt = t.st.dt.np
                a = np.full(t.shape, np.nan if t.st.dt.is_float else 0, dtype=npdt)
            out.append(a)
        else:
            out.append(np.asarray(t))
    return tuple(out), isinstance(ret, (tuple, list)), tuple(dts)


def _pct(a, b):
    return 100.0 * a / b if b > 0 else 0.0


def _result(sim, outputs, returned_tuple):
    sch = sim.sched
    tgt = sim.target
    T = sch.makespan  # ns
    ts = T * 1e-9
    # a launch over several physical cores: active times add up over the cores, so shares
    # and peaks are those of all the cores it ran on (one core: unchanged)
    cores = getattr(sim, "cores", None)
    ncores = cores.cores_used() if cores is not None else 1
    TC = T * ncores
    m = {}
    m["total_time"] = ts
    m["neuroncore_cycle_count"] = int(round(ts * tgt.base_hz))
    for i, name in enumerate(ENGINE_NAMES):
        m["%s_engine_active_time" % name] = sch.active[i] * 1e-9
        m["%s_engine_active_time_percent" % name] = _pct(sch.active[i], TC)
        m["%s_engine_instruction_count" % name] = sch.count[i]
    m["matmul_instruction_count"] = sim.matmul_count
    dma_active = sch.dma_active_ns()
    m["dma_active_time"] = dma_active * 1e-9
    m["dma_active_time_percent"] = _pct(dma_active, T)
    m["dma_bandwidth_busy_percent"] = _pct(
        cores.bandwidth_busy_ns() if ncores > 1 else sch.bw.busy, TC)
    m["dma_transfer_count"] = sch.dma_count
    m["dma_transfer_total_bytes"] = sim.dma_bytes
    m["dma_transfer_average_bytes"] = sim.dma_bytes / sch.dma_count if sch.dma_count else 0.0
    m["hbm_read_bytes"] = sim.hbm_read
    m["hbm_write_bytes"] = sim.hbm_write
    m["sbuf_read_bytes"] = sim.sbuf_read
    m["sbuf_write_bytes"] = sim.sbuf_write
    m["psum_read_bytes"] = sim.psum_read
    m["psum_write_bytes"] = sim.psum_write
    m["spill_save_bytes"] = sim.spill_save
    m["spill_reload_bytes"] = sim.spill_reload
    m["hardware_flops"] = sim.flops
    m["transpose_flops"] = sim.transpose_flops
    model_flops = sim.flops - sim.transpose_flops
    m["model_flops"] = model_flops
    peak = tgt.peak_flops_bf16 * ncores
    m["tensor_engine_max_ops_per_sec"] = peak
    m["mfu_estimated_percent"] = _pct(model_flops, peak * ts) if ts > 0 else 0.0
    m["hfu_estimated_percent"] = _pct(sim.flops, peak * ts) if ts > 0 else 0.0
    hbm_bytes = sim.hbm_read + sim.hbm_write
    bw = min(tgt.dma_bytes_per_ns, tgt.hbm_bytes_per_ns) * ncores  # bytes/ns == GB/s
    m["mbu_estimated_percent"] = _pct(hbm_bytes, bw * T) if T > 0 else 0.0
    m["mm_arithmetic_intensity"] = model_flops / hbm_bytes if hbm_bytes else 0.0
    m["peak_sbuf_bytes_per_partition"] = sim.sbuf_peak
    m["peak_psum_bytes_per_partition"] = sim.psum_peak
    m["sbuf_capacity_bytes_per_partition"] = sim.sbuf_cap
    instructions = sum(sch.count) + sch.dma_count
    m["total_instruction_count"] = instructions

    if sim.flops > 0 and sim.flops_peak_ns > 0:
        eff_peak = sim.flops / (sim.flops_peak_ns * 1e-9) * ncores
    else:
        eff_peak = peak
    achieved = model_flops / ts if ts > 0 else 0.0
    roof = {
        "achieved_tflops": achieved / 1e12,
        "peak_tflops": eff_peak / 1e12,
        "compute_pct": _pct(achieved, eff_peak),
        "achieved_hbm_gbps": hbm_bytes / T if T > 0 else 0.0,
        "peak_hbm_gbps": bw,
        "hbm_pct": _pct(hbm_bytes / T if T > 0 else 0.0, bw),
        "arithmetic_intensity": model_flops / hbm_bytes if hbm_bytes else 0.0,
        "ridge_point": eff_peak / (bw * 1e9),
    }
    busiest = max(range(4), key=lambda i: sch.active[i])
    engine_pct = _pct(sch.active[busiest], TC)
    compute_util = max(roof["compute_pct"], engine_pct)
    memory_util = max(roof["hbm_pct"], m["dma_bandwidth_busy_percent"])
    if max(compute_util, memory_util) < BOTTLENECK_THRESHOLD_PCT:
        bottleneck = "underutilized"
    elif compute_util >= memory_util:
        bottleneck = "compute-bound"
    else:
        bottleneck = "memory-bound"
    roof["busiest_engine_pct"] = engine_pct
    named = _engine_roofline(sim, roof, m, T, ncores)
    res = SimResult(outputs, returned_tuple, T / 1000.0, m, roof, bottleneck, instructions)
    res.bottleneck_engine = named
    res.busiest_engine = ENGINE_NAMES[busiest]
    return res


_ENGINE_LABELS = ("TensorE", "VectorE", "ScalarE", "GpSimdE")


def _engine_roofline(sim, roof, m, T, ncores=1):
    """Per-engine ceilings beside TensorE's: element-wise throughput achieved and peak per
    engine (128 lanes x 1 element per cycle; GpSimdE by its documented element rate), the
    DMA bandwidth the cost table lets this kernel reach (at its average contiguous run)
    beside the nominal peak, the floor each resource alone puts under the latency (us),
    (`floor_<engine>_us`, `floor_dma_us`); returns the bottleneck by name: the busiest
    resource ("VectorE-bound", "DMA-bound", ...; "underutilized" below the threshold).
    `bottleneck` keeps its three values. Peaks and floors are those of the `ncores` physical
    cores the launch ran on."""
    tgt = sim.target
    k = sim.costs
    hz = (tgt.tensor_hz, tgt.vector_hz, tgt.scalar_hz, tgt.gpsimd_hz)
    ts = T * 1e-9
    floors = {}
    for i, name in enumerate(ENGINE_NAMES):
        if i == 0:
            continue
        rate = C.PMAX * hz[i] * (k.gpsimd_elems_per_cycle_32 if i == 3 else 1.0) * ncores
        roof["%s_gelems_per_sec" % name] = sim.elems[i] / ts / 1e9 if ts > 0 else 0.0
        roof["%s_peak_gelems_per_sec" % name] = rate / 1e9
        floors[name] = sim.elems[i] / rate * 1e6
    floors["tensor"] = sim.flops_peak_ns / 1000.0 / ncores
    hbm_bytes = sim.hbm_read + sim.hbm_write
    peak = K.hbm_dma_peak(tgt)
    run = hbm_bytes / sim.dma_runs if sim.dma_runs else 0.0
    achievable = k.dma_rate(run, peak) if run > 0 else peak * k.dma_efficiency
    peak *= ncores
    achievable *= ncores
    roof["dma_nominal_gbps"] = peak
    roof["dma_achievable_gbps"] = achievable
    roof["dma_average_run_bytes"] = run
    floors["dma"] = hbm_bytes / achievable / 1000.0 if achievable > 0 else 0.0
    for name, v in floors.items():
        roof["floor_%s_us" % name] = v
    busy = {ENGINE_NAMES[i]: m["%s_engine_active_time_percent" % ENGINE_NAMES[i]]
            for i in range(4)}
    busy["dma"] = m["dma_bandwidth_busy_percent"]
    top = max(busy, key=lambda n: busy[n])
    if busy[top] < BOTTLENECK_THRESHOLD_PCT:
        return "underutilized"
    if top == "dma":
        return "DMA-bound"
    return "%s-bound" % _ENGINE_LABELS[ENGINE_NAMES.index(top)]


# A resource counts as the bottleneck once it is busy this share of the time (the perf
# guide's "~90% engine active" / "~60% MBU" rules of thumb, nki.md §3.3, relaxed to one
# threshold for both sides; see MODEL.md).
BOTTLENECK_THRESHOLD_PCT = 60.0
