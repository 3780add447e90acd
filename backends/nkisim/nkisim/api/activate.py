"""Install the simulator as the `nki` / `neuronxcc.nki` packages of this process.

`activate()` puts module objects into `sys.modules` (and nowhere else: no path hooks, no
.pth files), so a kernel file run afterwards in the same process can `import nki`,
`import nki.language as nl`, `from neuronxcc import nki`, `import neuronxcc.nki.isa as nisa`
and so on. Calling it again is harmless. `deactivate()` removes exactly what it installed.
The two namespaces hold the same functions under distinct module objects, so the simulator
can apply the `nki` namespace's hardware rules (`hwrules`) to kernels that import `nki` only.
"""
import sys
import types

from ..data import buffers
from . import frontend, isa, language, objects, private

_NAMES = ["nki", "nki.language", "nki.isa", "nki.typing", "nki.compiler", "nki.collectives",
          "neuronxcc", "neuronxcc.nki", "neuronxcc.nki.language", "neuronxcc.nki.isa",
          "neuronxcc.nki.typing", "neuronxcc.nki.compiler", "neuronxcc.starfish",
          "neuronxcc.starfish.penguin"]
_installed = {}


def _module(name, doc):
    m = types.ModuleType(name, doc)
    m.__nkisim__ = True
    return m


def _alias(name, src):
    """A module named `name` holding the same objects as module `src` (a namespace of its
    own, so `hwrules` can tell which namespace a kernel file imported)."""
    m = _module(name, src.__doc__)
    for k, v in vars(src).items():
        if not (k.startswith("__") and k.endswith("__")):
            setattr(m, k, v)
    return m


def _build():
    typing = _module("nki.typing", "nki.typing (nkisim)")
    for n in ("tensor", "mutable_tensor", "scalar", "mutable"):
        setattr(typing, n, getattr(frontend, n))

    compiler = _module("nki.compiler", "nki.compiler (nkisim)")
    for n in ("skip_middle_end_transformations", "enable_stack_allocator", "force_auto_alloc",
              "disable_middle_end_transformations"):
        setattr(compiler, n, frontend._identity_decorator)
    compiler.no_reorder = language.no_reorder
    compiler.sbuf = frontend._AllocBuffer("sbuf")
    compiler.psum = frontend._AllocBuffer("psum")

    collectives = _module("nki.collectives", "nki.collectives (nkisim: not supported)")

    # nki.language.constants (`from nki.language.constants import sizeinbytes`)
    lconst = _module("nki.language.constants", "nki.language.constants (nkisim)")
    lconst.sizeinbytes = language.sizeinbytes
    language.__path__ = []  # a package, for its `constants` submodule
    language.constants = lconst

    top = _module("nki", "nki (nkisim CPU simulator)")
    for n in ("jit", "baremetal", "benchmark", "profile", "trace", "simulate_kernel",
              "simulate", "Kernel"):
        setattr(top, n, getattr(frontend, n))
    top.language = language
    top.isa = isa
    top.typing = typing
    top.compiler = compiler
    top.collectives = collectives
    top.tensor = buffers.Tensor
    top.dtype = objects.dtype  # `dtype: nki.dtype = nl.bfloat16`
    top.__path__ = []
    top.__version__ = "0.0-nkisim"

    # the legacy namespace: the same API under its own module objects (hwrules)
    legacy_language = _alias("neuronxcc.nki.language", language)
    legacy_language.__path__ = []
    legacy_isa = _alias("neuronxcc.nki.isa", isa)
    legacy = _alias("neuronxcc.nki", top)
    legacy.__path__ = []
    legacy.__version__ = top.__version__
    legacy.language = legacy_language
    legacy.isa = legacy_isa

    neuronxcc = _module("neuronxcc", "neuronxcc (nkisim stand-in)")
    neuronxcc.__path__ = []
    neuronxcc.nki = legacy
    starfish = _module("neuronxcc.starfish", "")
    starfish.__path__ = []
    penguin = _module("neuronxcc.starfish.penguin", "")
    penguin.__path__ = []
    starfish.penguin = penguin
    neuronxcc.starfish = starfish
    mods = {
        "nki": top, "nki.language": language, "nki.isa": isa, "nki.typing": typing,
        "nki.compiler": compiler, "nki.collectives": collectives,
        "neuronxcc": neuronxcc, "neuronxcc.nki": legacy,
        "neuronxcc.nki.language": legacy_language, "nki.language.constants": lconst,
        "neuronxcc.nki.language.constants": lconst,
        "neuronxcc.nki.isa": legacy_isa, "neuronxcc.nki.typing": typing,
        "neuronxcc.nki.compiler": compiler, "neuronxcc.starfish": starfish,
        "neuronxcc.starfish.penguin": penguin,
    }
    mods.update(private.modules(_module, mods))  # collectives, private and internal paths
    return mods


def _isa_constants(mods):
    """`nki.isa.constants` / `neuronxcc.nki.isa.constants`: the ISA's enums (`oob_mode`...)
    under the module path older kernels import them from."""
    out = {}
    for name in ("nki.isa", "neuronxcc.nki.isa"):
        m = _module(name + ".constants", "%s.constants (nkisim)" % name)
        for k in ("engine", "dge_mode", "oob_mode", "reduce_cmd", "matmul_perf_mode",
                  "dma_engine", "nc_version"):
            setattr(m, k, getattr(isa, k))
        mods[name].__path__ = []
        mods[name].constants = m
        out[name + ".constants"] = m
    return out


def activate():
    """Make `nki`, `nki.language`, `nki.isa`, `nki.typing` and `neuronxcc.nki.*` resolve to
    the simulator in this process. Idempotent."""
    if _installed and all(sys.modules.get(k) is v for k, v in _installed.items()):
        return
    if not _installed:
        mods = _build()
        mods.update(_isa_constants(mods))
    else:
        mods = _installed
    for k, v in mods.items():
        sys.modules[k] = v
    _installed.update(mods)


def deactivate():
    """Remove the modules `activate()` installed (only if they are still ours)."""
    for k, v in list(_installed.items()):
        if sys.modules.get(k) is v:
            del sys.modules[k]


def is_active():
    return bool(_installed) and all(sys.modules.get(k) is v for k, v in _installed.items())
