#!/usr/bin/env python3
"""Writes the facts the prompts state about the hardware and the NKI calls, read from the
simulator itself, so that the prompts and the simulator never disagree.

    /usr/bin/python3 backends/nkisim/export_facts.py            # rewrites prompts/generated/facts.json
    /usr/bin/python3 backends/nkisim/export_facts.py --check    # exit 1 when the file is stale

The facts: per target, the engine clocks, the DMA and HBM bandwidths and the bandwidth a kernel
actually gets (the lower of the two), the fixed DMA latency, the cost of one element-wise pass on
each engine relative to VectorE; the shared limits (partitions, matmul tiles, PSUM, bn_stats); for
every nisa instruction its argument order (from the simulator's argument binding), its default
engine and its one-line description; for nl functions their signature and the engine that runs
element-wise math. Which calls are listed, and the coverage figure, come from the API table
(nkisim/api/table.json): the modelled nki.isa and nki.language functions.
"""
import argparse
import ast
import inspect
import json
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(ROOT, "prompts", "generated", "facts.json")
sys.path.insert(0, HERE)

from nkisim.machine import constants as C  # noqa: E402
from nkisim.machine import costs as K  # noqa: E402
from nkisim.machine import core, runtime  # noqa: E402
from nkisim.api import isa, language, mx  # noqa: E402
from nkisim.api import table  # noqa: E402
from nkisim.data import ops  # noqa: E402
from nkisim.machine.timing import GPSIMD, SCALAR, TENSOR, VECTOR  # noqa: E402

ENGINE_NAMES = {VECTOR: "VectorE", SCALAR: "ScalarE", GPSIMD: "GpSimdE", TENSOR: "TensorE"}
ENGINE_BY_SYMBOL = {"VECTOR": "VectorE", "SCALAR": "ScalarE", "GPSIMD": "GpSimdE",
                    "TENSOR": "TensorE"}
# The element count of the pass used to compare engines (fp32, per partition).
COMPARE_ELEMENTS = 2048


def _round(value, digits=4):
    return float("%.*g" % (digits, value))


def _first_line(doc):
    if not doc:
        return ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def _pass_costs(target):
    """ns of one fp32 element-wise pass over COMPARE_ELEMENTS elements per partition, with one
    input tile and one output, on each engine, as the simulator prices it."""
    saved = runtime.CUR
    runtime.CUR = types.SimpleNamespace(
        target=target, ns_vector=1e9 / target.vector_hz, ns_scalar=1e9 / target.scalar_hz,
        ns_gpsimd=1e9 / target.gpsimd_hz, ns_tensor=1e9 / target.tensor_hz,
        costs=K.table(target))
    try:
        return {ENGINE_NAMES[e]: core.engine_cost(e, COMPARE_ELEMENTS, 4, 2)
                for e in (VECTOR, SCALAR, GPSIMD)}
    finally:
        runtime.CUR = saved


def target_facts(target):
    costs = _pass_costs(target)
    effective = runtime.hbm_dma_bandwidth(target)
    return {
        "tensor_ghz": _round(target.tensor_hz / 1e9),
        "vector_ghz": _round(target.vector_hz / 1e9),
        "scalar_ghz": _round(target.scalar_hz / 1e9),
        "gpsimd_ghz": _round(target.gpsimd_hz / 1e9),
        "peak_bf16_tflops": _round(target.peak_flops_bf16 / 1e12),
        # MX matmuls (nisa.nc_matmul_mx, nisa.quantize_mx) exist only where the target has them
        "mx": bool(getattr(target, "mx", False)),
        "peak_mx_tflops": _round(getattr(target, "peak_flops_mx", 0.0) / 1e12),
        "mx_matmul_speedup": C.MX_MATMUL_SPEEDUP if getattr(target, "mx", False) else 1,
        "mx_group_size": C.MX_GROUP_SIZE,
        "hbm_gbps_per_core": _round(target.hbm_bytes_per_ns),
        "dma_engines": C.DMA_ENGINES,
        "dma_gbps_per_engine": _round(target.dma_bytes_per_ns / C.DMA_ENGINES),
        "dma_gbps_per_core": _round(target.dma_bytes_per_ns),
        "effective_gbps_per_core": _round(effective),
        "dma_fixed_us": _round(K.table(target).dma_fixed_ns / 1000.0),
        "dma_transpose_efficiency": _round(K.table(target).dma_transpose_efficiency),
        "sbuf_kib_per_partition": _round(target.sbuf_bytes_per_partition / 1024.0),
        "vector_perf_mode": bool(target.vector_perf_mode),
        "vector_gpsimd_shared_port": bool(target.vector_gpsimd_shared_port),
        "pass_elements": COMPARE_ELEMENTS,
        "pass_us": {name: _round(ns / 1000.0) for name, ns in sorted(costs.items())},
        "pass_cost_vs_vector": {name: _round(ns / costs["VectorE"], 3)
                                for name, ns in sorted(costs.items())},
        # the simulator's cost table for this target (nkisim/machine/cost_tables.json)
        "cost_table": {k: (_round(v) if isinstance(v, float) else v)
                       for k, v in K.table(target).as_dict().items() if k != "sources"},
    }


def limits():
    return {
        "partitions": C.PMAX,
        "gemm_stationary_fmax": C.GEMM_STATIONARY_FMAX,
        "gemm_moving_fmax": C.GEMM_MOVING_FMAX,
        "psum_bank_bytes": C.PSUM_BANK_BYTES,
        "psum_banks": C.PSUM_NUM_BANKS,
        "bn_stats_fmax": C.BN_STATS_FMAX,
        "min_ii_cycles": C.MIN_II_CYCLES,
        "access_overhead_cycles": C.ACCESS_OVERHEAD_CYCLES,
        "gpsimd_startup_cycles": C.GPSIMD_STARTUP_CYCLES,
        "matmul_fp32_factor": C.MATMUL_FP32_FACTOR,
        "vector_reciprocal_factor": C.VECTOR_RECIPROCAL_FACTOR,
        "bn_aggr_factor": _round(C.BN_AGGR_FACTOR),
    }


def _mx_engine(name):
    """The engine nkisim.mx's `name` charges (its first `core.compute(ENGINE, ...)` or
    `sched.issue(ENGINE, ...)`), read from mx.py's source."""
    with open(mx.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name != name:
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                    sub.func.attr in ("compute", "issue") and sub.args and \
                    isinstance(sub.args[0], ast.Name) and sub.args[0].id in ENGINE_BY_SYMBOL:
                return ENGINE_BY_SYMBOL[sub.args[0].id]
    return None


def _mx_required(name):
    """Parameters of nkisim.mx's `name` without a default (the required ones)."""
    fn = getattr(mx, name, None)
    if fn is None:
        return set()
    return {p.name for p in inspect.signature(fn).parameters.values() if p.default is p.empty}


def _bind_names(tree):
    """For every module-level function of isa.py: the argument list given to `_bind` and the
    engine of its first `compute`/`_engine` default, following one call into a private helper
    (activation -> _activation)."""
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    # Module-level argument lists (`_NC_MATMUL_MX_ARGS = [...]`) that `_bind` may be given by name
    lists = {node.targets[0].id: node.value for node in tree.body
             if isinstance(node, ast.Assign) and len(node.targets) == 1 and
             isinstance(node.targets[0], ast.Name) and
             isinstance(node.value, (ast.List, ast.Tuple))}

    def strings(node):
        return [e.value for e in node.elts if isinstance(e, ast.Constant)]

    delegated = set()  # nkisim.mx functions the instruction calls

    def scan(node):
        names, engine, new_first = None, None, False
        helper = None
        delegated.clear()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                    isinstance(sub.func.value, ast.Name) and sub.func.value.id == "_mx" and \
                    engine is None:
                # an MX instruction is implemented in nkisim.mx: its engine is the one the
                # implementation charges, its required arguments the implementation's
                engine = _mx_engine(sub.func.attr)
                delegated.add(sub.func.attr)
            if not isinstance(sub, ast.Call) or not isinstance(sub.func, ast.Name):
                continue
            fn = sub.func.id
            if fn == "_bind" and names is None and len(sub.args) >= 4 and \
                    isinstance(sub.args[3], (ast.List, ast.Tuple)):
                names = strings(sub.args[3])
            elif fn == "_bind" and names is None and len(sub.args) >= 4 and \
                    isinstance(sub.args[3], ast.Name) and sub.args[3].id in lists:
                names = strings(lists[sub.args[3].id])
                if len(sub.args) >= 5 and isinstance(sub.args[4], ast.Constant) and \
                        sub.args[4].value is True:
                    # dst first, and no form without dst: the instruction is new in NKI 0.3+
                    names = (names, False)
            elif fn == "_bind" and names is None and len(sub.args) >= 4 and \
                    isinstance(sub.args[3], ast.IfExp):
                # `[legacy names] if not new else [names with dst]`: the NKI 0.3+ form
                choice = sub.args[3]
                legacy_first = isinstance(choice.test, ast.UnaryOp) and \
                    isinstance(choice.test.op, ast.Not)
                names = strings(choice.orelse if legacy_first else choice.body)
                legacy = strings(choice.body if legacy_first else choice.orelse)
                names = (names, legacy)
            elif fn in ("compute", "copy_op", "memset_tile") and engine is None and sub.args:
                first = sub.args[0]
                if isinstance(first, ast.Name) and first.id in ENGINE_BY_SYMBOL:
                    engine = ENGINE_BY_SYMBOL[first.id]
            elif fn in ("matmul_core", "transpose_core") and engine is None:
                engine = "TensorE"
            elif fn == "_engine" and engine is None and len(sub.args) == 2:
                second = sub.args[1]
                if isinstance(second, ast.Name) and second.id in ENGINE_BY_SYMBOL:
                    engine = ENGINE_BY_SYMBOL[second.id]
            elif fn == "_is_new":
                new_first = True
            elif fn.startswith("_") and fn in functions and helper is None and \
                    fn not in ("_bind", "_is_new", "_out", "_reject", "_engine"):
                helper = fn
        return names, engine, new_first, helper

    def parameters(node):
        """Names read as p["x"] (required) and defaults of p.get("x", d)."""
        required, defaults = set(), {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and \
                    sub.value.id == "p" and isinstance(sub.slice, ast.Constant):
                required.add(sub.slice.value)
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                    sub.func.attr == "get" and isinstance(sub.func.value, ast.Name) and \
                    sub.func.value.id == "p" and sub.args and \
                    isinstance(sub.args[0], ast.Constant) and len(sub.args) == 2 and \
                    isinstance(sub.args[1], ast.Constant):
                defaults[sub.args[0].value] = sub.args[1].value
        return required, defaults

    out = {}
    for name, node in functions.items():
        if name.startswith("_"):
            continue
        names, engine, new_first, helper = scan(node)
        required, defaults = parameters(node)
        for implementation in delegated:
            required |= _mx_required(implementation)
        if helper is not None and (names is None or engine is None):
            h_names, h_engine, h_new, _ = scan(functions[helper])
            names = names if names is not None else h_names
            engine = engine if engine is not None else h_engine
            new_first = new_first or h_new
            h_required, h_defaults = parameters(functions[helper])
            required |= h_required
            defaults.update(h_defaults)
        if names is not None:
            legacy = None
            if isinstance(names, tuple):
                names, legacy = names
                new_first = True
            out[name] = (names, engine, new_first, legacy, required, defaults)
    return out


def _parameter_text(names, required, defaults):
    """`a, b, c=None`: a name is required while every name before it is; after the first
    optional one, all are shown with their default (None unless the simulator states one)."""
    parts, optional = [], False
    for n in names:
        if n not in required:
            optional = True
        parts.append("%s=%r" % (n, defaults.get(n)) if optional else n)
    return ", ".join(parts)


def _function(module, e):
    """The simulator's function of a modelled table entry, or None."""
    if e["kind"] != "function" or not e["modelled"]:
        return None
    fn = getattr(module, e["name"], None)
    return fn if inspect.isfunction(fn) else None


def isa_facts():
    """The modelled nki.isa functions of the API table, each with the argument binding of the
    module that defines it (isa.py or one of its concept modules)."""
    binds = {}
    facts = {}
    for e in table.entries("nki.isa"):
        fn = _function(isa, e)
        if fn is None:
            continue
        path = inspect.getsourcefile(fn)
        if path not in binds:
            with open(path, encoding="utf-8") as f:
                binds[path] = _bind_names(ast.parse(f.read()))
        if e["name"] not in binds[path]:
            continue
        names, engine, new_first, legacy, required, defaults = binds[path][e["name"]]
        plain = [n for n in names if n != "name"]
        args = (["dst"] if new_first else []) + plain
        entry = {"signature": "nisa.%s(%s)" % (e["name"], _parameter_text(
                     args, required | {"dst"}, defaults)),
                 "summary": _first_line(inspect.getdoc(fn))}
        if new_first and legacy is not False:
            # neuronxcc.nki (before NKI 0.3) returns the result instead of taking dst
            old = [n for n in (legacy or plain) if n != "name"]
            entry["legacy_signature"] = "y = nisa.%s(%s)" % (
                e["name"], _parameter_text(old, required, defaults))
        if engine:
            entry["engine"] = engine
        facts["nisa." + e["name"]] = entry
    return facts


def nl_facts():
    """The modelled nki.language functions of the API table that the front end defines."""
    facts = {}
    for e in table.entries("nki.language"):
        fn = _function(language, e)
        if fn is None or not fn.__module__.startswith(language.__name__):
            continue
        name = e["name"]
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            continue
        params = [p for p in sig.parameters.values()
                  if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        text = ", ".join(p.name if p.default is p.empty else "%s=%r" % (p.name, p.default)
                         for p in params)
        entry = {"signature": "nl.%s(%s)" % (name, text),
                 "summary": _first_line(inspect.getdoc(fn))}
        op = getattr(fn, "nkisim_op", None)
        if op is not None and op in getattr(language, "_SCALAR_FUNCS", ()):
            entry["engine"] = "ScalarE"
        elif op is not None:
            entry["engine"] = "VectorE"
        facts["nl." + name] = entry
    return facts


def api_facts():
    """The API table's coverage and the documented names the simulator does not model."""
    modelled, total = table.coverage()
    missing = ["%s.%s" % (table.SHORT.get(e["module"], e["module"]), e["name"])
               for e in table.entries() if e["documented"] and not e["modelled"]]
    return {"documented": total, "modelled": modelled, "not_modelled": sorted(missing)}


def names():
    """Operator names the simulator accepts, as a prompt lists them."""
    return {
        "activation_functions": ", ".join("nl." + n for n in sorted(ops.UNARY)),
        "reduce_ops": ", ".join("nl." + n for n in sorted(ops.REDUCE)),
    }


def facts():
    return {
        "generated_by": "backends/nkisim/export_facts.py (do not edit; regenerate)",
        "targets": {name: target_facts(C.get_target(name)) for name in ("trn1", "trn2", "trn3")},
        "limits": limits(),
        "names": names(),
        "api": api_facts(),
        "instructions": dict(sorted({**isa_facts(), **nl_facts()}.items())),
    }


def render():
    return json.dumps(facts(), indent=1, sort_keys=False) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true",
                        help="compare with the file instead of writing it")
    args = parser.parse_args(argv)
    text = render()
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
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
