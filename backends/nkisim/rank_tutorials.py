"""Does the simulator rank the versions of every multi-version public NKI tutorial in the
order the tutorials publish (each version faster than the one before)?

    /usr/bin/python3 backends/nkisim/rank_tutorials.py SAMPLES_DIR [SAMPLES_DIR ...]
        [--target trn1] [--small] [--only matmul,mamba,attention,layernorm]

SAMPLES_DIR is a checkout of aws-neuron/nki-samples (any revision: HEAD has the matmul ladder,
fused Mamba and attention_fwd_performance; older revisions also layernorm and the Stable
Diffusion attention tutorial with its allocated reference version). A ladder lists versions
in their published order, slowest first; where a tutorial says a later version is slower
(attention v8 vs v7), the pair is listed that way round. Single-version tutorials
(transpose2d, average_pool2d, tensor_addition, rmsnorm, softmax, rotary) have no order to
check and are not run. Each tutorial
runs timing-only (`numerics=False`, shape placeholders) at the shape its tutorial benchmarks
(`--small`: reduced shapes, for a quick look). Prints one row per version: simulated
latency, speedup over the previous version, and whether the step keeps the published order;
then one summary line per ladder. Kernels that fail to simulate print their error.
"""
import argparse
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import nkisim  # noqa: E402

nkisim.activate()

TUT = os.path.join("src", "nki_samples", "tutorials")


def _scipy_stub():
    """Some tutorials import scipy.special.softmax for their CPU reference only; without
    scipy installed, give them a numpy softmax so the kernels can be imported."""
    try:
        import scipy.special  # noqa: F401
        return
    except ImportError:
        pass
    import types
    import numpy as np

    def softmax(x, axis=None):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    sp, sps = types.ModuleType("scipy"), types.ModuleType("scipy.special")
    sps.softmax = softmax
    sp.special = sps
    sys.modules["scipy"], sys.modules["scipy.special"] = sp, sps


_scipy_stub()


def _mm_inputs(small):
    K, M, N = (2048, 2048, 2048) if small else (8192, 4096, 8192)
    shape = "lhsT[%d,%d] rhs[%d,%d] bf16" % (K, M, K, N)
    return shape, {"lhsT": nkisim.TensorSpec((K, M), "bfloat16"),
                   "rhs": nkisim.TensorSpec((K, N), "bfloat16")}


def _mamba_inputs(seq):
    """The Mamba tutorial measures v1 -> v2 at channels 4096, seq 512 (2.34 -> 1.61 ms) and
    v2 -> v3 at channels 4096 up to seq 8192 (52.2 -> 27.8 ms at 8192)."""
    def make(small):
        b, c, n = 1, (512 if small else 4096), 16
        s = min(seq, 2048) if small else seq
        f = "float32"
        shape = "batch %d seq %d channels %d state %d fp32" % (b, s, c, n)
        return shape, {"delta": nkisim.TensorSpec((b, c, s), f),
                       "u": nkisim.TensorSpec((b, c, s), f),
                       "A": nkisim.TensorSpec((c, n), f), "B": nkisim.TensorSpec((b, n, s), f),
                       "C": nkisim.TensorSpec((b, n, s), f)}
    return make


def _attn_inputs(seqlen):
    def make(small):
        s = seqlen if seqlen <= 128 or not small else 1024
        shape = "q,k,v [128,%d] bf16" % s
        spec = nkisim.TensorSpec((128, s), "bfloat16")
        return shape, {"q": spec, "k": spec, "v": spec}
    return make


def _ln_inputs(small):
    rows, cols = (300, 1000) if small else (4096, 8192)
    shape = "[%d,%d] fp32" % (rows, cols)
    return shape, {"input_tensor": nkisim.TensorSpec((rows, cols), "float32"), "epsilon": 1e-5,
                   "gamma_vector": nkisim.TensorSpec((cols,), "float32"),
                   "beta_vector": nkisim.TensorSpec((cols,), "float32")}


def _sd_inputs(layout):
    def make(small):
        S, D = (1024 if small else 4096), 128
        t = lambda *shape: nkisim.TensorSpec(shape, "bfloat16")  # noqa: E731
        if layout == "tutorial":
            return "q,k,v [%d,%d] bf16" % (S, D), {"q_ref": t(S, D), "k_ref": t(S, D),
                                                   "v_ref": t(S, D)}
        return "q,k [1,%d,%d] v [1,%d,%d] bf16" % (D, S, S, D), {
            "q_ref": t(1, D, S), "k_ref": t(1, D, S), "v_ref": t(1, S, D)}
    return make


# (ladder name, file under tutorials/, [(version label, kernel name)], inputs(small), extra);
# versions listed in published order (slowest first). A version may be
# (label, kernel name, file under src/nki_samples/, inputs(small)) when it lives elsewhere
# or takes other inputs. Versions listed under `extra` are measured but carry no published
# position.
LADDERS = (
    ("matmul", "matrix_multiplication/matrix_multiplication_nki_kernels.py",
     [("tiled", "nki_matmul_tiled_"), ("hoist_load", "nki_matmul_hoist_load_"),
      ("block_free_dimension", "nki_matmul_block_free_dimension_"),
      ("fully_optimized", "nki_matmul_fully_optimized_")], _mm_inputs, ()),
    ("mamba-512", "fused_mamba/mamba_nki_kernels.py",
     [("v1", "mamba_v1"), ("v2", "mamba_v2")], _mamba_inputs(512), ()),
    ("mamba-8192", "fused_mamba/mamba_nki_kernels.py",
     [("v2", "mamba_v2"), ("v3", "mamba_v3")], _mamba_inputs(8192), ()),
    ("attention-128", "attention_fwd_performance/attention_kernels.py",
     [("v1", "attn_fwd_v1"), ("v2", "attn_fwd_v2")], _attn_inputs(128), ()),
    ("attention-4096", "attention_fwd_performance/attention_kernels.py",
     [("v3", "attn_fwd_v3"), ("v4", "attn_fwd_v4"), ("v5", "attn_fwd_v5"),
      ("v6", "attn_fwd_v6"), ("v7", "attn_fwd_v7")], _attn_inputs(4096), ()),
    # the kernel file's notes: v8 (tensor_scalar_reduce, PSUM evicted earlier) "does lead to
    # a slowdown compared to the v7 kernel, which is the fastest attention kernel we have
    # thus far", to set up allocation and software pipelining (v10), which "should
    # outweigh the cost penalty"; v9 (allocation only), v8a (v8 refactored) and v11
    # (pipelining only) carry no stated position
    ("attention-4096-v8", "attention_fwd_performance/attention_kernels.py",
     [("v8", "attn_fwd_v8"), ("v7", "attn_fwd_v7")], _attn_inputs(4096), ()),
    ("attention-4096-v10", "attention_fwd_performance/attention_kernels.py",
     [("v7", "attn_fwd_v7"), ("v10", "attn_fwd_v10")], _attn_inputs(4096),
     (("v8a", "attn_fwd_v8a"), ("v9", "attn_fwd_v9"), ("v11", "attn_fwd_v11"))),
    ("layernorm", "layernorm/layernorm_nki_kernel.py",
     [("v1", "nki_layernorm_kernel_v1"), ("v2", "nki_layernorm_kernel_v2")], _ln_inputs, ()),
    # the unit tests of 0898a77 bound the tutorial kernel at 536 us (P1) and the allocated
    # reference kernel at 380 us (P50) for seqlen 4096, d 128, bf16
    ("sd_attention", "sd_attention/sd_attention_nki_kernels.py",
     [("fused (tutorial)", "fused_self_attn_for_SD_small_head_size", None,
       _sd_inputs("tutorial")),
      ("allocated (reference)", "allocated_fused_self_attn_for_SD_small_head_size",
       "reference/allocated_attention.py", _sd_inputs("reference"))], None, ()),
)


def _load(path, tag):
    spec = importlib.util.spec_from_file_location("tutorial_%s" % tag, path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(os.path.dirname(path))
    return mod


def _run(mod, name, inputs, target):
    fn = getattr(mod, name, None)
    if fn is None:
        return None, "not in this revision"
    try:
        r = nkisim.simulate(fn, inputs, target=target, numerics=False, hotspots=False)
    except Exception as e:  # report any failure and go on with the next kernel
        msg = str(e).splitlines()[0] if str(e) else ""
        return None, "%s: %s" % (type(e).__name__, msg[:90])
    return r, None


def rank(samples, target, small, only):
    """Print the table for one nki-samples checkout; return
    [(ladder, steps in order, steps measured, steps)]."""
    out = []
    for tag, rel, versions, make_inputs, extra in LADDERS:
        if only and not any(tag.startswith(o) for o in only):
            continue
        path = os.path.join(samples, TUT, rel)
        if not os.path.exists(path):
            continue
        shape = make_inputs(small)[0] if make_inputs else versions[0][3](small)[0]
        print("\n%s  (%s, %s, %s)" % (tag, rel, shape, target))
        mods = {}
        prev = None
        ok = []
        for v in versions:
            label, name = v[0], v[1]
            vrel = os.path.join(TUT, rel) if len(v) < 3 or v[2] is None else \
                os.path.join("src", "nki_samples", v[2])
            inputs = (v[3] if len(v) > 3 and v[3] else make_inputs)(small)[1]
            if vrel not in mods:
                vpath = os.path.join(samples, vrel)
                try:
                    mods[vrel] = _load(vpath, "%s_%d" % (tag.replace("-", "_"), len(mods)))
                except Exception as e:
                    mods[vrel] = None
                    print("  cannot import %s: %s: %s" % (vrel, type(e).__name__, e))
            mod = mods[vrel]
            if mod is None:
                prev = None
                continue
            c0 = time.process_time()
            r, err = _run(mod, name, inputs, target)
            cpu = time.process_time() - c0
            if r is None:
                print("  %-22s %s" % (label, err))
                prev = None
                continue
            lat = r.latency_us
            if prev is None:
                print("  %-22s %12.1f us  %8s  %-5s  %-14s cpu %5.1f s"
                      % (label, lat, "", "", r.bottleneck, cpu))
            else:
                good = lat < prev
                ok.append(good)
                print("  %-22s %12.1f us  x%7.2f  %-5s  %-14s cpu %5.1f s"
                      % (label, lat, prev / lat, "ok" if good else "WRONG", r.bottleneck, cpu))
            prev = lat
        mod = mods.get(os.path.join(TUT, rel))
        for label, name in extra:
            if mod is None:
                break
            r, err = _run(mod, name, make_inputs(small)[1], target)
            if r is None:
                print("  %-22s %s (no published position)" % (label, err))
            else:
                print("  %-22s %12.1f us  (no published position)" % (label, r.latency_us))
        steps = len(versions) - 1
        print("  -> %d of %d steps in published order%s"
              % (sum(ok), steps, "" if len(ok) == steps else " (%d not measured)"
                 % (steps - len(ok))))
        out.append((tag, sum(ok), len(ok), steps))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("samples", nargs="+", help="nki-samples checkout(s)")
    ap.add_argument("--target", default="trn1")
    ap.add_argument("--small", action="store_true", help="reduced shapes")
    ap.add_argument("--only", default="", help="comma-separated ladder names")
    args = ap.parse_args()
    only = [o for o in args.only.split(",") if o]
    total = []
    for s in args.samples:
        print("== %s" % s)
        total += rank(s, args.target, args.small, only)
    good = sum(t[1] for t in total)
    measured = sum(t[2] for t in total)
    steps = sum(t[3] for t in total)
    print("\nall ladders: %d of %d measured steps in published order (%d of %d steps could "
          "not be measured: a version failed to simulate)" % (good, measured, steps - measured,
                                                               steps))


if __name__ == "__main__":
    main()
