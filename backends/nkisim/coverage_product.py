"""Public-kernel coverage through the product: every nki-samples kernel the simulator runs,
verified with `autocomp-mcp call verify_kernel` as a user would.

    /usr/bin/python3 backends/nkisim/coverage_product.py CHECKOUT [CHECKOUT ...]
        [--bin build/autocomp-mcp] [--harness-dir backends] [--only TEXT] [--timeout S]

For each kernel `coverage_samples.py` finds and binds (its `BINDINGS`), in a fresh folder:
1. the kernel runs straight through the simulator (`nkisim.simulate`, in this process) on the
   binding's inputs; a kernel that fails here is not supported by the simulator (listed apart,
   with its error: a gap of the simulator, not of the judge);
2. the kernel's folder is copied (helper modules next to it stay importable; with
   `from ..util import f`, the package folder above it, with its layout) and a problem
   file written: `inputs` gives the same arrays and Python scalars, `reference` the outputs of
   step 1, `KERNEL`, `GRID`, `TARGET`, `INPUT_DTYPES`, `OUTPUTS` (output parameters) and
   `OUTPUT_DTYPES` as the binding needs. Arguments a problem cannot carry (tuples, dtypes,
   None, argument objects) are bound by a generated entry function appended to the copy,
   `coverage_entry`, which calls the sample kernel with them; the sample's own code is not
   changed. Top-level driver code that calls a kernel at import (outside `if __name__ ==
   "__main__":`) is dropped from the copy, as `coverage_samples` does;
3. `autocomp-mcp call verify_kernel` judges the copy (one seed, fresh).
Rank-group kernels (simulated with `simulate_ranks`) have no single-process problem form
and are listed as such. The product sends the kernel's local modules with it and gives host
libraries this machine lacks (torch, scipy) inert stand-ins when the kernel never uses them;
a sample that still fails with `No module named ...` is listed as `one-file` (its own
modules, or a package-relative import) or `host-lib` (the kernel uses the library).
With `--stub-host-libraries`, imports of missing host libraries become inert stand-ins
defined in the copy (as the direct run stubs them), and the row says so.
With `--inline-helpers`, such modules (`from common import div_ceil`) are pasted into the copy
in place of the import, and the row says so.
Failures from the simulator's cost model (below the physical floor, out of on-chip memory)
are listed as `sim-cost`.

Prints one line per kernel (`kernel  verdict  reason`) and the totals: kernels found, run by
the simulator, verified through the product among those, and the share.
Exit status 0 (the table is the result).
"""
import argparse
import ast
import json
import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import coverage_samples as cs  # noqa: E402
import nkisim  # noqa: E402

# Arguments no problem file can carry, as source text for the entry function (evaluated in
# the sample module's namespace): "path::kernel" suffix -> {parameter: expression}.
EXPRESSIONS = {
    "reference/rmsnorm_quant/rmsnorm_quant.py::rmsnorm_quant_kernel":
        {"kargs": "RmsNormQuantKernelArgs(lower_bound=0.0)"},
}
# Failures that come from the simulator's cost model, not from the judge (listed apart).
SIMULATOR_COST = ("below the physical floor", "out of memory", "exceeds the capacity")
_NARROW = ("bfloat16", "float8_e4m3", "float8_e5m2")


def _expressions(path, name):
    key = path.replace(os.sep, "/") + "::" + name
    for k, v in EXPRESSIONS.items():
        if key.endswith("/" + k):
            return v
    return {}


def _source_of(v):
    """Python source for a plain argument value, or None."""
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "nl":
        return "coverage_nl.%s" % v[1]
    if v is None or type(v) in (str, tuple, list, int, float, bool):
        try:
            if ast.literal_eval(repr(v)) == v:
                return repr(v)
        except (ValueError, SyntaxError):
            return None
    return None


def _nan_out(o):
    """An output parameter as the harness allocates it: NaN-filled (integers at their max)."""
    dt = np.float32 if o.dtype in _NARROW else np.dtype(o.dtype)
    if np.dtype(dt).kind == "f":
        return np.full(o.shape, np.nan, dtype=dt)
    return np.full(o.shape, np.iinfo(dt).max, dtype=dt)


def inline_helpers(tree, src_dir, depth=0, seen=None):
    """Replace `from <module beside the file> import ...` (also package-relative: `from
    .consts import X`, `from ..util.types import Y`) with that module's top-level statements,
    recursively, so the file stands alone. True when something was inlined."""
    seen = set() if seen is None else seen
    done = False
    body = []
    for n in tree.body:
        path = None
        if isinstance(n, ast.ImportFrom) and n.module:
            base = src_dir
            for _ in range(max(0, n.level - 1)):
                base = os.path.dirname(base)
            path = os.path.join(base, *n.module.split(".")) + ".py"
        if path and os.path.isfile(path) and depth < 4:
            done = True
            if path in seen:
                continue
            seen.add(path)
            with open(path) as f:
                helper = ast.parse(f.read(), path)
            inline_helpers(helper, os.path.dirname(path), depth + 1, seen)
            body += [h for h in helper.body
                     if not (isinstance(h, ast.If) and cs_main_guard(h))]
        else:
            body.append(n)
    tree.body = body
    return done


_HOST_STUB = """
class CoverageHostStub:
    \"\"\"Inert stand-in for a host library this machine lacks (coverage_product.py).\"\"\"

    def __init__(self, name):
        self.name = name

    def __getattr__(self, attr):
        return CoverageHostStub(self.name + "." + attr)

    def __call__(self, *args, **kwargs):
        return CoverageHostStub(self.name + "()")

    def __getitem__(self, key):
        return self
"""


def stub_host_imports(tree):
    """Replace top-level imports of host libraries (coverage_samples.HOST_LIBRARIES) this
    Python cannot import by inert stand-ins defined in the file. Their names."""
    import importlib.machinery

    def missing(module):
        top = module.split(".")[0]
        if top not in cs.HOST_LIBRARIES:
            return False
        # the file system only: this process stubs the host libraries itself
        return importlib.machinery.PathFinder.find_spec(top) is None

    stubbed = set()
    body = []
    for n in tree.body:
        binds = []
        if isinstance(n, ast.Import) and any(missing(a.name) for a in n.names):
            binds = [(a.asname or a.name.split(".")[0], a.name if a.asname else
                      a.name.split(".")[0]) for a in n.names]
        elif isinstance(n, ast.ImportFrom) and not n.level and n.module and missing(n.module):
            binds = [(a.asname or a.name, "%s.%s" % (n.module, a.name)) for a in n.names]
        if not binds:
            body.append(n)
            continue
        for bound, full in binds:
            stubbed.add(full.split(".")[0])
            body.append(ast.parse("%s = CoverageHostStub(%r)" % (bound, full)).body[0])
    if stubbed:
        first = 0
        while first < len(body) and (
                isinstance(body[first], ast.ImportFrom) and body[first].module == "__future__"
                or isinstance(body[first], ast.Expr)
                and isinstance(body[first].value, ast.Constant)):
            first += 1
        body[first:first] = ast.parse(_HOST_STUB).body
    tree.body = body
    return sorted(stubbed)


def prepare(path, name, binding, folder, inline=False, stub_hosts=False):
    """Run the kernel on the simulator and write the problem (and entry) into folder.
    (problem path, kernel path, what was changed in the copy or "") or raises with the
    simulator's error."""
    mod = cs._import(path)
    kernel = getattr(mod, name)
    rng = np.random.default_rng(0)
    dtypes = {}
    arrays, scalars, outs, exprs = {}, {}, {}, dict(_expressions(path, name))
    for k, v in binding.items():
        if k in (cs.GRID, cs.RANKS, cs.TARGET):
            continue
        if isinstance(v, cs.Out):
            outs[k] = v
            continue
        if k in exprs:
            continue
        val = cs._resolve(v, rng, dtypes, k, mod)
        if isinstance(val, np.ndarray):
            arrays[k] = val
        elif type(val) in (int, float, bool):
            scalars[k] = val
        else:
            src = _source_of(v)
            if src is None:
                raise ValueError("argument %r (%s) has no problem or source form"
                                 % (k, type(val).__name__))
            exprs[k] = src
    out_arrays = {k: _nan_out(o) for k, o in outs.items()}
    call = dict(arrays, **scalars)
    call.update(out_arrays)
    for k, src in exprs.items():
        call[k] = eval(src, dict(vars(mod), coverage_nl=sys.modules["nki.language"]))
    target = binding.get(cs.TARGET, "trn2")
    res = nkisim.simulate(kernel, call, target=target, grid=binding.get(cs.GRID),
                          input_dtypes=dtypes, hotspots=False)
    if outs:
        refs = [out_arrays[k] for k in outs]
        ref_dtypes = [o.dtype for o in outs.values()]
    else:
        refs = list(res.outputs)
        ref_dtypes = list(res.output_dtypes)

    src_dir = os.path.dirname(os.path.abspath(path))
    # The package the kernel's relative imports reach (`from ..util import f`: the parent) is
    # copied with its layout, so the copy imports as the checkout does.
    root = src_dir
    for _ in range(_relative_depth(path) - 1):
        root = os.path.dirname(root)
    for dirpath, dirnames, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel.count(os.sep) >= 2:
            dirnames[:] = []
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "__"))]
        if dirpath != src_dir and root == src_dir:
            continue  # beside the kernel only, unless a package above it is imported
        dest = os.path.normpath(os.path.join(folder, rel))
        os.makedirs(dest, exist_ok=True)
        for f in files:
            if f.endswith(".py"):
                shutil.copy(os.path.join(dirpath, f), dest)
    kfile = os.path.join(folder, os.path.relpath(os.path.abspath(path), root))
    with open(path) as f:
        text = f.read()
    tree = ast.parse(text, path)
    inlined = inline and inline_helpers(tree, src_dir)
    stubbed = stub_hosts and stub_host_imports(tree)
    if _has_driver(tree.body):
        tree.body = cs._definitions(tree.body)
    if inlined or stubbed or _has_driver(ast.parse(text, path).body):
        text = ast.unparse(tree) + "\n"
    kname = name
    if exprs:
        params = list(arrays) + list(scalars) + list(outs)
        text += _entry(name, params, exprs, "neuronxcc" in text)
        kname = "coverage_entry"
    with open(kfile, "w") as f:
        f.write(text)
    np.savez(os.path.join(folder, "coverage_inputs.npz"), **arrays)
    np.savez(os.path.join(folder, "coverage_ref.npz"),
             **{"o%d" % i: np.asarray(r) for i, r in enumerate(refs)})
    lines = [
        '"""Generated by coverage_product.py for %s::%s."""' % (os.path.basename(path), name),
        "import os", "import numpy as np", "",
        "_HERE = %r  # the harness evaluates a copy of this file elsewhere" % folder,
        "SEEDS = (0,)", "KERNEL = %r" % kname, "TARGET = %r" % target,
        "SCALARS = %r" % (scalars,),
        "INPUT_DTYPES = %r" % (dtypes,),
        "OUTPUT_DTYPES = %r" % (tuple(str(d) for d in ref_dtypes),),
    ]
    if binding.get(cs.GRID) is not None:
        lines.append("GRID = %r" % (tuple(binding[cs.GRID]),))
    if outs:
        lines.append("OUTPUTS = %r" % ({k: (tuple(o.shape), o.dtype) for k, o in outs.items()},))
    lines += [
        "", "",
        "def inputs(seed):",
        "    with np.load(os.path.join(_HERE, 'coverage_inputs.npz')) as z:",
        "        d = {k: z[k] for k in z.files}",
        "    d.update(SCALARS)",
        "    return d", "", "",
        "def reference(**kw):",
        "    with np.load(os.path.join(_HERE, 'coverage_ref.npz')) as z:",
        "        return tuple(z['o%d' % i] for i in range(len(z.files)))", "",
    ]
    pfile = os.path.join(folder, "coverage_problem.py")
    with open(pfile, "w") as f:
        f.write("\n".join(lines))
    return pfile, kfile, ("helpers inlined" if inlined else "") + (
        "%shost libraries stubbed (%s)" % ("; " if inlined else "", ", ".join(stubbed))
        if stubbed else "")


def _relative_depth(path):
    """The deepest package-relative import of a file (`from ..util import f`: 2), at least 1."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    return max([n.level for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + [1])


def _has_driver(body):
    kernels = {n.name for n in body if isinstance(n, ast.FunctionDef)}
    return any(not isinstance(s, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom))
               and not (isinstance(s, ast.If) and cs_main_guard(s))
               and cs._calls_a_kernel(s, kernels) for s in body)


def cs_main_guard(node):
    t = node.test
    return (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name)
            and t.left.id == "__name__")


def _entry(name, params, exprs, legacy):
    args = ", ".join(params)
    kw = ", ".join(["%s=%s" % (p, p) for p in params] + ["%s=%s" % kv for kv in exprs.items()])
    return ("\n\n# ---- generated by coverage_product.py: arguments no problem file carries\n"
            "import {ns} as coverage_nki\n"
            "import {ns}.language as coverage_nl\n\n\n"
            "@coverage_nki.jit\n"
            "def coverage_entry(%s):\n"
            "    return %s(%s)\n").format(ns="neuronxcc.nki" if legacy else "nki") % (
                args, name, kw)


def _one_file(reason):
    """'host-lib' / 'one-file' when a failure comes from the product evaluating the kernel
    file alone, else None."""
    m = re.search(r"No module named '([\w.]+)'", reason) or re.search(
        r"imports '([\w.]+)', which is not installed", reason)
    if m:
        return "host-lib" if m.group(1).split(".")[0] in cs.HOST_LIBRARIES else "one-file"
    if "relative import of" in reason:
        return "one-file"
    return None


def verify(binary, harness_dir, kernel, problem, db, timeout):
    """(verdict, reason) of `autocomp-mcp call verify_kernel`."""
    cmd = [binary, "call", "verify_kernel", "--db", db, "--args",
           json.dumps({"kernel": kernel, "problem": problem, "fresh": True})]
    if harness_dir:
        cmd[3:3] = ["--harness-dir", harness_dir]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", "no answer in %ds" % timeout
    try:
        out = json.loads(p.stdout)
    except ValueError:
        return "error", (p.stdout + p.stderr).strip().splitlines()[-1:] or ["no output"]
    if out.get("correct") is True:
        return "ok", ""
    text = out.get("summary") or out.get("message") or ""
    for c in out.get("content", []):
        text = text or c.get("text", "")
    fail = out.get("failure") or {}
    return "FAIL", " ".join(str(fail.get("message") or text or out).split())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="nki-samples checkout(s)")
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "..", "build", "autocomp-mcp"))
    ap.add_argument("--harness-dir", default=None,
                    help="folder holding harness/ and nkisim/ (default: the binary's own)")
    ap.add_argument("--only", default="", help="kernels whose path::name contains this")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--keep", action="store_true", help="keep the generated folders")
    ap.add_argument("--inline-helpers", action="store_true",
                    help="paste the modules a sample imports from beside it into the copy "
                         "(`from common import f`), so it stands alone (marked in the table)")
    ap.add_argument("--stub-host-libraries", action="store_true",
                    help="replace imports of host libraries this machine lacks (torch, scipy "
                         "...: the direct run stubs them too) by inert stand-ins in the copy "
                         "(marked in the table)")
    args = ap.parse_args(argv)
    nkisim.activate()
    sys.meta_path.append(cs._HostStubFinder())
    seen = {}
    for root in args.paths:
        for path, name in cs.find_kernels(root):
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            seen.setdefault(rel + "::" + name, path)
    work = tempfile.mkdtemp(prefix="coverage-product-")
    db = os.path.join(work, "coverage.db")
    rows = []
    for i, key in enumerate(sorted(seen)):
        if args.only and args.only not in key:
            continue
        path, name = seen[key], key.split("::")[1]
        have, binding = cs.binding_for(path, name)
        t0 = time.time()
        if not have or binding is None:
            rows.append((key, "unbound", "no argument binding", 0.0))
        elif cs.RANKS in binding:
            rows.append((key, "ranks", "a rank group (simulate_ranks): no problem form", 0.0))
        else:
            folder = os.path.join(work, "k%03d" % i)
            os.makedirs(folder)
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # the samples' own prints
                    problem, kernel, changed = prepare(path, name, binding, folder,
                                                       args.inline_helpers,
                                                       args.stub_host_libraries)
            except Exception as e:  # the simulator (or the sample's own code) failed
                rows.append((key, "sim-FAIL", "%s: %s" % (type(e).__name__, e), 0.0))
            else:
                verdict, reason = verify(args.bin, args.harness_dir, kernel, problem, db,
                                         args.timeout)
                if verdict == "FAIL" and any(m in reason for m in SIMULATOR_COST):
                    verdict = "sim-cost"
                elif verdict == "FAIL":
                    verdict = _one_file(reason) or verdict
                if changed:
                    reason = (changed + "; " + reason).rstrip("; ")
                rows.append((key, verdict, reason, time.time() - t0))
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
        k, v, r, dt = rows[-1]
        print("%-9s %6.1fs  %s%s" % (v, dt, k, ("  -- " + " ".join(str(r).split())[:200])
                                     if r else ""), flush=True)
    found = len(rows)
    sim_ok = [r for r in rows if r[1] in ("ok", "FAIL", "timeout", "error", "sim-cost",
                                          "one-file", "host-lib")]
    product_ok = [r for r in rows if r[1] == "ok"]
    print("kernels found: %d; run by the simulator: %d; verified through the product: %d "
          "(%.1f%% of those the simulator runs); refused for a simulator cost reason: %d; "
          "need modules beside the kernel file (the product evaluates one file): %d; "
          "need a host library this machine lacks: %d; "
          "simulator failures: %d; unbound: %d; rank groups: %d" % (
              found, len(sim_ok), len(product_ok),
              100.0 * len(product_ok) / max(1, len(sim_ok)),
              sum(r[1] == "sim-cost" for r in rows), sum(r[1] == "one-file" for r in rows),
              sum(r[1] == "host-lib" for r in rows),
              sum(r[1] == "sim-FAIL" for r in rows), sum(r[1] == "unbound" for r in rows),
              sum(r[1] == "ranks" for r in rows)))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("generated folders kept in", work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
