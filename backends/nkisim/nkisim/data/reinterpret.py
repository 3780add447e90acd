"""`tensor.view(dtype)`: the same bytes read as another dtype (NKI's reinterpreting view).

Storage keeps values, not bytes (bf16 and fp8 live in float32 arrays), so a reinterpreting
view converts through the byte image: the source values are encoded to their little-endian
bytes in the source dtype and decoded in the view's dtype. The innermost axis scales by the
ratio of the item sizes (an fp32 [P, 1] tile viewed as fp8 is [P, 4]).

Contracts:
* Only a whole tensor can be reinterpreted (like `reshape`); index the view afterwards.
* Between dtypes numpy stores natively (float32, float16, integers), the view is a live numpy
  alias: reads and writes go through to the tensor.
* Otherwise (bf16, tf32, fp8 on either side) the view is read-only; each read decodes the
  tensor's current bytes (`tensor.view(...)[i]` decodes when it is indexed). Writing through
  it is an error (writing would need an encoder back into the value storage, not modelled).
* The view shares the tensor's dependency state, so the timing model orders it like the
  tensor itself.
"""
import numpy as np

from . import dtypes as D
from .buffers import Storage, Tensor
from ..errors import compile_error

# storage -> byte image: dtypes whose numpy storage *is* their memory format
_NATIVE = {"float32", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16",
           "uint32", "uint64", "bool", "float8_e5m2_x4", "float8_e4m3fn_x4",
           "float4_e2m1fn_x4", "float8_e8m0fnu"}  # MX types are stored as their bit patterns
# fp8 formats: (exponent bits, mantissa bits, exponent field reserved for inf/NaN)
_FP8 = {"float8_e4m3": (4, 3, True), "float8_e5m2": (5, 2, True),
        "float8_e4m3fn": (4, 3, False)}


def _fp8_encode(v, name):
    """float32 values -> uint8 codes of fp8 format `name` (round to nearest even,
    saturating to the largest finite value; NaN -> the format's NaN)."""
    ebits, mbits, ieee = _FP8[name]
    bias = (1 << (ebits - 1)) - 1
    v = np.asarray(v, dtype=np.float32)
    sign = np.signbit(v).astype(np.uint8) << 7
    a = np.abs(v).astype(np.float64)
    _, ex = np.frexp(a)                         # a = f * 2**ex, f in [0.5, 1)
    e = np.maximum(ex - 1, 1 - bias)            # subnormals share the smallest exponent
    step = np.ldexp(1.0, (e - mbits).astype(np.int64))
    # code = exponent field * 2**mbits + mantissa; a carry out of the mantissa bumps the
    # exponent, which is the correct rounding across binades
    units = np.rint(a / step)
    code = np.where(a < np.ldexp(1.0, 1 - bias), units,
                    ((e + bias) << mbits) + units - (1 << mbits))
    if ieee:
        # largest finite: exponent field all ones but one, mantissa all ones
        max_code = ((1 << ebits) - 2) << mbits | ((1 << mbits) - 1)
        nan_code = 0x7F
    else:
        max_code = 0x7E                          # S.1111.110: 0x7F is NaN
        nan_code = 0x7F
    code = np.minimum(np.nan_to_num(code, nan=0.0, posinf=max_code), max_code)
    if ieee:
        inf_code = ((1 << ebits) - 1) << mbits
        code = np.where(np.isinf(a), inf_code, code)
    else:
        code = np.where(np.isinf(a), max_code, code)
    code = np.where(np.isnan(a), nan_code, code)
    return code.astype(np.uint8) | sign


def _fp8_decode(b, name):
    """uint8 codes of fp8 format `name` -> float32 values."""
    ebits, mbits, ieee = _FP8[name]
    bias = (1 << (ebits - 1)) - 1
    b = np.asarray(b, dtype=np.uint8)
    neg = (b >> 7) != 0
    ef = ((b >> mbits) & ((1 << ebits) - 1)).astype(np.int64)
    m = (b & ((1 << mbits) - 1)).astype(np.float64)
    val = np.where(ef == 0, np.ldexp(m, 1 - bias - mbits),
                   np.ldexp(1.0 + m / (1 << mbits), ef - bias))
    if ieee:
        top = ef == (1 << ebits) - 1
        val = np.where(top & (m == 0), np.inf, val)
        val = np.where(top & (m != 0), np.nan, val)
    else:
        val = np.where((b & 0x7F) == 0x7F, np.nan, val)
    return np.where(neg, -val, val).astype(np.float32)


def to_bytes(values, dt):
    """Little-endian byte image (uint8, innermost axis x itemsize) of storage values of dt."""
    v = np.ascontiguousarray(values)
    if dt.name in _NATIVE:
        b = v.view(np.uint8)
    elif dt.name == "bfloat16":
        b = (v.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype("<u2").view(np.uint8)
    elif dt.name in ("tfloat32", "float32r", "float64"):
        b = v.astype("<f4").view(np.uint8)
    elif dt.name in _FP8:
        b = _fp8_encode(v, dt.name)
    else:
        raise compile_error("view: no byte image for dtype %s" % dt.name)
    return b.reshape(v.shape[:-1] + (v.shape[-1] * dt.itemsize,))


def from_bytes(b, dt):
    """Storage values of dt from a byte image (innermost axis / itemsize)."""
    b = np.ascontiguousarray(b, dtype=np.uint8)
    shape = b.shape[:-1] + (b.shape[-1] // dt.itemsize,)
    if dt.name in _NATIVE:
        return b.view(dt.np).reshape(shape)
    if dt.name == "bfloat16":
        u = b.view("<u2").astype(np.uint32) << np.uint32(16)
        return u.view(np.float32).reshape(shape)
    if dt.name in ("tfloat32", "float32r"):
        return b.view("<f4").astype(np.float32).reshape(shape)
    if dt.name in _FP8:
        return _fp8_decode(b, dt.name).reshape(shape)
    raise compile_error("view: no byte image for dtype %s" % dt.name)


class _Decoded(np.ndarray):
    """Values decoded from another dtype's bytes: read-only (a write is a compile error)."""

    def __setitem__(self, key, value):
        raise compile_error("writing through a view(dtype) that involves bf16, tf32 or fp8 "
                            "is not modelled by nkisim (only reads are); write the tensor "
                            "itself")


class _ReinterpretedStorage(Storage):
    """An alias of `src` seen as another dtype; `data` is computed from src on each access."""
    __slots__ = ("src", "live")

    @property
    def data(self):
        d = self.src.data
        if d is None:
            return None
        if self.live:
            return d.view(self.dt.np).reshape(self.shape)
        out = from_bytes(to_bytes(d, self.src.dt), self.dt).view(_Decoded)
        out.flags.writeable = False  # writes through a decoded view are not modelled
        return out


class _ReinterpretedTensor(Tensor):
    """The whole-tensor view: its values are decoded when read, not when the view is made."""
    __slots__ = ()

    @property
    def arr(self):
        return self.st.data

    @arr.setter
    def arr(self, _value):
        pass


def reinterpret(t, dtype):
    """`t.view(dtype)`: t's bytes as dtype (see the module contract)."""
    dt = D.lookup(dtype)
    if dt is None:
        raise compile_error("view: unsupported dtype %r" % (dtype,))
    if t.sk is None or t.box is not None or t.vd != tuple(range(len(t.st.shape))):
        raise compile_error("view(dtype) is only supported on a whole tensor (take the view "
                            "first, then index it)")
    st = t.st
    src_dt = st.dt
    nbytes = st.shape[-1] * src_dt.itemsize
    if nbytes % dt.itemsize:
        raise compile_error("view: the innermost axis (%d bytes of %s) is not a whole number "
                            "of %s items" % (nbytes, src_dt.name, dt.name))
    shape = tuple(st.shape[:-1]) + (nbytes // dt.itemsize,)
    if len(shape) and st.kind != "hbm" and len(shape) < 2:
        raise compile_error("view: an on-chip tile keeps a partition and a free axis")
    new = _ReinterpretedStorage.__new__(_ReinterpretedStorage)
    new.src = st
    new.live = (src_dt.name in _NATIVE and dt.name in _NATIVE and src_dt.np.itemsize ==
                src_dt.itemsize and dt.np.itemsize == dt.itemsize)
    new.shape = shape
    new.dt = dt
    new.buffer = st.buffer
    new.kind = st.kind
    new.dep = st.dep
    new.sim = None
    new.pp = 0
    new.written = st.written
    new.name = st.name
    new.alias = True  # dependencies cover the whole storage
    new.base = st.base if st.base is not None else st  # the storage whose bytes it shows
    new.pdim = st.pdim
    r = Tensor.root(new)
    if new.live:
        return r
    v = _ReinterpretedTensor.__new__(_ReinterpretedTensor)
    for name in ("st", "shape", "sk", "vd", "adv", "box", "valid", "size"):
        setattr(v, name, getattr(r, name))
    return v


class _ViewEntry:
    """`Tensor.view`: on the class, the internal view constructor `Tensor.view(st, sk, vd)`;
    on a tensor, NKI's `t.view(dtype)`."""

    def __init__(self, make):
        self.make = make

    def __get__(self, obj, cls=None):
        if obj is None:
            return self.make
        return lambda dtype: reinterpret(obj, dtype)


def install():
    if not isinstance(Tensor.__dict__.get("view"), _ViewEntry):
        Tensor.view = _ViewEntry(Tensor.view)

