"""Python objects of the NKI 0.3+ front end that hold no simulator state: `nl.NKIObject`
(the base of kernel-defined config and helper classes) and `nki.dtype` (the annotation of
dtype parameters).

NKI traces kernels as Python (NKI 0.7.0: specialisation by tracing), so these behave as
plain Python: an NKIObject subclass is an ordinary class the kernel builds and reads at trace
time. As the NKI Library writes them:
  * a class whose fields are annotations (`rows: int`, `cols: int = 512`) is built by
    keyword or position in field order (base classes' fields first), defaults from the class
    body (or a dataclass `field(default_factory=...)`), plain class attributes by keyword
    (`section_idx = None`, as the library's `SectionParams`), an unknown field a TypeError
    naming it, a field with neither value nor default left unset (the library relies on it),
    `__post_init__` called when defined; a class with its own `__init__` keeps it;
  * `@dataclass` (frozen or not) on top keeps that construction and adds `__eq__`,
    `__repr__` and, when frozen, the refusal of assignment.
Nothing of an NKIObject crosses into the simulator: only the values kernel code reads from it
(ints, dtypes, tensors) reach the NKI API.
"""

_MISSING = object()


def _fields(cls):
    """[(name, default or _MISSING)] of the annotated fields of cls and its bases, bases
    first (a redefinition keeps its first place and takes the latest default); a dataclass
    field's default_factory is called."""
    dc = getattr(cls, "__dataclass_fields__", None) or {}
    order = []
    defaults = {}
    for klass in reversed(cls.__mro__):
        ann = klass.__dict__.get("__annotations__", {})
        for name in ann:
            if name.startswith("__"):
                continue
            if name not in defaults:
                order.append(name)
            defaults[name] = klass.__dict__.get(name, defaults.get(name, _MISSING))
    out = []
    for n in order:
        f = dc.get(n)
        if f is not None and defaults[n] is _MISSING:
            import dataclasses  # noqa: PLC0415
            if f.default is not dataclasses.MISSING:
                defaults[n] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                defaults[n] = _Factory(f.default_factory)
        out.append((n, defaults[n]))
    return out


class _Factory:
    def __init__(self, make):
        self.make = make


def _class_attribute(cls, name):
    """A plain class-level attribute (`section_idx = None` without annotation): NKI builds
    such objects by keyword too."""
    for klass in cls.__mro__:
        if klass is NKIObject or klass is object:
            return False
        if name in klass.__dict__:
            v = klass.__dict__[name]
            return not (callable(v) or isinstance(v, (staticmethod, classmethod, property)))
    return False


def _construct(self, *args, **kwargs):
    """NKIObject construction (see the module docstring)."""
    cls = type(self)
    fields = _fields(cls)
    name = cls.__name__
    if len(args) > len(fields):
        raise TypeError("%s() takes %d field value(s), %d given" % (name, len(fields), len(args)))
    values = {}
    for (field, _), value in zip(fields, args):
        values[field] = value
    known = {f for f, _ in fields}
    for key, value in kwargs.items():
        if key not in known and not _class_attribute(cls, key):
            raise TypeError("%s() got an unexpected field %r (fields: %s)"
                            % (name, key, ", ".join(sorted(known)) or "none"))
        if key in values:
            raise TypeError("%s() got field %r twice" % (name, key))
        values[key] = value
    for field, default in fields:
        if field not in values and default is not _MISSING:
            values[field] = default.make() if isinstance(default, _Factory) else default
        # a field given no value and no default stays unset (the library builds
        # MLPTKGConstantsDimensionSizes without remainderIFused and sets it afterwards):
        # reading it before it is set is Python's AttributeError
    for field, value in values.items():
        object.__setattr__(self, field, value)
    post = getattr(self, "__post_init__", None)
    if post is not None:
        post()


_construct.nkisim_nkiobject_init = True


class NKIObject:
    """`nki.language.NKIObject`: base class of kernel-defined objects (configs, tile plans,
    buffers' holders). See the module docstring for construction.

    Every subclass that does not define or inherit an `__init__` of its own gets the NKIObject
    construction in its class dict at creation, so a `@dataclass` applied afterwards keeps it
    (dataclass never replaces an `__init__` the class defines) and adds only `__eq__`,
    `__repr__` and, when frozen, the refusal of assignment: keyword construction then also
    works for fields without annotation (`section_idx = None`), as NKI builds them."""

    __init__ = _construct

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "__init__" not in cls.__dict__ and getattr(cls.__init__, "nkisim_nkiobject_init",
                                                      False):
            cls.__init__ = _construct

    def __repr__(self):
        fields = _fields(type(self))
        return "%s(%s)" % (type(self).__name__, ", ".join(
            "%s=%r" % (f, getattr(self, f, None)) for f, _ in fields))


class _DtypeAnnotation:
    """`nki.dtype`: what dtype parameters are annotated with (`dtype: nki.dtype =
    nl.bfloat16`). `isinstance(v, nki.dtype)` is true for the NKI and numpy dtypes the
    simulator knows."""

    def __instancecheck__(self, value):
        from ..data import dtypes as D
        try:
            return D.lookup(value) is not None
        except Exception:  # noqa: BLE001 - anything that is no dtype
            return False

    def __repr__(self):
        return "nki.dtype"

    def __call__(self, value):
        from ..data import dtypes as D
        found = D.lookup(value)
        if found is None:
            raise TypeError("nki.dtype(%r): not an NKI dtype" % (value,))
        return found.public


dtype = _DtypeAnnotation()


def placement(fname, address, honoured=False):
    """Check an allocation's `address=` (None, or (partition offset, byte offset in the
    partition)) and note a given one where the run's result names what it ignored: the
    simulator places on-chip tensors itself, so a pinned address changes neither numerics nor
    timing (the capacity check still applies). `honoured`: the caller models this address
    (pinned_alias), so only the check runs."""
    if address is None:
        return
    from ..errors import compile_error, current_kernel_line
    from ..machine import runtime
    if not (isinstance(address, (tuple, list)) and len(address) == 2
            and all(type(a) is int or hasattr(a, "__index__") for a in address)):
        raise compile_error("%s: address must be None or (partition offset, byte offset), "
                            "got %r" % (fname, address))
    sim = runtime.CUR
    if sim is not None and not honoured:
        notes = getattr(sim, "ignored_arguments", None)
        if notes is None:
            notes = sim.ignored_arguments = {}
        line = current_kernel_line()
        notes[(line, fname + "(address=)")] = notes.get((line, fname + "(address=)"), 0) + 1



def _pin_key(address, shape, dt, buffer):
    """The registry key of a PSUM tensor pinned to `address`, or None when the address is
    not modelled (not PSUM, or not a valid address)."""
    if address is None or getattr(buffer, "kind", None) != "psum":
        return None
    if not (isinstance(address, (tuple, list)) and len(address) == 2):
        return None
    try:
        return (int(address[0]), int(address[1]))
    except (TypeError, ValueError):
        return None


def pinned_alias(fname, address, shape, dt, buffer):
    """A PSUM tensor pinned to `address` (nl.ndarray(..., address=(partition, byte))) is the
    memory at that address: when a tensor of the same shape and dtype was pinned there before
    and its storage is still held, the new tensor is a view of the same storage (the same
    bytes, values and dependency history, charged once against PSUM capacity), as on the
    hardware, where the NKI Library reuses PSUM banks by giving tiles the same address.
    Returns that view, or None (the caller allocates; a different shape or dtype at the same
    address is allocated on its own, and its address noted as not honoured)."""
    from ..machine import runtime
    from ..data.buffers import Tensor
    key = _pin_key(address, shape, dt, buffer)
    sim = runtime.CUR
    if key is None or sim is None:
        return None  # pin() checks and notes the address
    pins = getattr(sim, "pinned_psum", None)
    st = pins.get(key) if pins else None
    if st is None or tuple(st.shape) != tuple(shape) or st.dt is not dt:
        return None
    placement(fname, address, honoured=True)
    return Tensor.root(st).reshape(tuple(shape))


def pin(fname, address, tensor):
    """Register `tensor` (just allocated) as the memory at its pinned PSUM `address` for later
    pinned_alias calls; notes the address as not honoured when another shape or dtype holds
    it, or when the address is not modelled. Returns `tensor`."""
    from ..machine import runtime
    if address is None:
        return tensor
    st = getattr(tensor, "st", None)
    key = _pin_key(address, getattr(st, "shape", None), getattr(st, "dt", None),
                   getattr(st, "buffer", None))
    sim = runtime.CUR
    if key is None or sim is None or st is None:
        placement(fname, address)
        return tensor
    pins = getattr(sim, "pinned_psum", None)
    if pins is None:
        pins = sim.pinned_psum = {}
    held = pins.get(key)
    # a live tensor of another shape or dtype at this address keeps it (this one is charged
    # on its own: its sharing of those bytes is not modelled)
    placement(fname, address, honoured=held is None)
    if held is None:
        pins[key] = st
    return tensor
