"""The one table of the NKI API (`table.json` next to this file): every name the NKI
documentation of the current release defines in `nki`, `nki.isa`, `nki.language` and
`nki.collectives` (signature, engines, targets), plus the simulator's own extensions (older
`neuronxcc.nki` names it still accepts), each marked modelled or not.

Readers: the simulator's surface (`install_unmodelled`: a documented name the simulator does
not model exists and raises a clear compile error naming it), the sandbox boundary's API
allow-list (`boundary_names`, `raw_names`) and `export_facts.py`. The table is written by
`backends/nkisim/gen_api_table.py`, which also checks it against the simulator.
"""
import json
import os

from ..errors import compile_error

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "table.json")
FORMAT = "nkisim-api-table/1"
_cache = None

# short module names as kernels write them
SHORT = {"nki.isa": "nisa", "nki.language": "nl", "nki.collectives": "ncc", "nki": "nki"}


def load():
    """The table as a dict: {"format", "source", "entries": [...]}. Read once per process."""
    global _cache
    if _cache is None:
        with open(PATH, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("format") != FORMAT:
            raise RuntimeError("%s: unknown format %r" % (PATH, data.get("format")))
        _cache = data
    return _cache


def entries(module=None):
    """Entries (dicts with name, module, kind, documented, modelled, ...) in table order,
    optionally only those of one module (`"nki.isa"`)."""
    return [e for e in load()["entries"] if module is None or e["module"] == module]


def entry(full_name):
    for e in load()["entries"]:
        if e["module"] + "." + e["name"] == full_name:
            return e
    return None


def boundary_names(module):
    """Names of `module` a kernel trace may reference as API objects."""
    return [e["name"] for e in entries(module) if e.get("boundary") == "api"]


def raw_names():
    """Names whose objects kernel code receives as they are (pure Python: loop helpers,
    tile-size and dtype-limit namespaces)."""
    return {e["name"] for e in load()["entries"] if e.get("boundary") == "raw"}


def coverage():
    """(modelled, documented) over the documented names of the current release."""
    doc = [e for e in load()["entries"] if e.get("documented")]
    return sum(1 for e in doc if e.get("modelled")), len(doc)


def _stub(module, e):
    short = SHORT.get(module, module)
    sig = e.get("signature") or e["name"] + "(...)"
    where = ", ".join(e.get("targets") or []) or "the documented targets"

    def unmodelled(*args, **kw):
        raise compile_error(
            "%s.%s is documented NKI (%s.%s, on %s) but nkisim does not model it: it cannot "
            "simulate this kernel" % (short, e["name"], short, sig, where))
    unmodelled.__name__ = e["name"]
    unmodelled.__qualname__ = e["name"]
    unmodelled.__doc__ = "Documented NKI, not modelled by nkisim (raises a compile error)."
    unmodelled.nkisim_unmodelled = True
    return unmodelled


def install_unmodelled(namespace, module):
    """Define, in a simulator module's namespace, a raising stand-in for every documented
    function of `module` the namespace does not define, so every documented name exists."""
    for e in entries(module):
        if e.get("documented") and e["kind"] == "function" and e["name"] not in namespace:
            fn = _stub(module, e)
            fn.__module__ = namespace.get("__name__", fn.__module__)
            namespace[e["name"]] = fn


def unmodelled(fn):
    """Mark a simulator function that exists for its clear error only (not modelled)."""
    fn.nkisim_unmodelled = True
    return fn
