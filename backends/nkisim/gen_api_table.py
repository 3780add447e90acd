#!/usr/bin/env python3
"""Writes and checks the one table of the NKI API (backends/nkisim/nkisim/api/table.json).

    /usr/bin/python3 backends/nkisim/gen_api_table.py --sdk DIR   # documented names from the SDK docs
    /usr/bin/python3 backends/nkisim/gen_api_table.py             # refresh from the simulator
    /usr/bin/python3 backends/nkisim/gen_api_table.py --check     # exit 1 when the file is stale

Documented names come from the API stubs of the Neuron SDK documentation (a checkout, work tree
or git directory, of github.com/aws-neuron/aws-neuron-sdk: `nki/api/nki/{__init__,isa/__init__,
language/__init__,collectives/__init__}.py`): every public function, enum, class, dtype,
memory region and constant, with its parameter list; the engines and targets are read from
its description ("... using Vector Engine", "Available only on NeuronCore-v4 and newer").
Names of later releases that the stubs lack are added from ADDITIONS. Without --sdk the
documented part of the committed table is kept.

Whether a name is modelled, and how it crosses the sandbox boundary, is read from the simulator
itself (the module tree `nkisim.api.activate` installs); names the simulator defines beyond the
documentation (the `neuronxcc.nki` API it still accepts) are listed too, undocumented.
"""
import argparse
import ast
import json
import os
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from nkisim.api import table as T  # noqa: E402

STUBS = {"nki": "nki/api/nki/__init__.py", "nki.isa": "nki/api/nki/isa/__init__.py",
         "nki.language": "nki/api/nki/language/__init__.py",
         "nki.collectives": "nki/api/nki/collectives/__init__.py"}
# NKI 0.7.0 (Neuron 2.33) names the stub snapshot predates (shared/reference/changes_2026_11.md)
ADDITIONS = [
    ("nki.language", "alloc_tiles", "function",
     "alloc_tiles(tile_shape, element_shape, buffer, dtype, address=None)"),
    ("nki.language", "alloc_blocks", "function",
     "alloc_blocks(block_shape, tile_shape, buffer, dtype, address=None)"),
    ("nki.language", "blocks", "function", "blocks(tensor, tile_shape, block_shape)"),
    ("nki.language", "NkiTileGrid", "class", None),
    ("nki.language", "NkiBlockGrid", "class", None),
]
# Objects kernel code receives as they are (pure Python, no simulator state): loop helpers,
# tile-size and dtype-limit namespaces, a loop directive.
RAW = {"affine_range", "sequential_range", "static_range", "dynamic_range", "fori_loop",
       "while_loop", "no_reorder", "tile_size", "par_dim", "nc", "spmd_dim", "fp32", "finfo",
       "sizeinbytes", "multi_buffer",
       "NKIObject"}  # base class of kernel-defined objects (api/objects.py)
# API objects a module re-exports from the simulator's storage layer (index helpers, memory
# regions, tile grids): API entries although defined elsewhere.
REEXPORTS = {"nki.language": {"tiles", "blocks", "alloc_tiles", "alloc_blocks", "arange", "ds",
                              "mgrid", "hbm", "private_hbm", "shared_hbm", "sbuf", "psum"}}
SURFACE = ("nki", "nki.isa", "nki.language", "nki.compiler", "nki.collectives")
ENGINES = (("Tensor Engine", "TensorE"), ("Vector Engine", "VectorE"),
           ("Scalar Engine", "ScalarE"), ("GpSimd Engine", "GpSimdE"), ("GpSimd", "GpSimdE"),
           ("DMA", "DMA"))


# ---- the documentation ------------------------------------------------------------------
def _read_sdk(sdk, rel):
    path = os.path.join(sdk, rel)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    return subprocess.run(["git", "--git-dir", sdk, "show", "HEAD:" + rel], check=True,
                          capture_output=True, text=True).stdout


def _sdk_commit(sdk):
    git = sdk if not os.path.isdir(os.path.join(sdk, "nki")) else os.path.join(sdk, ".git")
    try:
        return subprocess.run(["git", "--git-dir", git, "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _signature(node):
    """`name(a, b=1, *, c=None)` without annotations."""
    a = node.args
    parts = []
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    for arg, d in zip(pos, defaults):
        if arg.arg == "self":
            continue
        parts.append(arg.arg if d is None else "%s=%s" % (arg.arg, ast.unparse(d)))
    if a.vararg:
        parts.append("*" + a.vararg.arg)
    elif a.kwonlyargs:
        parts.append("*")
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        parts.append(arg.arg if d is None else "%s=%s" % (arg.arg, ast.unparse(d)))
    if a.kwarg:
        parts.append("**" + a.kwarg.arg)
    return "%s(%s)" % (node.name, ", ".join(parts))


def _engines(doc):
    """Engines the description names in its summary and its 'Supported engines' line."""
    if not doc:
        return []
    text = doc.split("\n\n")[0] + " " + " ".join(
        ln for ln in doc.splitlines() if "Supported engines" in ln)
    text = text.replace("GpSimd Engine", "GpSimd")
    found = []
    for phrase, eng in ENGINES:
        if phrase in text and eng not in found:
            found.append(eng)
    for word, eng in (("Vector", "VectorE"), ("Scalar", "ScalarE"), ("Tensor", "TensorE")):
        if "Supported engines" in text and eng not in found and \
                word in text.split("Supported engines", 1)[1]:
            found.append(eng)
    return found


def _targets(doc):
    doc = doc or ""
    if "only on NeuronCore-v4" in doc or "NeuronCore-v4 only" in doc:
        return ["trn3"]
    return ["trn2", "trn3"]  # NKI 0.3+ runs on Trainium2 and Trainium3 only


def documented(sdk):
    """Entries of the documented API, from the SDK's stubs."""
    out = []
    for module, rel in STUBS.items():
        tree = ast.parse(_read_sdk(sdk, rel))
        body = tree.body
        for i, node in enumerate(body):
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                doc = ast.get_docstring(node)
                out.append({"module": module, "name": node.name, "kind": "function",
                            "signature": _signature(node), "engines": _engines(doc),
                            "targets": _targets(doc)})
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = [ast.unparse(b) for b in node.bases]
                kind = "enum" if "Enum" in bases else "class"
                doc = ast.get_docstring(node)
                out.append({"module": module, "name": node.name, "kind": kind,
                            "signature": None, "engines": [], "targets": _targets(doc)})
                if node.name == "NkiTensor":
                    for sub in node.body:
                        if isinstance(sub, ast.FunctionDef) and not sub.name.startswith("_"):
                            prop = any(ast.unparse(d) == "property" for d in sub.decorator_list)
                            out.append({"module": module + ".NkiTensor", "name": sub.name,
                                        "kind": "property" if prop else "method",
                                        "signature": None if prop else _signature(sub),
                                        "engines": [], "targets": ["trn2", "trn3"]})
            elif isinstance(node, (ast.AnnAssign, ast.Assign)):
                target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
                if not isinstance(target, ast.Name) or target.id.startswith("_") or \
                        target.id == "DType":
                    continue
                ann = ast.unparse(node.annotation) if isinstance(node, ast.AnnAssign) else ""
                kind = {"DType": "dtype", "MemoryRegion": "buffer"}.get(ann, "constant")
                out.append({"module": module, "name": target.id, "kind": kind,
                            "signature": None, "engines": [], "targets": ["trn2", "trn3"]})
    seen = {(e["module"], e["name"]) for e in out}
    for module, name, kind, sig in ADDITIONS:
        if (module, name) not in seen:
            out.append({"module": module, "name": name, "kind": kind, "signature": sig,
                        "engines": [], "targets": ["trn2", "trn3"], "since": "0.7.0"})
    for e in out:
        e["documented"] = True
    return out


# ---- the simulator ----------------------------------------------------------------------
def surface():
    """{module name: module object} of the simulator's namespaces, and its tensor type."""
    from nkisim.api.activate import _build
    from nkisim.data.buffers import Tensor
    mods = _build()
    return {m: mods[m] for m in SURFACE}, Tensor


def _boundary(module, mod, name, obj):
    """How the sandbox boundary treats `module.name`: "api" (a named API object a trace may
    reference), "raw" (handed to kernel code as it is) or None (values, types: copied or
    not referenced by name)."""
    from nkisim.sandbox import boundary as B
    if module not in ("nki.language", "nki.isa", "nki.compiler"):
        return None
    if name in RAW:
        return "raw"
    if name.startswith("_") or isinstance(obj, types.ModuleType) or B.is_value(obj) or \
            isinstance(obj, type):
        return None
    own = getattr(mod, "__name__", "")
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
        here = (getattr(obj, "__module__", "") or "").startswith("nkisim.api.")
        if own.startswith("nkisim") and (here or name in REEXPORTS.get(module, ())):
            return "api"
        return None
    if type(obj).__name__ in ("Buffer", "_MGridMaker", "_AllocBuffer"):
        return "api"
    return None


def _is_modelled(obj):
    """Present and not a stand-in that only raises (flagged by `table.unmodelled`, or made
    by the collectives' and private paths' `_unsupported` / `_private_only` factories)."""
    if obj is None or getattr(obj, "nkisim_unmodelled", False):
        return False
    qual = getattr(obj, "__qualname__", "")
    return not qual.endswith(("_unsupported.<locals>.f", "_private_only.<locals>.f"))


def _kind(obj):
    from nkisim.data.buffers import Buffer
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)) or \
            type(obj).__name__ in ("_MGridMaker", "_AllocBuffer"):
        return "function"
    if isinstance(obj, Buffer):
        return "buffer"
    if isinstance(obj, type):
        return "class"
    return "constant"


def build(docs):
    """The table from the documented entries `docs` and the simulator."""
    mods, tensor = surface()
    entries = []
    seen = set()
    for d in docs:
        e = {k: d[k] for k in ("module", "name", "kind", "signature", "engines", "targets",
                               "documented") if k in d}
        if "since" in d:
            e["since"] = d["since"]
        if e["module"] == "nki.language.NkiTensor":
            obj = getattr(tensor, e["name"], None)
            e["modelled"] = obj is not None
            e["boundary"] = None
        else:
            mod = mods[e["module"]]
            obj = getattr(mod, e["name"], None)
            e["modelled"] = _is_modelled(obj)
            e["boundary"] = _boundary(e["module"], mod, e["name"], obj) if obj is not None \
                else None
        entries.append(e)
        seen.add((e["module"], e["name"]))
    for module in SURFACE:
        mod = mods[module]
        for name, obj in sorted(vars(mod).items()):
            if (module, name) in seen or name.startswith("_"):
                continue
            b = _boundary(module, mod, name, obj)
            if b is None:
                continue
            entries.append({"module": module, "name": name, "kind": _kind(obj),
                            "signature": None, "engines": [], "targets": [],
                            "documented": False, "modelled": _is_modelled(obj),
                            "boundary": b})
    found = {e["name"] for e in entries if e["boundary"] == "raw"}
    if found != RAW:
        raise SystemExit("raw names missing from the simulator's modules: %s"
                         % sorted(RAW - found))
    return entries


def render(docs, source):
    entries = build(docs)
    modelled = sum(1 for e in entries if e["documented"] and e["modelled"])
    total = sum(1 for e in entries if e["documented"])
    data = {"format": T.FORMAT,
            "generated_by": "backends/nkisim/gen_api_table.py (do not edit; regenerate)",
            "source": source,
            "coverage": {"modelled": modelled, "documented": total,
                         "percent": round(100.0 * modelled / total, 1) if total else 0.0},
            "entries": entries}
    lines = ["{"]
    keys = [k for k in data if k != "entries"]
    for k in keys:
        lines.append(" %s: %s," % (json.dumps(k), json.dumps(data[k], sort_keys=True)))
    lines.append(' "entries": [')
    lines.append(",\n".join("  " + json.dumps(e, sort_keys=True) for e in entries))
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def committed():
    with open(T.PATH, encoding="utf-8") as f:
        return json.load(f)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdk", help="aws-neuron-sdk checkout or git directory")
    parser.add_argument("--out", default=T.PATH)
    parser.add_argument("--check", action="store_true",
                        help="compare with the file instead of writing it")
    args = parser.parse_args(argv)
    if args.sdk:
        docs = documented(args.sdk)
        source = {"repository": "github.com/aws-neuron/aws-neuron-sdk",
                  "commit": _sdk_commit(args.sdk), "files": sorted(STUBS.values()),
                  "release": "NKI 0.6.0 (Neuron 2.32) stubs, plus NKI 0.7.0 (Neuron 2.33) "
                             "additions from its release notes"}
    else:
        old = committed()
        docs = [e for e in old["entries"] if e.get("documented")]
        source = old["source"]
    text = render(docs, source)
    if args.check:
        try:
            with open(args.out, encoding="utf-8") as f:
                current = f.read()
        except OSError as error:
            print("cannot read %s: %s" % (args.out, error), file=sys.stderr)
            return 1
        if current != text:
            print("%s is stale; run %s" % (args.out, os.path.relpath(__file__, ROOT)),
                  file=sys.stderr)
            return 1
        return 0
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
