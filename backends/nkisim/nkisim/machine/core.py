"""Shared machinery for language and ISA functions: allocation, operand checks, engine
costs, instruction issue (functional effect + timing), DMA, matmul and transpose."""
import weakref

import numpy as np

from . import constants as C
from . import costs as K
from ..data import dtypes as D
from ..data import ops as O
from . import runtime
from ..data.buffers import Storage, Tensor, psum, sbuf, shared_hbm
from ..errors import compile_error, current_kernel_line
from .timing import GPSIMD, SCALAR, TENSOR, VECTOR, ready_time, record
from .loadreuse import (hbm_written, keep_load, kept_load, load_assigned,  # noqa: F401
                        reuse_load)

_TMP = "__tmp__"
_MM = "__matmul__"
# result tile storage -> the predicate its instruction ran under: assigning the tile writes
# only there (the instruction writes its destination in place; predicated-off elements of
# the destination keep their values)
_PREDICATE = weakref.WeakKeyDictionary()


def predicated_off(mask):
    """True for a predicate false everywhere (False, or an all-false boolean array): the
    compiler drops such an instruction."""
    if type(mask) in (bool, np.bool_):
        return not mask
    return isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.size > 0 \
        and not mask.any()


def skipped_result(shape, dt, buffer=sbuf, name=_TMP):
    """The result of an instruction predicated off everywhere: no instruction writes it, and
    assigning it to a tile or accumulating it into PSUM changes nothing."""
    st = Storage(tuple(shape), dt, buffer, name=name, charge=False, check_rank=False)
    _PREDICATE[st] = False
    return Tensor.root(st)


def sim():
    s = runtime.CUR
    if s is None:
        raise compile_error("err_nki_api_outside_of_nki_kernel: NKI APIs can only be used "
                            "inside a kernel run by nkisim.simulate (or a decorated kernel)")
    return s


def dt_of(dtype):
    dt = D.lookup(dtype)
    if dt is None:
        raise compile_error("unsupported dtype %r" % (dtype,))
    return dt


def alloc(shape, dt, buffer, name="", charge=True, pdim=0):
    """New tensor; shared_hbm allocations are shared by all SPMD instances (by call order)."""
    s = sim()
    if buffer is shared_hbm and s.grid != (1,):
        i = s.shared_index
        s.shared_index += 1
        if i < len(s.shared_allocs):
            st = s.shared_allocs[i]
            if st.shape != shape or st.dt is not dt:
                raise compile_error("SPMD instances allocate different shared_hbm tensors")
            return Tensor.root(st)
        st = Storage(shape, dt, buffer, name=name)
        s.shared_allocs.append(st)
        return Tensor.root(st)
    return Tensor.root(Storage(shape, dt, buffer, name=name, charge=charge, pdim=pdim))


def tmp(shape, dt, buffer=sbuf, overwritten=False):
    """A fresh result tile of an instruction (may be written in place by a later assignment).
    overwritten: the instruction writes all of it (no mask), so it skips the fill pattern."""
    return Tensor.root(Storage(shape, dt, buffer, name=_TMP, check_rank=False,
                               overwritten=overwritten))


def free_size(t):
    """Elements per partition of view t. For a tensor with block dimensions (nl.par_dim not
    first) the partition axis is the storage's `pdim`; the blocks are free elements."""
    sh = t.shape
    if not sh:
        return 1
    st = t.st
    if st.pdim and t.sk is not None:
        k = t.sk[st.pdim]
        p = 1 if type(k) is int else k[2]
        return t.size // p if p else 0
    return t.size // sh[0] if sh[0] else 0


def value_of(x, nd=None):
    """Values of a tile (aligned to rank `nd` by appending size-1 free axes) or a scalar."""
    if isinstance(x, Tensor):
        v = x.read()
        if nd is not None and v is not None and v.ndim < nd:
            v = v.reshape(v.shape + (1,) * (nd - v.ndim))
        return v
    return x


def tile_shape(shapes, opname):
    """Broadcast tile shapes NKI-style: the partition axes line up (lower-rank tiles get
    trailing size-1 free axes), then free axes broadcast like numpy."""
    nd = max(len(s) for s in shapes)
    padded = [tuple(s) + (1,) * (nd - len(s)) for s in shapes]
    try:
        return tuple(np.broadcast_shapes(*padded)), nd
    except ValueError:
        raise compile_error("operand shapes %s are not broadcastable in %s"
                            % (" and ".join(str(list(s)) for s in shapes), opname))


def check_onchip(t, opname, what="operand"):
    if isinstance(t, Tensor) and t.st.kind == "hbm":
        raise compile_error(
            "err_unsupported_memory: %s of %s is in HBM; compute engines can only read SBUF or "
            "PSUM (copy it on-chip with nl.load / nisa.dma_copy first)" % (what, opname))


# ---- engine costs (ns) ------------------------------------------------------------------
def vector_cost(n, factor=None, perf=1.0):
    """VectorE instruction over n elements per partition at `factor` cycles per element (the
    cost table's default per-element cost when None), sped up `perf` times (perf mode)."""
    s = runtime.CUR
    k = s.costs
    if factor is None:
        factor = k.vector_cycles_per_elem
    work = n * factor / perf
    s.last_work = work
    return k.vector_cycles(work) * s.ns_vector


def scalar_cost(n):
    s = runtime.CUR
    return s.costs.scalar_cycles(n) * s.ns_scalar


def gpsimd_cost(n, itemsize=4, streams=1):
    """GpSimdE: start-up + N per element stream (each input tile and the output pass through
    a core's 512-bit load/store path: one element per partition per cycle for 32-bit types,
    two for 16-bit). streams=1 is the documented 150 + N of iota / affine_select."""
    s = runtime.CUR
    return s.costs.gpsimd_cycles(n, itemsize, streams) * s.ns_gpsimd


def engine_cost(eng, n, itemsize=4, streams=2):
    """Cost of a simple one-input instruction on `eng` (`streams`: element streams through
    GpSimdE, input tiles + output; 1 for output-only or reducing instructions)."""
    if eng == VECTOR:
        return vector_cost(n)
    if eng == SCALAR:
        return scalar_cost(n)
    if eng == GPSIMD:
        return gpsimd_cost(n, itemsize, streams)
    s = runtime.CUR
    return (s.costs.matmul_init_cycles + max(n, 64)) * s.ns_tensor


_FAST_TT_OPS = ("add", "subtract", "multiply")

# Tiles made by a partition broadcast that the compiler lowers to TensorE (see
# pe_broadcast_cost): element-wise instructions read them as the PSUM tile TensorE wrote.
_PE_BROADCAST = weakref.WeakSet()


def pe_broadcast_cost(src, out):
    """TensorE cost (ns) of broadcasting a one-partition row to all partitions of `out`, or
    None when the compiler would not keep the result in PSUM. The Mamba tutorial: a
    partition-dimension broadcast "requires a separate instruction on TensorE" (a matmul of a
    ones row with the data row, whose result lands in PSUM; the arch guide's "TensorE
    alternative use"). One matmul per PSUM bank of output (512 fp32), at the documented
    max(64, N_moving) cycles, x4 for fp32 data. Results over four banks (2048 elements)
    stay on the GpSimdE path in SBUF, leaving PSUM to the matmuls [model]."""
    n = free_size(out)
    if src.st.kind != "sbuf":
        return None
    cyc = K.pe_broadcast_cycles(runtime.CUR.costs, n, src.st.dt.itemsize)
    if cyc is None:
        return None
    _PE_BROADCAST.add(out.st)
    return cyc * runtime.CUR.ns_tensor


def _psum_side(t):
    return t.st.kind == "psum" or t.st in _PE_BROADCAST


def tensor_tensor_cost(op, a, b, out):
    """VectorE tensor_tensor: max(MIN_II, 2N); N when exactly one input is in PSUM (a
    TensorE partition broadcast counts as PSUM), or for all-bf16 SBUF add/subtract/multiply
    (nki.md §4.2); trn2 perf mode 2x for all-16-bit SBUF inputs otherwise."""
    n = free_size(out)
    if _psum_side(a) != _psum_side(b):
        return vector_cost(n)
    if (op in _FAST_TT_OPS and a.st.kind == "sbuf" and b.st.kind == "sbuf"
            and a.st.dt is D.BFLOAT16 and b.st.dt is D.BFLOAT16 and out.st.dt is D.BFLOAT16):
        return vector_cost(n)
    return vector_cost(n, runtime.CUR.costs.vector_tt_cycles_per_elem,
                       perf_factor("tensor_tensor", [a, b], [out]))


def perf_factor(kind, ins, outs):
    """trn2 VectorE perf mode speed-up (costs.perf_factor); 1 on trn1."""
    s = runtime.CUR
    return K.perf_factor(s.costs, s.target, kind, ins, outs)


# ---- instruction issue ------------------------------------------------------------------
def _untimed(s, ins, outs):
    """The end of an instruction in a run without timing (a replay for values only, or the
    recording of a trace): no cost, traffic or FLOP accounting, only what the run's scheduler
    records without timing (liveness for the capacity check, or just which storages were
    written: timing.NullScheduler / ValueScheduler) and the instruction as the latest one
    (in-place assignment)."""
    s.sched.issue(0, 0.0, [(t.st.dep, t.box) for t in ins], [(t.st.dep, t.box) for t in outs])
    s.last_st = outs[0].st if outs else None


def _account_reads(s, ins):
    for t in ins:
        k = t.st.kind
        nb = t.size * t.st.dt.itemsize
        if k == "sbuf":
            s.sbuf_read += nb
        elif k == "psum":
            s.psum_read += nb


def _account_writes(s, outs):
    for t in outs:
        k = t.st.kind
        nb = t.size * t.st.dt.itemsize
        if k == "sbuf":
            s.sbuf_write += nb
        elif k == "psum":
            s.psum_write += nb


def _check_free_limit(t, opname):
    n = free_size(t)
    lim = C.VECTOR_FMAX_PSUM if t.st.kind == "psum" else C.VECTOR_FMAX_SBUF
    if n > lim:
        raise compile_error("%s: free size %d per partition exceeds the engine limit of %d "
                            "elements for %s operands" % (opname, n, lim, t.st.kind.upper()))


def compute(eng, cost, ins, outs, run, opname, mask=None, in_mask=None):
    """Issue one compute instruction: check operands, apply `run()` (numerics), schedule.
    `mask` predicates the output write; `in_mask` (default: `mask`) the input reads."""
    s = runtime.CUR
    if in_mask is None:
        in_mask = mask
    for t in ins:
        k = t.st.kind
        if k == "hbm":
            check_onchip(t, opname)
        if t.size > 4096 and eng != TENSOR:
            _check_free_limit(t, opname)
        if t.valid is not None:
            t.check_valid(in_mask)
        if eng == GPSIMD and t.st.kind == "psum":
            raise compile_error("err_unsupported_memory: GpSimd engine cannot access PSUM "
                                "(operand of %s)" % opname)
    for t in outs:
        if t.st.kind == "hbm":
            check_onchip(t, opname, "output")
        if t.valid is not None:
            t.check_valid(mask)
        if eng == GPSIMD and t.st.kind == "psum":
            raise compile_error("err_unsupported_memory: GpSimd engine cannot write PSUM "
                                "(output of %s)" % opname)
    if s.numerics and run is not None:
        v = run()
        if v is not None:
            outs[0].write(v, mask)
    if mask is not None and outs and outs[0].st.name == _TMP:
        _PREDICATE[outs[0].st] = mask
    if not s.timing:
        _untimed(s, ins, outs)
        s.last_eng = eng
        return
    if eng == GPSIMD and _PE_BROADCAST:
        for t in ins:
            if t.st in _PE_BROADCAST:
                # GpSimdE cannot read PSUM: for this consumer the compiler makes the
                # broadcast on GpSimdE in SBUF (the 150 + N partition broadcast) instead
                _PE_BROADCAST.discard(t.st)
                cost += gpsimd_cost(free_size(t), t.st.dt.itemsize)
    _account_reads(s, ins)
    _account_writes(s, outs)
    if outs:
        s.elems[eng] += outs[0].size
    reads = [(t.st.dep, t.box) for t in ins]
    writes = [(t.st.dep, t.box) for t in outs]
    work = s.last_work
    s.last_work = None
    if eng == VECTOR and outs and any(t.st.kind == "psum" for t in ins):
        _PSUM_FED.add(outs[0].st)
    if not (eng == VECTOR and work is not None and outs and
            _group(s, opname, work, ins, outs[0], reads, writes)):
        s.sched.issue(eng, cost, reads, writes)
    s.last_st = outs[0].st if outs else None
    s.last_eng = eng


# results of narrow VectorE instructions that read a PSUM operand (see _group)
_PSUM_FED = weakref.WeakSet()


# ops ScalarE computes as an activation's affine part (func(data * scale + bias), identity)
_AFFINE_OPS = ("add", "subtract", "multiply")


def place_scalar_form(opname, ops, n, vector_ns):
    """Engine of an element-wise op with scalar or per-partition operands whose engine the
    compiler chooses (`nl.*` arithmetic, `nisa.tensor_scalar` without an engine): ScalarE
    when every op is affine (add, subtract, multiply: an identity activation with scale and
    bias) and ScalarE, by its busy time so far, would finish it before VectorE; else VectorE.
    NKIBench adamw on trn1 showed VectorE 90% and ScalarE 62% active for a kernel whose
    element-wise work is all `nl.*` / engine-less instructions. Returns (engine, cost ns)."""
    s = runtime.CUR
    if not s.timing or any(o is not None and o not in _AFFINE_OPS for o in ops):
        return VECTOR, vector_ns
    sc = scalar_cost(n)
    act = s.sched.active
    line = current_kernel_line()
    rec = s.sched.placements.setdefault((line, opname), [0, 0])
    rec[1] += 1
    if act[SCALAR] + sc < act[VECTOR] + vector_ns:
        rec[0] += 1
        return SCALAR, sc
    return VECTOR, vector_ns


def _group(s, opname, work, ins, out, reads, writes):
    """Join a narrow VectorE instruction (every operand at most GROUP_NARROW_ELEMS elements
    per partition) to the group the compiler makes of it (constants.py GROUP_*): its copies
    in the other iterations of the small affine loop it is in, or, for a reduce into PSUM,
    the next GROUP_PSUM_REDUCE - 1 reduces of its line. True if joined."""
    if free_size(out) > C.GROUP_NARROW_ELEMS:
        return False
    for t in ins:
        if free_size(t) > C.GROUP_NARROW_ELEMS:
            return False
    line = current_kernel_line()
    sched = s.sched
    if sched.loops and sched.loops[-1] is not None and sched.join(
            (line, opname, out.st.kind), VECTOR, work, reads, writes, 0,
            "narrow VectorE %s in an affine loop of at most %d iterations"
            % (opname, C.GROUP_MAX_TRIP)):
        return True
    if "reduce" in opname:
        # a reduce on PSUM's data path: its result goes to PSUM (written there directly, or,
        # the result tile assigned into a PSUM tile (fuse_or_copy), as this line's earlier
        # results were), or its input was computed from a PSUM operand (the conv1d blog's
        # step 5: filter in PSUM, outputs to SBUF, reduces still 4:1)
        s.narrow_reduce = (out.st, line)
        if out.st.kind == "psum" or line in s.psum_reduce_lines or \
                any(t.st in _PSUM_FED for t in ins):
            return sched.join((line, opname, "psum-reduce"), VECTOR, work, reads, writes,
                              C.GROUP_PSUM_REDUCE,
                              "%s into PSUM, %d:1" % (opname, C.GROUP_PSUM_REDUCE))
    return False


_DMA = -1  # Sim.last_eng after a DMA (or a reused load)


def _writes_in_place(eng, kind):
    """True when the engine that produced the latest result can write it straight into
    storage of `kind`: TensorE writes only PSUM, DMA only SBUF (and HBM, never in place
    here), GpSimdE only SBUF, VectorE and ScalarE either. Otherwise assigning the result
    is a copy (a DMA cannot land in PSUM, a matmul cannot land in SBUF)."""
    if kind == "hbm":
        return False
    if eng == TENSOR:
        return kind == "psum"
    if eng == _DMA or eng == GPSIMD:
        return kind == "sbuf"
    return True


def fuse_or_copy(dst, src, mask=None):
    """Write tile `src` into `dst`: free when `src` is the fresh result of the previous
    instruction or DMA (the compiler writes it in place), else a tensor_copy."""
    s = sim()
    pred = _PREDICATE.get(src.st)
    if pred is False:
        return  # the result of an instruction predicated off everywhere
    if src.st is s.last_st and src.st.name in (_TMP, _MM) and src.box is None \
            and _writes_in_place(s.last_eng, dst.st.kind) \
            and (mask is None or src.st.name == _TMP):
        if src.size != dst.size:
            raise compile_error("shape mismatch: cannot assign a tile of shape %s to %s"
                                % (list(src.shape), list(dst.shape)))
        if s.load_tiles and load_assigned(s, dst, src, mask, dma):
            return
        if s.numerics:
            if src.st.name == _MM and dst.st.kind == "psum":
                psum_accumulate(dst, src.read().reshape(dst.shape), False)
            else:
                # a predicated instruction writes only where its predicate holds
                dst.write(src.read(), mask if mask is not None else pred)
        r = [(src.st.dep, src.box)]
        w = [(dst.st.dep, dst.box)]
        nr = s.narrow_reduce
        if nr is not None and nr[0] is src.st and dst.st.kind == "psum":
            s.psum_reduce_lines.add(nr[1])
        if not (s.sched.groups and s.sched.add_writes(src.st.dep, w)):
            t = ready_time(src.st.dep.wr_max, r, w)
            record(r, w, t)
        _account_writes(s, [dst])
        return
    copy_op(dst, src, mask=pred if mask is None else mask)


def copy_op(dst, src, engine=None, mask=None, opname="tensor_copy"):
    """tensor_copy on VectorE (default), ScalarE or GpSimdE."""
    check_onchip(src, opname)
    eng = VECTOR if engine is None else engine
    n = free_size(dst)
    if eng == VECTOR:
        cost = vector_cost(n, None, perf_factor("tensor_copy", [src], [dst]))
    else:
        cost = engine_cost(eng, n, dst.st.dt.itemsize)
    compute(eng, cost, [src], [dst], (lambda: src.read()), opname, mask=mask)


def memset_tile(t, value, engine=None, mask=None):
    """Fill a tile with a constant (VectorE memset; HBM tensors via a DMA write)."""
    s = sim()
    if isinstance(value, Tensor):
        raise compile_error("memset value must be a scalar")
    if t.st.kind == "hbm":
        if mask is not None:
            raise compile_error("memset: mask= on an HBM tensor is not supported by nkisim")
        if s.numerics:
            t.write(np.asarray(value))
        nbytes = t.size * t.st.dt.itemsize
        s.hbm_write += nbytes
        hbm_written(s, t.st)
        s.dma_bytes += nbytes
        s.sched.dma(s.costs.dma_data_ns(nbytes, 1, K.hbm_dma_peak(s.target)),
                    s.costs.dma_fixed_ns, [],
                    [(t.st.dep, t.box)], 0.0, nbytes)
        return
    n = free_size(t)
    eng = VECTOR if engine is None else engine
    if eng == VECTOR:
        f = 0.5 if (value == 0 and t.st.dt is D.BFLOAT16) else None
        cost = vector_cost(n, f)
    else:
        cost = engine_cost(eng, n, t.st.dt.itemsize, streams=1)
    compute(eng, cost, [], [t], (lambda: np.asarray(value)), "memset", mask=mask)


# ---- DMA --------------------------------------------------------------------------------
def _partition_rows(t):
    """SBUF partitions a view touches (0 for HBM views: no partition structure)."""
    if t.st.kind == "hbm":
        return 0
    if t.sk is None:
        return t.shape[0] if t.shape else 1
    k = t.sk[t.st.pdim]
    return 1 if type(k) is int else k[2]


def dma(dst, src, mask=None, transpose=False, opname="dma"):
    """One DMA transfer src -> dst (any of HBM/SBUF; PSUM is not DMA-accessible)."""
    s = sim()
    if not isinstance(src, Tensor) or not isinstance(dst, Tensor):
        raise compile_error("%s expects tensors" % opname)
    if src.st.kind == "psum" or dst.st.kind == "psum":
        raise compile_error("err_unsupported_memory: DMA cannot access PSUM; copy the PSUM tile "
                            "to SBUF (nl.copy / nisa.tensor_copy) first")
    if src.size != dst.size:
        raise compile_error("%s: element count mismatch: source %s (%d elements) vs destination "
                            "%s (%d elements)" % (opname, list(src.shape), src.size,
                                                  list(dst.shape), dst.size))
    if src.valid is not None:
        src.check_valid(mask)
    if dst.valid is not None:
        dst.check_valid(mask)
    if s.numerics:
        v = src.read()
        if transpose:
            v = v.T
        if v.shape != dst.shape:
            v = v.reshape(dst.shape)
        dst.write(v, mask, exact=src.st.dt is dst.st.dt)
    if dst.st.kind == "hbm":
        hbm_written(s, dst.st)
    elif dst.st.kind == "sbuf" and src.st.kind == "hbm":
        # the reuse distance of kept loads: bytes per partition of HBM data loaded again
        # (a region loaded before: the working set recurs and competes for SBUF; first
        # loads of a region are compulsory and do not count)
        rows = _partition_rows(dst)
        key = (src.st, src.sk, src.vd)
        if key in s.loaded_regions:
            if rows:
                s.load_stream += dst.size * dst.st.dt.itemsize // rows
        elif len(s.loaded_regions) < 1 << 20:
            s.loaded_regions.add(key)
    if not s.timing:
        _untimed(s, (src,), (dst,))
        s.last_eng = _DMA
        return
    sb = src.size * src.st.dt.itemsize
    db = dst.size * dst.st.dt.itemsize
    rs = K.runs(src)
    rd = K.runs(dst)
    src_hbm = src.st.kind == "hbm"
    dst_hbm = dst.st.kind == "hbm"
    if src_hbm:
        s.hbm_read += sb
    else:
        s.sbuf_read += sb
    if dst_hbm:
        s.hbm_write += db
    else:
        s.sbuf_write += db
    s.dma_bytes += sb if sb > db else db
    if src_hbm or dst_hbm:
        s.dma_runs += rs if rs > rd else rd
    data_ns = s.costs.transfer_ns(s.target, sb, rs, src_hbm, db, rd, dst_hbm)
    # a transfer is spread over the DMA engines by partition rows (8 rows per engine)
    rows = _partition_rows(dst) if dst.st.kind != "hbm" else _partition_rows(src)
    engines = -(-rows // C.DMA_ROWS_PER_ENGINE) if rows else C.DMA_ENGINES
    if engines > C.DMA_ENGINES:
        engines = C.DMA_ENGINES
    min_ns = data_ns * C.DMA_ENGINES / engines
    if transpose:
        data_ns /= s.costs.dma_transpose_efficiency
        min_ns /= s.costs.dma_transpose_efficiency
    s.sched.dma(data_ns, s.costs.dma_fixed_ns, [(src.st.dep, src.box)], [(dst.st.dep, dst.box)],
                min_ns, (sb if src_hbm else 0) + (db if dst_hbm else 0))
    s.last_st = dst.st
    s.last_eng = _DMA


# ---- TensorE ----------------------------------------------------------------------------
_MM_DTYPES = {"float32", "float16", "bfloat16", "tfloat32", "float32r", "float8_e4m3",
              "float8_e5m2", "float8_e4m3fn"}
_FP32ISH = {"float32", "tfloat32", "float32r"}


def psum_accumulate(dst, res, acc):
    """Write a matmul result into PSUM: acc True adds, False overwrites, None adds only where
    the location was written before (first write overwrites)."""
    if acc is False:
        dst.write(res)
        return
    if acc is None and dst.st.written is None:
        dst.write(res)
        return
    old = dst.read()
    if acc is True:
        _add_into(dst, old, res)
        return
    w = dst.written_state()
    if w is True:
        _add_into(dst, old, res)
    elif w is False:
        dst.write(res)
    else:
        dst.write(np.where(w, old + res, res))


def _add_into(dst, old, res):
    """dst.write(old + res) for `old` = dst.read(): added in place when dst is a plain
    float32 view and res a float32 array of its shape (the same values: writing float32
    into float32 storage converts nothing), else through write."""
    if (old is not None and old is dst.arr and dst.st.dt is D.FLOAT32
            and type(res) is np.ndarray and res.dtype == np.float32 and res.shape == old.shape
            and old.dtype == np.float32):
        np.add(old, res, out=old)
        dst.mark_written()
        return
    dst.write(old + res)


def matmul_core(dst, stationary, moving, accumulate, opname, transpose_flops=False):
    """stationary.T @ moving on TensorE into PSUM `dst` (allocated when None)."""
    s = sim()
    for nm, t in (("stationary", stationary), ("moving", moving)):
        if not isinstance(t, Tensor):
            raise compile_error("%s: %s must be a tile" % (opname, nm))
        if t.st.kind != "sbuf":
            raise compile_error("err_unsupported_memory: %s %s must be in SBUF (it is in %s)"
                                % (opname, nm, t.st.kind.upper()))
        if t.st.dt.name not in _MM_DTYPES:
            raise compile_error("%s: invalid dtype %s for %s (supported: fp8, bf16, fp16, "
                                "tf32, fp32)" % (opname, t.st.dt.name, nm))
    k = stationary.shape[0]
    if moving.shape[0] != k:
        raise compile_error("%s: contraction (partition) sizes differ: stationary %d vs moving %d"
                            % (opname, k, moving.shape[0]))
    if k > C.PMAX:
        raise compile_error("%s: contraction dimension %d exceeds %d partitions"
                            % (opname, k, C.PMAX))
    fs = free_size(stationary)
    fm = free_size(moving)
    if fs > C.GEMM_STATIONARY_FMAX:
        raise compile_error("%s: stationary free size %d exceeds gemm_stationary_fmax %d"
                            % (opname, fs, C.GEMM_STATIONARY_FMAX))
    if fm > C.GEMM_MOVING_FMAX:
        raise compile_error("%s: moving free size %d exceeds gemm_moving_fmax %d"
                            % (opname, fm, C.GEMM_MOVING_FMAX))
    a32 = stationary.st.dt.name in _FP32ISH
    b32 = moving.st.dt.name in _FP32ISH
    if a32 != b32:
        raise compile_error("%s: fp32/tf32 operands must be paired with fp32/tf32 (got %s and %s)"
                            % (opname, stationary.st.dt.name, moving.st.dt.name))
    if dst is None:
        dst = Tensor.root(Storage((fs, fm), D.FLOAT32, psum, name=_MM, charge=False))
        fresh = True
    else:
        fresh = False
        if dst.st.kind != "psum":
            raise compile_error("err_unsupported_memory: %s output must be in PSUM (it is in %s)"
                                % (opname, dst.st.kind.upper()))
        if dst.shape[0] != fs or free_size(dst) != fm:
            raise compile_error("%s: output tile shape %s does not match [%d, %d] "
                                "(stationary free x moving free)"
                                % (opname, list(dst.shape), fs, fm))
    if fm * dst.st.dt.itemsize > C.PSUM_BANK_BYTES:
        raise compile_error("%s: output free size %d x %d bytes exceeds one PSUM bank (%d bytes "
                            "per partition)" % (opname, fm, dst.st.dt.itemsize,
                                                C.PSUM_BANK_BYTES))
    if stationary.valid is not None:
        stationary.check_valid()
    if moving.valid is not None:
        moving.check_valid()
    if s.numerics:
        a = stationary.read().reshape(k, fs)
        b = moving.read().reshape(k, fm)
        if a.dtype != np.float32:
            a = a.astype(np.float32)
        if b.dtype != np.float32:
            b = b.astype(np.float32)
        res = O.matmul_tn(a, b)
        if dst.shape != res.shape:
            res = res.reshape(dst.shape)
        if fresh:
            dst.write(res)
        else:
            psum_accumulate(dst, res, accumulate)
    cyc = fs if fs < 64 else 64
    if fm > cyc:
        cyc = fm
    if a32:
        cyc *= s.costs.matmul_fp32_factor
    cost = cyc * s.ns_tensor
    flops = 2.0 * k * fs * fm
    s.flops += flops
    if transpose_flops:
        s.transpose_flops += flops
    s.flops_peak_ns += flops / (s.target.peak_flops_bf16 / (s.costs.matmul_fp32_factor if a32 else 1)
                                ) * 1e9
    s.matmul_count += 1
    nb_a = stationary.size * stationary.st.dt.itemsize
    nb_b = moving.size * moving.st.dt.itemsize
    s.sbuf_read += nb_a + nb_b
    s.psum_write += dst.size * 4
    s.sched.issue(TENSOR, cost, [(stationary.st.dep, stationary.box), (moving.st.dep, moving.box)],
                  [(dst.st.dep, dst.box)], s.costs.matmul_init_cycles * s.ns_tensor)
    s.last_st = dst.st
    s.last_eng = TENSOR
    return dst


def accumulate_fused(t, o):
    """`psum_tile += <fresh matmul result>`: the matmul accumulates into `t` directly."""
    s = sim()
    if _PREDICATE.get(o.st) is False:
        return  # the matmul was predicated off everywhere
    if t.shape != o.shape and t.size != o.size:
        raise compile_error("shape mismatch in PSUM accumulation: %s += %s"
                            % (list(t.shape), list(o.shape)))
    if s.numerics:
        psum_accumulate(t, o.read().reshape(t.shape), None)
    s.sched.issue_zero(TENSOR, [(o.st.dep, o.box)], [(t.st.dep, t.box)])


def transpose_core(x, dst=None, to_sbuf=False, engine=None):
    """Partition <-> free transpose of a 2-D tile on TensorE (identity matmul, into PSUM) or
    VectorE (32x32 blocks)."""
    s = sim()
    if len(x.shape) != 2:
        raise compile_error("transpose expects a 2-D tile, got shape %s" % (list(x.shape),))
    p, f = x.shape
    if dst is None:
        buf = sbuf if (to_sbuf or engine == VECTOR) else psum
        # TensorE writes all of a new tile; VectorE goes through compute(), which may not
        dst = Tensor.root(Storage((f, p), x.st.dt, buf, name=_TMP, charge=not to_sbuf,
                                  overwritten=engine != VECTOR))
    elif tuple(dst.shape) != (f, p):
        raise compile_error("transpose output shape %s does not match %s"
                            % (list(dst.shape), [f, p]))
    if engine == VECTOR:
        if p > 32 or f > 32:
            raise compile_error("VectorE transpose works on 32x32 blocks (got %dx%d)" % (p, f))
        compute(VECTOR, vector_cost(f), [x], [dst], (lambda: x.read().T), "nc_transpose")
        return dst
    if x.st.kind != "sbuf":
        raise compile_error("err_unsupported_memory: TensorE transpose input must be in SBUF")
    if s.numerics:
        dst.write(x.read().T)
    if not s.timing:
        _untimed(s, (x,), (dst,))
        s.last_eng = TENSOR
        return dst
    cyc = f if f < 64 else 64
    if p > cyc:
        cyc = p
    if x.st.dt.itemsize == 4 and not s.target.vector_perf_mode:
        cyc *= s.costs.matmul_fp32_factor
    cost = cyc * s.ns_tensor
    flops = 2.0 * p * f * p
    s.flops += flops
    s.transpose_flops += flops
    s.flops_peak_ns += flops / s.target.peak_flops_bf16 * 1e9
    s.sbuf_read += x.size * x.st.dt.itemsize
    if dst.st.kind == "psum":
        s.psum_write += dst.size * dst.st.dt.itemsize
    else:
        s.sbuf_write += dst.size * dst.st.dt.itemsize
    s.sched.issue(TENSOR, cost, [(x.st.dep, x.box)], [(dst.st.dep, dst.box)],
                  s.costs.matmul_init_cycles * s.ns_tensor)
    s.last_st = dst.st
    s.last_eng = TENSOR
    return dst
