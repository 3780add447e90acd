"""Memories, storages, tensors (views) and index expressions.

A `Storage` is one allocation (HBM, SBUF or PSUM) holding a numpy array (None when the
simulation runs without numerics) and its dependency history. A `Tensor` is a view of a
storage: a per-storage-dimension key (`sk`: an int, or a (start, step, count) triple) and
the order in which kept storage dimensions appear (`vd`, -1 for an inserted size-1 axis).
Views made with index arrays that are not affine keep explicit index arrays (`adv`).
SBUF and PSUM storages count against the per-partition capacity while they are alive.
"""
import math

import numpy as np

from ..machine import constants as C
from . import dtypes as D
from ..machine import runtime
from ..errors import compile_error, current_kernel_line, runtime_error
from ..machine.timing import BlockLive, DepState, timing_seq, timing_seq_end


def capacity_message(kind, need, cap, target):
    """The compiler-style out-of-memory message for SBUF or PSUM."""
    if kind == "sbuf":
        return ("Out of memory in sbuf: live SBUF tiles need %d bytes per partition (peak), "
                "capacity is %d bytes per partition on %s" % (need, cap, target))
    return ("Out of memory in psum: live PSUM tiles need %d banks of %d bytes per partition "
            "(peak %d bytes), only %d banks exist" % (-(-need // C.PSUM_BANK_BYTES),
                                                     C.PSUM_BANK_BYTES, need,
                                                     C.PSUM_NUM_BANKS))


class ParDim(int):
    """An int marking the partition dimension of a shape (old API `nl.par_dim`)."""


# The language front end (language.py) sits above this module: it builds on storages and
# tensors, and tensors offer some of its operations as Python operators (`a + b`, `t[i] = v`,
# `t.T`). This module never imports it; the package installs those operations here when it
# loads (nkisim/__init__.py), so imports run one way: storage -> instructions -> front end.
FRONT_END_OPS = ("ndarray", "assign", "transpose", "binary", "negative", "abs", "inplace")
_front_end = {}


def install_front_end(**ops):
    """Register the front-end operations tensors call (names in FRONT_END_OPS)."""
    unknown = set(ops) - set(FRONT_END_OPS)
    if unknown:
        raise ValueError("unknown front-end operations: %s" % ", ".join(sorted(unknown)))
    _front_end.update(ops)


def front_end(name):
    """The registered front-end operation `name`."""
    op = _front_end.get(name)
    if op is None:
        raise RuntimeError("nkisim: the language front end is not installed (import nkisim)")
    return op


class Buffer:
    """A memory kind: `kind` is 'hbm', 'sbuf' or 'psum'."""

    def __init__(self, name, kind):
        self.name = name
        self.kind = kind

    def __repr__(self):
        return "nl." + self.name

    def view(self, dtype, shape, **kw):
        return front_end("ndarray")(shape, dtype, buffer=self)


shared_hbm = Buffer("shared_hbm", "hbm")
private_hbm = Buffer("private_hbm", "hbm")
hbm = private_hbm
sbuf = Buffer("sbuf", "sbuf")
psum = Buffer("psum", "psum")

_BUFFER_ALIASES = {"sbuf": sbuf, "psum": psum, "hbm": hbm, "shared_hbm": shared_hbm,
                   "private_hbm": private_hbm}


def as_buffer(b):
    if b is None:
        return sbuf
    if isinstance(b, Buffer):
        return b
    if isinstance(b, str) and b in _BUFFER_ALIASES:
        return _BUFFER_ALIASES[b]
    kind = getattr(b, "nkisim_kind", None)
    if kind is not None:
        return _BUFFER_ALIASES[kind]
    raise compile_error("unsupported buffer %r" % (b,))


def _psum_banks_bytes(pp):
    banks = -(-pp // C.PSUM_BANK_BYTES)
    return banks * C.PSUM_BANK_BYTES


class Storage:
    """One allocation. `pp` is its charged bytes per partition (0 for HBM). An alias (a
    reshape of a whole tensor) shares its `base` storage's data and holds `base`, so that
    data is not pooled for another tile while the alias can still be read. `written`: which
    elements an instruction wrote: a bool array for HBM the kernel allocates and for SBUF
    tensors it declares (`language.ndarray`, runs with numerics); None (nothing), True (all)
    or an array for PSUM; None (not tracked) for any other storage."""
    __slots__ = ("shape", "dt", "buffer", "kind", "data", "dep", "sim", "pp", "written",
                 "name", "alias", "pdim", "base", "__weakref__")

    def __init__(self, shape, dt, buffer, data=None, fill=True, name="", charge=True,
                 check_rank=True, pdim=0, overwritten=False):
        """fill: give the storage data when the run has numerics (unless `data` is given);
        new on-chip data holds the fill pattern, so reads of never-written elements show.
        overwritten: the caller writes every element before anything can read one, so the
        data is not filled first."""
        sim = runtime.CUR
        self.pdim = pdim
        self.shape = shape
        self.dt = dt
        self.buffer = buffer
        kind = buffer.kind
        self.kind = kind
        self.dep = DepState()
        self.sim = sim
        self.name = name
        self.written = None
        self.alias = False
        self.base = None
        self.pp = 0
        if kind != "hbm":
            if len(shape) < 2 and check_rank:
                raise compile_error(
                    "Insufficient rank: %s tile of shape %s must have a partition and at least "
                    "one free dimension" % (kind.upper(), list(shape)))
            if shape[pdim] > C.PMAX:
                raise compile_error(
                    "Size of partition dimension %d exceeds architecture limitation of %d."
                    % (shape[pdim], C.PMAX))
            pp = dt.itemsize
            for i, n in enumerate(shape):
                if i != pdim:
                    pp *= n
            if sim is not None and charge:
                if kind == "sbuf" and pdim > 0 and math.prod(shape[:pdim]) > 1:
                    # SBUF tensors with block dimensions are allocated block by block for
                    # each block's live range (simulator._check_capacity); one block must fit
                    pb = pp // math.prod(shape[:pdim])
                    cap = sim.sbuf_cap
                    if sim.liveness:
                        self.dep.blk = BlockLive(shape[:pdim])
                elif kind == "sbuf":
                    pb = pp
                    cap = sim.sbuf_cap
                    if sim.liveness:
                        self.dep.uses = []  # accesses, for the residency replay (spills.py)
                elif pdim > 0:
                    # PSUM tensors with block dimensions are allocated block by block, each
                    # block (whole banks) for its live range, like SBUF block tensors
                    nblocks = math.prod(shape[:pdim])
                    pb = _psum_banks_bytes(pp // max(nblocks, 1))
                    cap = sim.psum_cap
                    if sim.liveness and nblocks > 1:
                        self.dep.blk = BlockLive(shape[:pdim])
                else:
                    pb = _psum_banks_bytes(pp)
                    cap = sim.psum_cap
                if pb > cap:
                    raise compile_error(capacity_message(kind, pb, cap, sim.target.name))
                self.pp = pb
                if kind == "sbuf":
                    sim.sbuf_alloc_seq += pb
                if sim.liveness:
                    sim.allocs.append((timing_seq(), pb, self.dep, kind,
                                       current_kernel_line(), timing_seq_end()))
        if data is not None:
            self.data = data
        elif sim is not None and sim.numerics and fill:
            pool = sim.pool.get((shape, dt.np)) if kind != "hbm" else None
            if pool:
                arr = pool.pop()
                if not overwritten:
                    arr.fill(D.fill_value(dt))
                self.data = arr
            elif overwritten:
                self.data = np.empty(shape, dtype=dt.np)
            else:
                self.data = np.full(shape, D.fill_value(dt), dtype=dt.np)
        else:
            self.data = None
        if kind == "hbm" and data is None and self.data is not None:
            # HBM the kernel allocated: which elements an instruction wrote (the output
            # contract: every element of a returned tensor is written, see output_contract)
            self.written = np.zeros(shape, dtype=bool)

    def __del__(self):
        sim = self.sim
        if sim is not None:
            data = getattr(self, "data", None)
            if data is not None and self.kind != "hbm" and sim.pool is not None:
                lst = sim.pool.setdefault((self.shape, data.dtype), [])
                if len(lst) < 8:
                    lst.append(data)


def _key_box(sk, shape):
    box = []
    full = True
    d = 0
    for k in sk:
        if type(k) is int:
            box.append(k)
            box.append(k + 1)
            full = False
        else:
            s, step, n = k
            if step == 1:
                box.append(s)
                box.append(s + n)
                if full and (s != 0 or n != shape[d]):
                    full = False
            elif n <= 0:
                box.append(s)
                box.append(s)
                full = False
            elif step > 0:
                box.append(s)
                box.append(s + step * (n - 1) + 1)
                full = False
            else:
                box.append(s + step * (n - 1))
                box.append(s + 1)
                full = False
        d += 1
    return None if full else tuple(box)


def _key_slices(sk):
    out = []
    for k in sk:
        if type(k) is int:
            out.append(k)
        else:
            s, step, n = k
            if step > 0:
                out.append(slice(s, s + step * (n - 1) + 1 if n > 0 else s, step))
            else:
                stop = s + step * n
                out.append(slice(s, stop if stop >= 0 else None, step))
    return tuple(out)


def apply_key(data, sk, vd, shape):
    """The numpy view of `data` selected by a storage key and view-dimension order."""
    a = data[_key_slices(sk)]
    kept = [d for d in range(len(sk)) if type(sk[d]) is not int]
    order = [d for d in vd if d >= 0]
    if order != kept:
        a = a.transpose([kept.index(d) for d in order])
    if len(order) != len(vd):
        a = a.reshape(shape)
    return a


# shape -> (storage key, view dimensions, size) of a whole-storage view: tiles of a few
# shapes are made thousands of times
_ROOT_KEYS = {}


class Tensor:
    """A view of a storage. Kernel-facing attributes: shape, dtype, buffer, ndim, size."""
    __slots__ = ("st", "shape", "sk", "vd", "arr", "adv", "box", "valid", "size",
                 "__weakref__")
    __array_ufunc__ = None  # numpy scalars defer to the tensor's reflected operators

    # -- construction -------------------------------------------------------------------
    @staticmethod
    def root(st):
        shape = st.shape
        keys = _ROOT_KEYS.get(shape) if type(shape) is tuple else None
        if keys is None:
            keys = (tuple((0, 1, n) for n in shape), tuple(range(len(shape))), math.prod(shape))
            if type(shape) is tuple and len(_ROOT_KEYS) < 4096:
                _ROOT_KEYS[shape] = keys
        t = Tensor.__new__(Tensor)
        t.st = st
        t.shape = shape
        t.sk, t.vd, t.size = keys
        t.arr = st.data
        t.adv = None
        t.box = None
        t.valid = None
        return t

    @staticmethod
    def view(st, sk, vd):
        t = Tensor.__new__(Tensor)
        t.st = st
        t.sk = sk
        t.vd = vd
        shape = tuple(1 if d < 0 else sk[d][2] for d in vd)
        t.shape = shape
        t.adv = None
        t.valid = None
        t.box = None if st.alias else _key_box(sk, st.shape)
        t.size = math.prod(shape)
        data = st.data
        t.arr = apply_key(data, sk, vd, shape) if data is not None else None
        return t

    @staticmethod
    def advanced(st, adv, shape, box, valid=None):
        t = Tensor.__new__(Tensor)
        t.st = st
        t.sk = None
        t.vd = None
        t.shape = tuple(shape)
        t.adv = adv
        t.arr = None
        t.box = box
        t.valid = valid
        t.size = math.prod(t.shape)
        return t

    # -- kernel-facing attributes ---------------------------------------------------------
    @property
    def dtype(self):
        return self.st.dt.public

    @property
    def buffer(self):
        return self.st.buffer

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def itemsize(self):
        return self.st.dt.itemsize

    @property
    def nbytes(self):
        return self.size * self.st.dt.itemsize

    @property
    def name(self):
        return self.st.name

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return "Tensor(shape=%s, dtype=%s, buffer=%s)" % (list(self.shape), self.st.dt.name,
                                                          self.st.buffer.name)

    def __bool__(self):
        raise compile_error("err_ambiguous_tensor_truth_value: the truth value of a tensor is "
                            "not known at trace time")

    def __iter__(self):
        raise compile_error("a tensor cannot be iterated; index it with slices or arange")

    def __hash__(self):
        return id(self)

    # -- data access ----------------------------------------------------------------------
    def read(self):
        """Current values (numpy array of the view's shape); None without numerics."""
        if self.arr is not None:
            return self.arr
        st = self.st
        if st.data is None:
            return None
        if self.adv is not None:
            return st.data[self.adv]
        return None

    def write(self, values, mask=None, exact=False):
        """Store `values` (broadcast to the view) converted to the storage dtype. exact: the
        values were read from a storage of this dtype, so they are representable already
        (every storage holds quantized values and quantizing is idempotent)."""
        st = self.st
        if st.data is None:
            return
        if exact and type(values) is np.ndarray and values.dtype == st.data.dtype:
            v = values
        else:
            v = D.quantize(values, st.dt)
        if v.shape != self.shape:
            v = fit_shape(v, self.shape)
        if mask is not None:
            try:
                mask = np.broadcast_to(mask, self.shape)
            except ValueError:
                mask = None  # a predicate on the inputs' shape (e.g. of a reduction)
        if st.kind == "psum" or st.written is not None:
            self.mark_written(mask)
        if self.arr is not None:
            if mask is None:
                self.arr[...] = v
            else:
                np.copyto(self.arr, v, where=np.broadcast_to(mask, self.shape))
            return
        adv = self.adv
        m = self.valid
        if mask is not None:
            mb = np.broadcast_to(mask, self.shape)
            m = mb if m is None else (m & mb)
        if m is None:
            st.data[adv] = v
        else:
            full = np.broadcast_arrays(*[np.asarray(a) for a in adv],
                                       np.empty(self.shape, dtype=np.uint8))[:-1]
            st.data[tuple(a[m] for a in full)] = np.broadcast_to(v, self.shape)[m]

    def written_state(self):
        """For a PSUM view: True if every element was written before, False if none was,
        else a bool array of the view's shape."""
        st = self.st
        w = st.written
        if w is None:
            return False
        if w is True:
            return True
        v = apply_key(w, self.sk, self.vd, self.shape) if self.sk is not None else w[self.adv]
        if v.all():
            return True
        if not v.any():
            return False
        return v

    def mark_written(self, mask=None):
        st = self.st
        w = st.written
        if w is True:
            return
        if st.kind != "psum":  # HBM, or a declared SBUF tensor (language.ndarray)
            self._mark_hbm(w, mask)
            return
        if self.box is None and mask is None and self.sk is not None:
            st.written = True
            return
        if w is None:
            st.written = np.zeros(st.shape, dtype=bool)
        if self.sk is not None:
            w = apply_key(st.written, self.sk, self.vd, self.shape)
            if mask is None:
                w[...] = True
            else:
                w |= np.broadcast_to(mask, self.shape)
        else:
            st.written[self.adv] = True

    def _mark_hbm(self, w, mask):
        """Mark this view's elements (where `mask` holds) in an HBM (or tracked SBUF)
        storage's `written` array, which stays an array (reshaped aliases share it as a
        view)."""
        if w is None:
            return
        if w.shape != self.st.shape:  # a reinterpretation of another shape: all of it
            w[...] = True
            return
        if self.sk is not None:
            v = apply_key(w, self.sk, self.vd, self.shape)
            if not np.shares_memory(v, w):  # a copy: mark the view's bounding box
                w[_key_slices(self.sk)] = True
            elif mask is None:
                v[...] = True
            else:
                v |= np.broadcast_to(mask, self.shape)
            return
        m = self.valid
        if mask is not None:
            mb = np.broadcast_to(mask, self.shape)
            m = mb if m is None else (m & mb)
        if m is None:
            w[self.adv] = True
        else:
            full = np.broadcast_arrays(*[np.asarray(a) for a in self.adv],
                                       np.empty(self.shape, dtype=np.uint8))[:-1]
            w[tuple(a[m] for a in full)] = True

    def unwritten(self):
        """Bool array of this view's shape, True where no instruction wrote the element, or
        None when every element was written (or the storage is not tracked: inputs, on-chip
        memory, runs without numerics)."""
        st = self.st
        w = st.written
        if st.kind != "hbm" or not isinstance(w, np.ndarray) or w.shape != st.shape:
            return None
        v = apply_key(w, self.sk, self.vd, self.shape) if self.sk is not None else w[self.adv]
        if v.all():
            return None
        return ~v

    def check_valid(self, mask=None):
        """Raise the out-of-bounds error if an unmasked element lies outside the tensor."""
        if self.valid is None:
            return
        v = self.valid
        if mask is not None:
            try:
                v = v | ~np.broadcast_to(mask, self.shape)
            except ValueError:
                pass
        if not np.all(v):
            raise runtime_error("err_tensor_access_out_of_bound: access out of bounds of "
                                "tensor of shape %s" % (list(self.st.shape),))

    # -- indexing -------------------------------------------------------------------------
    def __getitem__(self, key):
        return index(self, key)

    def __setitem__(self, key, value):
        front_end("assign")(index(self, key), value)

    # -- reshape / views ------------------------------------------------------------------
    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if math.prod(shape) != self.size:
            raise compile_error("cannot reshape tensor of shape %s into %s"
                                % (list(self.shape), list(shape)))
        if self.sk is not None and self.box is None and self.vd == tuple(range(len(self.st.shape))):
            st = self.st
            new = Storage.__new__(Storage)
            # an alias storage sharing data and dependency history
            new.shape = shape
            new.dt = st.dt
            new.buffer = st.buffer
            new.kind = st.kind
            new.data = st.data.reshape(shape) if st.data is not None else None
            new.dep = st.dep
            new.sim = None
            new.pp = 0
            w = st.written
            # an HBM (or tracked SBUF) alias shares its base's write record (the same
            # elements)
            new.written = w.reshape(shape) if st.kind != "psum" and isinstance(
                w, np.ndarray) else None
            new.name = st.name
            new.alias = True
            new.pdim = 0
            new.base = st
            return Tensor.root(new)
        raise compile_error("reshape is only supported on a whole tensor")

    @property
    def T(self):
        return front_end("transpose")(self)

    def ap(self, pattern=None, offset=0, **kw):
        """Physical access pattern: [[stride, count], ...] in elements from `offset`."""
        if kw.get("vector_offset") is not None or kw.get("scalar_offset") is not None:
            raise compile_error("access patterns with dynamic offsets are not supported")
        if self.sk is None or self.box is not None:
            raise compile_error("ap() is only supported on a whole tensor")
        st = self.st
        shape = tuple(int(c) for _, c in pattern)
        idx = np.full(shape, int(offset), dtype=np.int64)
        for ax, (stride, count) in enumerate(pattern):
            sh = [1] * len(shape)
            sh[ax] = int(count)
            idx = idx + (np.arange(int(count), dtype=np.int64) * int(stride)).reshape(sh)
        flat_size = math.prod(st.shape)
        if idx.size and (idx.min() < 0 or idx.max() >= flat_size):
            raise runtime_error("err_tensor_access_out_of_bound: access pattern outside tensor")
        adv = np.unravel_index(idx, st.shape)
        box = []
        for a in adv:
            box += [int(a.min()), int(a.max()) + 1] if a.size else [0, 0]
        return Tensor.advanced(st, adv, shape, tuple(box))

    # -- arithmetic (old-style operators create new tiles) -------------------------------
    def _bin(self, other, op, rev=False):
        binary = front_end("binary")
        return binary(op, other, self) if rev else binary(op, self, other)

    def __add__(self, o): return self._bin(o, "add")
    def __radd__(self, o): return self._bin(o, "add", True)
    def __sub__(self, o): return self._bin(o, "subtract")
    def __rsub__(self, o): return self._bin(o, "subtract", True)
    def __mul__(self, o): return self._bin(o, "multiply")
    def __rmul__(self, o): return self._bin(o, "multiply", True)
    def __truediv__(self, o): return self._bin(o, "divide")
    def __rtruediv__(self, o): return self._bin(o, "divide", True)
    def __pow__(self, o): return self._bin(o, "power")
    def __rpow__(self, o): return self._bin(o, "power", True)
    def __mod__(self, o): return self._bin(o, "mod")
    def __floordiv__(self, o): return self._bin(o, "floor_divide")
    def __and__(self, o): return self._bin(o, "bitwise_and")
    def __or__(self, o): return self._bin(o, "bitwise_or")
    def __xor__(self, o): return self._bin(o, "bitwise_xor")
    def __lt__(self, o): return self._bin(o, "less")
    def __le__(self, o): return self._bin(o, "less_equal")
    def __gt__(self, o): return self._bin(o, "greater")
    def __ge__(self, o): return self._bin(o, "greater_equal")
    # NKI compares a tensor with None as Python objects at trace time (`bias != None`)
    def __eq__(self, o): return False if o is None else self._bin(o, "equal")
    def __ne__(self, o): return True if o is None else self._bin(o, "not_equal")

    def __neg__(self):
        return front_end("negative")(self)

    def __abs__(self):
        return front_end("abs")(self)

    def __iadd__(self, o):
        return front_end("inplace")(self, o, "add")

    def __isub__(self, o):
        return front_end("inplace")(self, o, "subtract")

    def __imul__(self, o):
        return front_end("inplace")(self, o, "multiply")

    def __itruediv__(self, o):
        return front_end("inplace")(self, o, "divide")


def fit_shape(v, shape):
    """Broadcast or reshape a value to `shape` (same element count), else a compile error."""
    try:
        return np.broadcast_to(v, shape)
    except ValueError:
        pass
    if v.size == math.prod(shape):
        return v.reshape(shape)
    raise compile_error("shape mismatch: cannot write a value of shape %s into a tile of "
                        "shape %s" % (list(v.shape), list(shape)))


def shape_fits(src, dst):
    """True when a value of shape src can be written to shape dst."""
    if src == dst:
        return True
    if math.prod(src) == math.prod(dst):
        return True
    try:
        return np.broadcast_shapes(src, dst) == tuple(dst)
    except ValueError:
        return False


# ---- index expressions --------------------------------------------------------------------

class IExpr:
    """An index expression: start + step * k for k in range(n), on axis `ax` of an `nd`-dim
    broadcast shape (affine form), or an explicit integer array `arr` (general form)."""
    __slots__ = ("start", "step", "n", "ax", "nd", "arr")

    def __init__(self, start, step, n, ax=0, nd=1, arr=None):
        self.start = start
        self.step = step
        self.n = n
        self.ax = ax
        self.nd = nd
        self.arr = arr

    @property
    def shape(self):
        if self.arr is not None:
            return self.arr.shape
        s = [1] * self.nd
        s[self.ax] = self.n
        return tuple(s)

    def values(self):
        if self.arr is not None:
            return self.arr
        return (self.start + self.step * np.arange(self.n, dtype=np.int64)).reshape(self.shape)

    def __array__(self, dtype=None):
        v = self.values()
        return v.astype(dtype) if dtype is not None else v

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if self.arr is None and self.nd == 1:
            # e.g. [:, None] or [None, :]
            pos = [i for i, k in enumerate(key) if isinstance(k, slice)]
            if len(pos) == 1 and all(k is None for i, k in enumerate(key) if i != pos[0]):
                sl = key[pos[0]]
                if sl == slice(None):
                    return IExpr(self.start, self.step, self.n, pos[0], len(key))
        return IExpr(0, 0, 0, arr=self.values()[key])

    def _aff(self, mul, add):
        if self.arr is not None:
            return IExpr(0, 0, 0, arr=self.arr * mul + add)
        return IExpr(self.start * mul + add, self.step * mul, self.n, self.ax, self.nd)

    def __add__(self, o):
        if isinstance(o, (int, np.integer)):
            return self._aff(1, int(o))
        return _gen(np.add, self, o)

    __radd__ = __add__

    def __sub__(self, o):
        if isinstance(o, (int, np.integer)):
            return self._aff(1, -int(o))
        return _gen(np.subtract, self, o)

    def __rsub__(self, o):
        if isinstance(o, (int, np.integer)):
            return self._aff(-1, int(o))
        return _gen(np.subtract, o, self)

    def __mul__(self, o):
        if isinstance(o, (int, np.integer)):
            return self._aff(int(o), 0)
        return _gen(np.multiply, self, o)

    __rmul__ = __mul__

    def __neg__(self):
        return self._aff(-1, 0)

    def __floordiv__(self, o): return _gen(np.floor_divide, self, o)
    def __rfloordiv__(self, o): return _gen(np.floor_divide, o, self)
    def __mod__(self, o): return _gen(np.mod, self, o)
    def __rmod__(self, o): return _gen(np.mod, o, self)

    def __lt__(self, o): return np.less(self.values(), _val(o))
    def __le__(self, o): return np.less_equal(self.values(), _val(o))
    def __gt__(self, o): return np.greater(self.values(), _val(o))
    def __ge__(self, o): return np.greater_equal(self.values(), _val(o))
    def __eq__(self, o): return np.equal(self.values(), _val(o))
    def __ne__(self, o): return np.not_equal(self.values(), _val(o))
    __hash__ = object.__hash__


def _val(o):
    if isinstance(o, IExpr):
        return o.values()
    if isinstance(o, Tensor):
        raise compile_error("err_control_flow_condition_depending_on_arange: cannot compare an "
                            "index expression with a tensor")
    return o


def _gen(f, a, b):
    return IExpr(0, 0, 0, arr=np.asarray(f(_val(a), _val(b)), dtype=np.int64))


def arange(*args):
    """nl.arange(stop) / nl.arange(start, stop[, step]): a 1-D affine index expression."""
    if len(args) == 1:
        start, stop, step = 0, int(args[0]), 1
    elif len(args) == 2:
        start, stop, step = int(args[0]), int(args[1]), 1
    else:
        start, stop, step = int(args[0]), int(args[1]), int(args[2])
    n = len(range(start, stop, step))
    return IExpr(start, step, n, 0, 1)


class MGrid(tuple):
    """Result of nl.mgrid[...]: a tuple of index expressions, also reachable as .p/.x/.y/.z."""

    @property
    def p(self):
        return self[0]

    @property
    def x(self):
        return self[1]

    @property
    def y(self):
        return self[2]

    @property
    def z(self):
        return self[3]


class _MGridMaker:
    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        nd = len(key)
        out = []
        for ax, sl in enumerate(key):
            start = sl.start or 0
            step = sl.step or 1
            n = len(range(start, sl.stop, step))
            out.append(IExpr(start, step, n, ax, nd))
        return MGrid(out)


mgrid = _MGridMaker()


def ds(start, size):
    """nl.ds(start, size): the slice start:start+size."""
    return slice(int(start), int(start) + int(size))


# ---- indexing -----------------------------------------------------------------------------

def _oob(msg):
    return runtime_error("err_tensor_access_out_of_bound: " + msg)


def _fast_index(t, key):
    """Common case: only non-negative ints and unit-step slices on a view whose dimensions all
    map to storage dimensions; None when not applicable."""
    sk = list(t.sk)
    vd = t.vd
    shape = t.shape
    new_vd = []
    new_shape = []
    i = 0
    for k in key:
        d = vd[i]
        if d < 0:
            return None
        n = shape[i]
        i += 1
        tk = type(k)
        if tk is slice:
            if k.step is not None and k.step != 1:
                return None
            a = k.start
            b = k.stop
            if a is None:
                a = 0
            elif type(a) is not int or a < 0 or a > n:
                return None
            if b is None:
                b = n
            elif type(b) is not int or b < 0 or b > n:
                return None
            s, stp, _ = sk[d]
            cnt = b - a if b > a else 0
            sk[d] = (s + stp * a, stp, cnt)
            new_vd.append(d)
            new_shape.append(cnt)
        elif tk is int:
            if k < 0 or k >= n:
                return None
            s, stp, _ = sk[d]
            sk[d] = s + stp * k
        else:
            return None
    st = t.st
    v = Tensor.__new__(Tensor)
    v.st = st
    sk = tuple(sk)
    v.sk = sk
    vd = tuple(new_vd)
    v.vd = vd
    shape = tuple(new_shape)
    v.shape = shape
    v.adv = None
    v.valid = None
    v.box = None if st.alias else _key_box(sk, st.shape)
    size = 1
    for n in new_shape:
        size *= n
    v.size = size
    data = st.data
    v.arr = apply_key(data, sk, vd, shape) if data is not None else None
    return v


def index(t, key):
    """View of tensor `t` selected by `key` (NKI indexing semantics)."""
    if type(key) is np.ndarray and key.dtype == np.bool_:
        # `tile[mask]`: the tile as an operand predicated by `mask` (a boolean index
        # expression). A predicate true everywhere selects the tile itself; a partial one
        # would predicate the consuming instruction, which is not modelled.
        if key.all():
            return t
        raise compile_error("tile[mask] with a mask that is false somewhere (an operand "
                            "predicate) is not supported by nkisim; pass mask= to the "
                            "instruction instead")
    if type(key) is not tuple:
        key = (key,)
    if t.sk is not None:
        nd = len(t.shape)
        if len(key) == nd:
            r = _fast_index(t, key)
        elif len(key) < nd:
            r = _fast_index(t, key + (slice(None),) * (nd - len(key)))
        else:
            r = None
        if r is not None:
            return r
    if t.sk is None:
        raise compile_error("indexing a tensor that was itself selected with index arrays is "
                            "not supported (nested advanced indexing)")
    shape = t.shape
    nd = len(shape)
    # expand Ellipsis
    for i, k in enumerate(key):
        if k is Ellipsis:
            n_real = sum(1 for x in key if x is not None and x is not Ellipsis)
            key = key[:i] + (slice(None),) * (nd - n_real) + key[i + 1:]
            break
    n_real = sum(1 for x in key if x is not None)
    if n_real > nd:
        raise compile_error("too many indices (%d) for tensor of rank %d" % (n_real, nd))
    if n_real < nd:
        key = key + (slice(None),) * (nd - n_real)
    has_expr = False
    has_dyn = False
    has_slice = False
    for k in key:
        tk = type(k)
        if tk is IExpr:
            has_expr = True
        elif tk is slice:
            has_slice = True
        elif tk is Tensor or tk is np.ndarray:
            has_dyn = True
    sk = list(t.sk)
    vd = t.vd
    if not has_expr and not has_dyn:
        new_vd = []
        i = 0
        for k in key:
            if k is None:
                new_vd.append(-1)
                continue
            d = vd[i]
            n = shape[i]
            i += 1
            if type(k) is slice:
                start, stop = k.start, k.stop
                if stop is not None and stop > n:
                    raise _oob("slice %s:%s on a dimension of size %d" % (start, stop, n))
                if start is not None and start > n:
                    raise _oob("slice %s:%s on a dimension of size %d" % (start, stop, n))
                a, b, c = k.indices(n)
                cnt = len(range(a, b, c))
                if d >= 0:
                    s, stp, _ = sk[d]
                    sk[d] = (s + stp * a, stp * c, cnt)
                    new_vd.append(d)
                elif cnt == 1:
                    new_vd.append(-1)
                else:
                    raise _oob("slice on a size-1 axis")
            else:
                try:
                    j = int(k)
                except TypeError:
                    raise compile_error("unsupported index %r" % (k,))
                if j < 0:
                    j += n
                if j < 0 or j >= n:
                    raise _oob("index %d on a dimension of size %d" % (int(k), n))
                if d >= 0:
                    s, stp, _ = sk[d]
                    sk[d] = s + stp * j
        return Tensor.view(t.st, tuple(sk), tuple(new_vd))
    if has_expr and not has_dyn:
        if has_slice:
            raise compile_error("err_unsupported_mixing_basic_advanced_tensor_indexing: cannot "
                                "mix slices with arange/mgrid index expressions")
        exprs_nd = max(k.nd if k.arr is None else k.arr.ndim for k in key if type(k) is IExpr)
        axes_used = {}
        ok = True
        i = 0
        for k in key:
            if k is None:
                ok = False
                break
            if type(k) is IExpr:
                if k.arr is not None:
                    ok = False
                    break
                ax = k.ax + exprs_nd - k.nd
                if ax in axes_used:
                    ok = False
                    break
                axes_used[ax] = (i, k)
            i += 1
        if ok:
            new_vd = [-1] * exprs_nd
            for ax, (i, k) in axes_used.items():
                d = vd[i]
                n = shape[i]
                lo = k.start if k.step >= 0 else k.start + k.step * (k.n - 1)
                hi = k.start + k.step * (k.n - 1) if k.step >= 0 else k.start
                if k.n > 0 and (lo < 0 or hi >= n):
                    ok = False
                    break
                if d < 0:
                    ok = False
                    break
                s, stp, _ = sk[d]
                sk[d] = (s + stp * k.start, stp * k.step, k.n)
                new_vd[ax] = d
            if ok:
                i = 0
                for k in key:
                    if type(k) is not IExpr:
                        d = vd[i]
                        n = shape[i]
                        j = int(k)
                        if j < 0 or j >= n:
                            raise _oob("index %d on a dimension of size %d" % (j, n))
                        if d >= 0:
                            s, stp, _ = sk[d]
                            sk[d] = s + stp * j
                    i += 1
                return Tensor.view(t.st, tuple(sk), tuple(new_vd))
            sk = list(t.sk)
    return _advanced_index(t, key)


def _advanced_index(t, key):
    """General path: explicit index arrays, dynamic (tensor) indices, out-of-bound checks."""
    st = t.st
    shape = t.shape
    sk = list(t.sk)
    vd = t.vd
    arrays = []     # per view dim: index array (view coordinates) or None for slices
    i = 0
    dyn_dims = set()
    for k in key:
        if k is None:
            raise compile_error("None (newaxis) is not supported together with index arrays")
        n = shape[i]
        tk = type(k)
        if tk is slice:
            a, b, c = k.indices(n)
            arrays.append(("slice", np.arange(a, b, c, dtype=np.int64)))
        elif tk is IExpr:
            arrays.append(("arr", np.asarray(k.values(), dtype=np.int64)))
        elif tk is Tensor:
            vals = k.read()
            if vals is None:
                arrays.append(("dyn", np.zeros(k.shape, dtype=np.int64)))
                dyn_dims.add(i)
            else:
                arrays.append(("arr", np.asarray(vals).astype(np.int64)))
                dyn_dims.add(i)
        elif tk is np.ndarray:
            arrays.append(("arr", k.astype(np.int64)))
        else:
            arrays.append(("int", np.asarray(int(k), dtype=np.int64)))
        i += 1
    # slices mixed with arrays: slices take their own trailing axes (numpy-like outer product)
    arr_parts = [a for kind, a in arrays if kind in ("arr", "dyn", "int")]
    bshape = np.broadcast_shapes(*[a.shape for a in arr_parts]) if arr_parts else ()
    slice_dims = [a for kind, a in arrays if kind == "slice"]
    out_shape = tuple(bshape) + tuple(len(a) for a in slice_dims)
    nb = len(bshape)
    view_idx = []
    si = 0
    for kind, a in arrays:
        if kind == "slice":
            sh = [1] * len(out_shape)
            sh[nb + si] = len(a)
            view_idx.append(a.reshape(sh))
            si += 1
        else:
            view_idx.append(a.reshape(tuple(a.shape) + (1,) * len(slice_dims))
                            if a.ndim else a)
    valid = None
    for i, a in enumerate(view_idx):
        n = shape[i]
        bad = (a < 0) | (a >= n)
        if np.any(bad):
            b = np.broadcast_to(~bad, out_shape)
            valid = b if valid is None else (valid & b)
            view_idx[i] = np.clip(a, 0, n - 1)
    # map view coordinates to storage coordinates
    adv = []
    box = []
    for d in range(len(sk)):
        k = sk[d]
        if type(k) is int:
            adv.append(k)
            box += [k, k + 1]
            continue
        i = vd.index(d)
        s, stp, _ = k
        a = s + stp * view_idx[i]
        adv.append(a)
        if i in dyn_dims:
            box += [0, st.shape[d]]
        elif np.size(a):
            box += [int(np.min(a)), int(np.max(a)) + 1]
        else:
            box += [0, 0]
    if valid is not None:
        valid = np.array(valid)
    return Tensor.advanced(st, tuple(adv), out_shape, tuple(box), valid)

