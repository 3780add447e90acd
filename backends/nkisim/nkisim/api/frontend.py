"""Kernel decorators (`nki.jit`, `nki.baremetal`, `nki.benchmark`, `nki.profile`, `nki.trace`)
and host-side helpers (`simulate_kernel`, `nki.simulate`, `nki.typing`).

A decorated kernel is a `Kernel`: calling it outside a simulation simulates it with the
given numpy arrays and returns its outputs (one array, or a tuple); inside a simulation it
is a plain call of the function. `kernel[grid](...)` launches an SPMD grid.
"""
import functools

from ..machine import runtime


class _Latency:
    def __init__(self, us):
        self.us = us

    def get_latency_percentile(self, p):
        return self.us


class _BenchmarkResult:
    def __init__(self, us):
        self.nc_latency = _Latency(us)


class GridProbe(BaseException):
    """Raised by a kernel launched while a trace asks for its launch grid (sim.grid_probe): a
    problem's call_kernel that writes `kernel[2](...)` chooses the grid in its own code, which
    the trace learns only by running it. A BaseException, so that the hook's own
    `except Exception` cannot swallow it."""

    def __init__(self, grid):
        super().__init__(grid)
        self.grid = grid


class Kernel:
    """Wrapper made by the decorators; `func` is the undecorated kernel."""

    def __init__(self, func, kind="jit", options=None, grid=None):
        while isinstance(func, Kernel):
            func = func.func
        self.func = func
        self.nkisim_func = func
        self.kind = kind
        self.options = dict(options or {})
        self.grid = grid
        self.benchmark_result = None
        self.last_result = None
        functools.update_wrapper(self, func, updated=())

    def __getitem__(self, grid):
        return Kernel(self.func, self.kind, self.options, grid=grid)

    def __call__(self, *args, **kwargs):
        if runtime.CUR is not None:
            if getattr(runtime.CUR, "grid_probe", False):
                raise GridProbe(self.grid)
            return self.func(*args, **kwargs)
        from ..machine.simulator import simulate_call
        res = simulate_call(self.func, args, kwargs, grid=self.grid)
        self.last_result = res
        if self.kind == "benchmark":
            self.benchmark_result = _BenchmarkResult(res.latency_us)
        if self.kind == "profile" and self.options.get("working_directory"):
            _write_profile(self.options["working_directory"], res)
        outs = res.outputs
        if len(outs) == 1 and not res.returned_tuple:
            return outs[0]
        return outs if outs else None


def _write_profile(workdir, res):
    """Write a neuron-profile style summary (json_reports/profile_summary.json)."""
    import json
    import os
    d = os.path.join(workdir, "json_reports")
    os.makedirs(d, exist_ok=True)
    summary = dict(res.metrics)
    summary["roofline"] = res.roofline
    summary["bottleneck"] = res.bottleneck
    summary["hotspots"] = res.hotspots
    with open(os.path.join(d, "profile_summary.json"), "w") as f:
        json.dump({"nkisim": summary}, f, indent=1, sort_keys=True)


def _decorator(kind):
    def deco(func=None, *args, **kwargs):
        if func is None or not callable(func):
            return lambda f: Kernel(f, kind, kwargs)
        return Kernel(func, kind, kwargs)
    deco.__name__ = kind
    deco.__doc__ = "Decorator: the kernel runs on the nkisim CPU simulator."
    return deco


jit = _decorator("jit")
baremetal = _decorator("baremetal")
benchmark = _decorator("benchmark")
profile = _decorator("profile")
trace = _decorator("trace")


def simulate_kernel(kernel, *args, **kwargs):
    """Run a kernel on the simulator with numpy arguments; returns its outputs."""
    k = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    return k(*args, **kwargs)


def simulate(kernel=None, **kw):
    """`nki.simulate(kernel)(*args)`: the new-namespace simulator entry point."""
    if kernel is None:
        return lambda k: simulate(k)
    return Kernel(kernel) if not isinstance(kernel, Kernel) else kernel


# ---- nki.typing -----------------------------------------------------------------------------
class _TensorTypeMaker:
    """`nt.tensor[shape, dtype]`: a shape/dtype placeholder (type annotation)."""

    def __getitem__(self, item):
        return ("nkisim_tensor_type", item)

    def __call__(self, *a, **k):
        return ("nkisim_tensor_type", a)


tensor = _TensorTypeMaker()
mutable_tensor = _TensorTypeMaker()
scalar = _TensorTypeMaker()
mutable = ("nkisim_tensor_qualifier", "mutable")  # `nt.tensor[nt.mutable]`: writable input


# ---- nki.compiler (old allocation-control API) ----------------------------------------------
def _identity_decorator(func=None, *a, **k):
    if func is None or not callable(func):
        return lambda f: f
    return func


class _AllocBuffer:
    """`ncc.sbuf` / `ncc.psum`. `mod_alloc(num_free_tiles=...)` (PSUM: `num_bank_tiles=`)
    makes block dimensions modular (modalloc.py); addresses are not modelled."""

    def __init__(self, kind, tiles=None):
        self.nkisim_kind = kind
        self.nkisim_tiles = tiles

    def alloc(self, *a, **k):
        return self

    def mod_alloc(self, *a, num_free_tiles=None, num_bank_tiles=None, **k):
        tiles = num_bank_tiles if self.nkisim_kind == "psum" and num_bank_tiles else \
            num_free_tiles
        if not tiles:
            return self
        return _AllocBuffer(self.nkisim_kind, tuple(int(t) for t in tiles))

    def auto_alloc(self, *a, **k):
        return self
