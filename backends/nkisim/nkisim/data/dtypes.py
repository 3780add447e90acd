"""NKI data types and their numpy storage.

Public dtype objects (what kernels see as `nl.float32` etc.) are numpy scalar types where
numpy has them, and `DTypeToken` instances for types numpy lacks (bfloat16, tfloat32, fp8).
Values of float types without a numpy equivalent are stored as float32 already rounded to
the type's precision (round-to-nearest-even on the mantissa, saturation for fp8).
"""
import numpy as np


class DTypeToken:
    """A dtype numpy does not have; compares equal to its name string."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    def __eq__(self, other):
        if isinstance(other, DTypeToken):
            return other.name == self.name
        if isinstance(other, str):
            return other == self.name
        return False

    def __hash__(self):
        return hash(self.name)

    @property
    def dtype(self):
        """What `np.dtype(nl.bfloat16)` gives: a numpy type of the same item size (float16
        for the 2-byte types, uint8 for fp8, float32 for the 4-byte ones), so `.itemsize`
        arithmetic in kernels is right. Its values are not this type's: pass host arrays as
        float32 with `input_dtypes` to get this type's rounding."""
        return np.dtype(_STANDIN[self.name])

    @property
    def itemsize(self):
        return self.dtype.itemsize


_STANDIN = {"bfloat16": np.float16, "tfloat32": np.float32, "float32r": np.float32,
            "float8_e4m3": np.uint8, "float8_e5m2": np.uint8, "float8_e4m3fn": np.uint8}

bfloat16 = DTypeToken("bfloat16")
tfloat32 = DTypeToken("tfloat32")
float32r = DTypeToken("float32r")
float8_e4m3 = DTypeToken("float8_e4m3")
float8_e5m2 = DTypeToken("float8_e5m2")
float8_e4m3fn = DTypeToken("float8_e4m3fn")


class MXDType(DTypeToken):
    """An MX (OCP microscaling) dtype of NeuronCore-v4 (trn3). The x4 types pack four
    contraction-axis elements into one item: float8_e5m2_x4 / float8_e4m3fn_x4 are 32-bit
    (four fp8 codes, element i in byte i), float4_e2m1fn_x4 is 16-bit (four fp4 codes,
    element i in bits 4i..4i+3) [MXG: "Data Tensor"]. float8_e8m0fnu is the 8-bit scale
    (a biased power-of-two exponent). nkisim stores these as their unsigned-integer bit
    patterns; only nisa.quantize_mx / nc_matmul_mx give them numeric meaning (nkisim.mx)."""
    __slots__ = ()

    @property
    def dtype(self):
        return np.dtype(_MX_STORAGE[self.name])


_MX_STORAGE = {"float8_e5m2_x4": np.uint32, "float8_e4m3fn_x4": np.uint32,
               "float4_e2m1fn_x4": np.uint16, "float8_e8m0fnu": np.uint8}

float8_e5m2_x4 = MXDType("float8_e5m2_x4")
float8_e4m3fn_x4 = MXDType("float8_e4m3fn_x4")
float4_e2m1fn_x4 = MXDType("float4_e2m1fn_x4")
float8_e8m0fnu = MXDType("float8_e8m0fnu")


class DT:
    """Internal description of a dtype."""
    __slots__ = ("name", "public", "np", "itemsize", "is_float", "is_int", "mant_bits",
                 "max_value", "lo", "hi")

    def __init__(self, name, public, npdt, itemsize, is_float, mant_bits=None, max_value=None):
        self.name = name
        self.public = public
        self.np = np.dtype(npdt)
        self.itemsize = itemsize
        self.is_float = is_float
        self.is_int = not is_float and name != "bool"
        self.mant_bits = mant_bits
        self.max_value = max_value
        if self.is_int:
            info = np.iinfo(self.np)
            self.lo, self.hi = int(info.min), int(info.max)
        else:
            self.lo = self.hi = None

    def __repr__(self):
        return self.name


FLOAT32 = DT("float32", np.float32, np.float32, 4, True)
FLOAT16 = DT("float16", np.float16, np.float16, 2, True)
BFLOAT16 = DT("bfloat16", bfloat16, np.float32, 2, True, mant_bits=7)
TFLOAT32 = DT("tfloat32", tfloat32, np.float32, 4, True, mant_bits=10)
FLOAT32R = DT("float32r", float32r, np.float32, 4, True)
FP8_E4M3 = DT("float8_e4m3", float8_e4m3, np.float32, 1, True, mant_bits=3, max_value=240.0)
FP8_E4M3FN = DT("float8_e4m3fn", float8_e4m3fn, np.float32, 1, True, mant_bits=3, max_value=448.0)
FP8_E5M2 = DT("float8_e5m2", float8_e5m2, np.float32, 1, True, mant_bits=2, max_value=57344.0)
INT8 = DT("int8", np.int8, np.int8, 1, False)
INT16 = DT("int16", np.int16, np.int16, 2, False)
INT32 = DT("int32", np.int32, np.int32, 4, False)
INT64 = DT("int64", np.int64, np.int64, 8, False)
UINT8 = DT("uint8", np.uint8, np.uint8, 1, False)
UINT16 = DT("uint16", np.uint16, np.uint16, 2, False)
UINT32 = DT("uint32", np.uint32, np.uint32, 4, False)
UINT64 = DT("uint64", np.uint64, np.uint64, 8, False)
BOOL = DT("bool", np.bool_, np.uint8, 1, False)
FLOAT64 = DT("float64", np.float64, np.float32, 4, True)  # accepted on input, held as fp32

# MX storage dtypes (bit patterns; see MXDType). Integer-like to every other instruction.
FP8_E5M2_X4 = DT("float8_e5m2_x4", float8_e5m2_x4, np.uint32, 4, False)
FP8_E4M3FN_X4 = DT("float8_e4m3fn_x4", float8_e4m3fn_x4, np.uint32, 4, False)
FP4_E2M1FN_X4 = DT("float4_e2m1fn_x4", float4_e2m1fn_x4, np.uint16, 2, False)
FP8_E8M0FNU = DT("float8_e8m0fnu", float8_e8m0fnu, np.uint8, 1, False)
MX_X4 = (FP8_E5M2_X4, FP8_E4M3FN_X4, FP4_E2M1FN_X4)

ALL = [FLOAT32, FLOAT16, BFLOAT16, TFLOAT32, FLOAT32R, FP8_E4M3, FP8_E4M3FN, FP8_E5M2, INT8,
       INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64, BOOL, FLOAT64,
       FP8_E5M2_X4, FP8_E4M3FN_X4, FP4_E2M1FN_X4, FP8_E8M0FNU]

_LOOKUP = {}
for _d in ALL:
    if isinstance(_d.public, type) and issubclass(_d.public, np.generic):
        # NKI 0.3+ dtypes are their names (`DType = str`: str(nl.float32) == "float32", as
        # the NKI Library compares them): numpy's dtype objects print so and still equal
        # the numpy types (legacy kernels pass np.float32)
        _LOOKUP[_d.public] = _d
        _d.public = np.dtype(_d.public)
    _LOOKUP[_d.public] = _d
    _LOOKUP[_d.name] = _d
    if not isinstance(_d.public, DTypeToken):
        _LOOKUP[np.dtype(_d.public)] = _d
_LOOKUP["bool_"] = BOOL
_LOOKUP[bool] = BOOL
_LOOKUP[float] = FLOAT32
_LOOKUP[int] = INT32
_LOOKUP["fp32"] = FLOAT32
_LOOKUP["bf16"] = BFLOAT16
_LOOKUP["fp16"] = FLOAT16


def lookup(d):
    """Internal DT for any dtype spelling (NKI object, numpy type/dtype, string); None if unknown."""
    if isinstance(d, DT):
        return d
    try:
        r = _LOOKUP.get(d)
    except TypeError:
        r = None
    if r is not None:
        return _check_mx(r) if r.public.__class__ is MXDType else r
    name = getattr(d, "name", None)
    if isinstance(name, str) and name in _LOOKUP:
        return _check_mx(_LOOKUP[name])
    try:
        return _LOOKUP.get(np.dtype(d))
    except Exception:
        return None


def _check_mx(dt):
    """MX dtypes exist only on NeuronCore-v4: using one while simulating another target is a
    compile error naming the reason."""
    if dt.public.__class__ is MXDType:
        from ..machine import runtime
        from ..errors import compile_error
        s = runtime.CUR
        if s is not None and not getattr(s.target, "mx", False):
            raise compile_error("%s is an MX dtype of NeuronCore-v4 (trn3); target %s does not "
                                "have it (simulate with target='trn3')"
                                % (dt.name, s.target.name))
    return dt


def round_mantissa(x, mant_bits):
    """Round float32 array `x` to `mant_bits` mantissa bits, round-to-nearest-even; NaN/inf kept."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    drop = 23 - mant_bits
    half = np.uint32((1 << (drop - 1)) - 1)
    lsb = (bits >> np.uint32(drop)) & np.uint32(1)
    rounded = (bits + half + lsb) & np.uint32((0xFFFFFFFF << drop) & 0xFFFFFFFF)
    out = rounded.view(np.float32)
    special = ~np.isfinite(x)
    if special.any():
        out = np.where(special, x, out)
    return out


def to_bf16(x):
    """float32 values rounded to bfloat16 (round-to-nearest-even), returned as float32."""
    return round_mantissa(x, 7)


def quantize(values, dt):
    """Convert computed values (any numeric array) to the storage representation of `dt`."""
    v = np.asarray(values)
    if dt.is_float:
        if dt.np == np.float16:
            return v.astype(np.float16)
        v32 = v.astype(np.float32, copy=False)
        if dt.mant_bits is not None:
            v32 = round_mantissa(v32, dt.mant_bits)
            if dt.max_value is not None:
                v32 = np.clip(v32, -dt.max_value, dt.max_value)
        return v32
    if dt is BOOL:
        return (v != 0).astype(np.uint8)
    if v.dtype.kind == "f":
        v = np.nan_to_num(np.rint(v.astype(np.float64)), nan=0.0)
        return np.clip(v, dt.lo, dt.hi).astype(dt.np)
    if v.dtype.kind == "b":
        return v.astype(dt.np)
    return v.astype(dt.np)


def fill_value(dt):
    """Sentinel for fresh allocations: NaN for floats, an odd pattern for integers."""
    return np.nan if dt.is_float else 4


def promote(a, b):
    """Result dtype of a binary op on tiles of dtypes a and b."""
    if a is b:
        return a
    if a.is_float and not b.is_float:
        return a
    if b.is_float and not a.is_float:
        return b
    if a.is_float:
        if a.itemsize == b.itemsize:
            return FLOAT32
        return a if a.itemsize > b.itemsize else b
    if a is BOOL:
        return b
    if b is BOOL:
        return a
    return a if a.itemsize >= b.itemsize else b


def sizeinbytes(dtype):
    """Bytes per element of an NKI dtype (`nki.language.constants.sizeinbytes`)."""
    d = lookup(dtype)
    if d is None:
        raise TypeError("sizeinbytes: unknown dtype %r" % (dtype,))
    return d.itemsize


class FInfo:
    """Limits of a float dtype, like `numpy.finfo` (`nl.finfo(nl.bfloat16).min`)."""

    def __init__(self, dt):
        self.dtype = dt.public
        self.bits = dt.itemsize * 8
        if dt.mant_bits is None:  # float32, float16, float32r: numpy knows them
            info = np.finfo(dt.np)
            mx, eps, tiny = float(info.max), float(info.eps), float(info.tiny)
        else:
            exp_bits = self.bits - 1 - dt.mant_bits
            if dt.name == "tfloat32":
                exp_bits = 8
            bias = (1 << (exp_bits - 1)) - 1
            eps = 2.0 ** -dt.mant_bits
            tiny = 2.0 ** (1 - bias)
            mx = dt.max_value if dt.max_value is not None else \
                float((2.0 - eps) * 2.0 ** bias)
        self.max = mx
        self.min = -mx
        self.eps = eps
        self.tiny = tiny
        self.smallest_normal = tiny

    def __repr__(self):
        return "finfo(min=%g, max=%g, eps=%g, dtype=%s)" % (self.min, self.max, self.eps,
                                                            lookup(self.dtype).name)


def finfo(dtype):
    """`nl.finfo(dtype)`: limits of a float dtype (bfloat16 and fp8 included)."""
    d = lookup(dtype)
    if d is None or not d.is_float:
        raise TypeError("finfo: %r is not a float dtype" % (dtype,))
    return FInfo(d)


class _Limits(FInfo):
    """`nl.fp32`: the float32 limits (`nl.fp32.min`), also usable as the float32 dtype."""

    def __init__(self):
        super().__init__(FLOAT32)

    def __eq__(self, other):
        return lookup(other) is FLOAT32

    def __hash__(self):
        return hash("float32")


fp32 = _Limits()
_LOOKUP[fp32] = FLOAT32
