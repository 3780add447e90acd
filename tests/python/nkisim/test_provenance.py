"""Provenance of simulator outputs: a kernel runs in its own process on placeholders and only
its recorded NKI API calls are replayed here, so nothing the kernel does outside the API
decides outputs or timing. Attacks tried here go past the harness's static scan on purpose
(they talk to the sandbox and the replay directly)."""
import copy
import os
import sys
import tempfile
import textwrap
import unittest

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
HARNESS_DIR = os.path.join(REPO, "backends", "harness")
NKISIM_DIR = os.path.join(REPO, "backends", "nkisim")
if NKISIM_DIR not in sys.path:
    sys.path.insert(0, NKISIM_DIR)

import nkisim  # noqa: E402
from nkisim.sandbox import boundary, replay  # noqa: E402
from nkisim import sandbox  # noqa: E402
if HARNESS_DIR not in sys.path:
    sys.path.insert(0, HARNESS_DIR)
from harnesslib.simchild import loader_spec  # noqa: E402

HEADER = """
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
"""

ADD = HEADER + """
@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a[0:128, :])
    y = nl.load(b[0:128, :])
    nl.store(out[0:128, :], value=nl.add(x, y))
    return out
"""


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((128, 64), dtype=np.float32),
            "b": rng.standard_normal((128, 64), dtype=np.float32)}


def _specs(inputs):
    return {k: {"shape": list(v.shape), "dtype": v.dtype.name} for k, v in inputs.items()}


class Sandbox(unittest.TestCase):
    def setUp(self):
        self._td = tempfile.TemporaryDirectory(prefix="provenance-")
        self.dir = self._td.name

    def tearDown(self):
        self._td.cleanup()

    def record(self, text, inputs=None, grid=None):
        path = os.path.join(self.dir, "k%d.py" % (abs(hash(text)) % 10 ** 8))
        with open(path, "w") as f:
            f.write(textwrap.dedent(text).lstrip("\n"))
        inputs = inputs or _inputs(0)
        ans = sandbox.record_trace({
            "kernel_path": path, "loader": loader_spec(HARNESS_DIR), "target": "trn2",
            "input_names": list(inputs), "kernel_name": None, "problem_kernel": None,
            "inputs": _specs(inputs), "input_dtypes": {}, "grid": grid})
        return path, ans

    def replay(self, path, trace, seed=0):
        return replay.replay(trace, _inputs(seed), target="trn2", kernel_path=path)

    def honest(self):
        path, ans = self.record(ADD)
        self.assertTrue(ans["ok"], ans)
        return path, ans

    # -- honest kernels ---------------------------------------------------------------------
    def test_record_once_replay_every_seed_like_simulate(self):
        path, trace = self.honest()
        nkisim.activate()
        try:
            ns = {}
            with open(path) as f:
                exec(compile(f.read(), path, "exec"), ns)
            for seed in (0, 1, 2):
                res = self.replay(path, trace, seed)
                direct = nkisim.simulate(ns["add_kernel"], _inputs(seed))
                inp = _inputs(seed)
                np.testing.assert_array_equal(res.outputs[0], inp["a"] + inp["b"])
                self.assertEqual(res.latency_us, direct.latency_us)
                self.assertEqual(res.metrics, direct.metrics)
                self.assertEqual([h["line"] for h in res.hotspots],
                                 [h["line"] for h in direct.hotspots])
        finally:
            nkisim.deactivate()

    def test_replay_without_timing_gives_the_same_values(self):
        # a harness times a trace once and replays later seeds for their values only
        path, trace = self.honest()
        for seed in (1, 2):
            timed = self.replay(path, trace, seed)
            inp = _inputs(seed)
            untimed = replay.replay(trace, inp, target="trn2", kernel_path=path, timing=False)
            np.testing.assert_array_equal(untimed.outputs[0], timed.outputs[0])
            np.testing.assert_array_equal(untimed.outputs[0], inp["a"] + inp["b"])
            self.assertGreater(timed.latency_us, 0.0)
            self.assertEqual(untimed.latency_us, 0.0)
            self.assertEqual(untimed.hotspots, [])
            self.assertEqual(untimed.metrics["peak_sbuf_bytes_per_partition"],
                             timed.metrics["peak_sbuf_bytes_per_partition"])
            # once the caller has a timed replay's capacity check, a value replay skips it
            # and the liveness it needs: same values, no peak
            checked = replay.replay(trace, inp, target="trn2", kernel_path=path, timing=False,
                                    checked=True)
            np.testing.assert_array_equal(checked.outputs[0], timed.outputs[0])
            self.assertEqual(checked.metrics["peak_sbuf_bytes_per_partition"], 0)
            self.assertGreater(timed.metrics["peak_sbuf_bytes_per_partition"], 0)

    def test_events_decoded_once_replay_like_events_decoded_as_they_go(self):
        # replays of one trace share its decoded events (plans); a replay that decodes every
        # event as it goes (no plans) gives the same values, latency, metrics and hotspots
        path, trace = self.honest()
        table = boundary.api_table()
        planned = [self.replay(path, trace, seed) for seed in (0, 1)]
        prep = replay._prepared(trace["events"], table, path)
        self.assertIs(replay._prepared(trace["events"], table, path), prep)
        self.assertGreater(sum(p is not None for p in prep.plans), len(trace["events"]) // 2)
        original = replay._plan
        replay._PREPARED.clear()
        replay._plan = lambda *a: None
        try:
            decoded = [self.replay(path, trace, seed) for seed in (0, 1)]
        finally:
            replay._plan = original
            replay._PREPARED.clear()
        for a, b in zip(planned, decoded):
            np.testing.assert_array_equal(a.outputs[0], b.outputs[0])
            self.assertEqual(a.latency_us, b.latency_us)
            self.assertEqual(a.metrics, b.metrics)
            self.assertEqual(a.hotspots, b.hotspots)
            self.assertEqual(a.waits, b.waits)

    def test_a_planned_event_with_an_unknown_reference_is_refused(self):
        def m(t):
            for ev in t["events"]:
                if ev[0] == "c" and ev[2] == {"$s": "nki.language.store"}:
                    ev[4]["value"] = {"$r": 4242}
                    return
            raise AssertionError("no store call")
        e = self.forged(m)
        self.assertIsInstance(e, boundary.NkiForbiddenAccess)
        self.assertIn("unknown object", e.message)

    def test_sequential_range_keeps_its_ordering_in_the_replay(self):
        text = """
        import nki
        import nki.language as nl

        def add_kernel(a, b):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            for i in nl.%s(a.shape[0] // 32):
                t = nl.load(a[i * 32:(i + 1) * 32, :])
                u = nl.add(nl.tanh(nl.multiply(nl.exp(t), 2.0)), 1.0)
                v = nl.add(nl.tanh(nl.multiply(nl.exp(u), u)), 1.0)
                nl.store(out[i * 32:(i + 1) * 32, :], value=v)
            return out
        """
        lat = {}
        for kind in ("affine_range", "sequential_range"):
            path, trace = self.record(text % kind)
            self.assertTrue(trace["ok"], trace)
            ordered = [ev for ev in trace["events"] if ev and ev[0] == "ordered"]
            self.assertEqual(len(ordered), 0 if kind == "affine_range" else 2)
            res = self.replay(path, trace)
            nkisim.activate()
            try:
                ns = {}
                with open(path) as f:
                    exec(compile(f.read(), path, "exec"), ns)
                direct = nkisim.simulate(ns["add_kernel"], _inputs(0))
            finally:
                nkisim.deactivate()
            self.assertEqual(res.latency_us, direct.latency_us, kind)
            lat[kind] = res.latency_us
        self.assertGreaterEqual(lat["sequential_range"], lat["affine_range"])

    def test_kernel_process_without_a_loader_says_so(self):
        # nkisim knows no kernel loader of its own: the caller passes one
        path = os.path.join(self.dir, "k.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(ADD).lstrip("\n"))
        inputs = _inputs(0)
        ans = sandbox.record_trace({
            "kernel_path": path, "target": "trn2", "input_names": list(inputs),
            "kernel_name": None, "problem_kernel": None, "inputs": _specs(inputs),
            "input_dtypes": {}, "grid": None})
        self.assertFalse(ans["ok"])
        self.assertIn("needs a loader", ans["message"])

    def test_trace_is_plain_json_without_data(self):
        _, trace = self.honest()
        text = str(trace)
        self.assertNotIn("$nd", text)  # the kernel used no constant arrays, and saw no data
        self.assertEqual(trace["format"], boundary.TRACE_FORMAT)

    def test_output_parameter_is_written_back(self):
        text = HEADER + """
def copy_kernel(a, b):
    nl.store(b[0:128, :], value=nl.load(a[0:128, :]))
"""
        path, trace = self.record(text)
        self.assertTrue(trace["ok"], trace)
        inp = _inputs(3)
        b = inp["b"]
        replay.replay(trace, inp, kernel_path=path)
        np.testing.assert_array_equal(b, inp["a"])

    def test_errors_keep_kernel_lines(self):
        text = ADD.replace("    y = nl.load(b[0:128, :])", "    y = nl.load(b[0:256, :])")
        _, ans = self.record(text)
        self.assertFalse(ans["ok"])
        self.assertIn(ans["kind"], ("runtime_error", "compile_error"))
        self.assertEqual(ans["line"], 9)

    # -- kernels that reach outside the API -------------------------------------------------
    def assertRefused(self, text, line=None, kind=None):
        """The kernel is refused, or its replayed output is not the answer."""
        path, ans = self.record(text)
        if ans["ok"]:  # recorded: the replay must not give the answer
            self.assertIsNone(kind, "expected a %s refusal" % kind)
            try:
                res = self.replay(path, ans, 1)
            except nkisim.NkiError:
                return
            inp = _inputs(1)
            self.assertFalse(np.allclose(res.outputs[0], inp["a"] + inp["b"], equal_nan=False))
            return
        self.assertIn(ans["kind"], (kind,) if kind else (
            "forbidden_access", "compile_error", "runtime_error"), ans)
        if line is not None:
            self.assertEqual(ans["line"], line, ans)

    def test_numpy_on_a_tensor_names_the_line(self):
        self.assertRefused(ADD.replace("    x = nl.load(a[0:128, :])",
                                       "    x = np.asarray(a) + 0"), line=8,
                           kind="forbidden_access")
        self.assertRefused(ADD.replace("    x = nl.load(a[0:128, :])",
                                       "    x = np.add(a, 1.0)"), line=8, kind="forbidden_access")

    def test_private_and_internal_attributes(self):
        # Each writes the answer into the output outside instructions, then returns it.
        for expr in ("out._data", "out.st.data", "out.st", "out.read()",
                     "nl.runtime.CUR", "nl.core", "nl.np"):
            text = HEADER + """
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    d = %s
    d[...] = 1.0
    return out
""" % expr
            self.assertRefused(text, line=7)
        self.assertRefused(HEADER + """
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    out.write(np.ones((128, 64), np.float32))
    return out
""", line=7, kind="forbidden_access")

    def test_slots_getattr_and_setattr(self):
        text = HEADER + """
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for cls in type(out).__mro__:
        for s in getattr(cls, "__slots__", ()):
            v = getattr(out, s, None)
            if hasattr(v, "data"):
                v.data[...] = 1.0
    object.__setattr__(out, "_nkisim_id", 1)
    return out
"""
        self.assertRefused(text)
        self.assertRefused(ADD.replace("    x = nl.load(a[0:128, :])",
                                       "    out.shape = (1,)\n    x = nl.load(a[0:128, :])"),
                           kind="forbidden_access", line=8)

    def test_gc_walk_finds_no_data(self):
        # Every storage and array reachable in the kernel's process: it writes the sum of the
        # inputs it can find into every float array it can find, and skips the instructions.
        text = HEADER + """
import gc

def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for o in gc.get_objects():
        if type(o).__name__ == "Storage" and o.kind == "hbm":
            o.data = np.ones((128, 64), np.float32)
        if type(o).__name__ == "ndarray" and o.dtype == np.float32 and o.size == 8192:
            o[...] = 1.0
    return out
"""
        self.assertRefused(text)

    def test_inspect_frames_and_sys_modules(self):
        text = HEADER + """
import inspect, sys

def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    f = inspect.currentframe()
    while f is not None:
        for v in list(f.f_locals.values()):
            if type(v).__name__ == "Recorder":
                for o in v.objs.values():
                    if type(o).__name__ == "Tensor":
                        o.st.data = np.ones(o.st.shape, np.float32)
        f = f.f_back
    rt = sys.modules["nkisim.machine.runtime"]
    rt.CUR.sched.makespan = 0.0
    return out
"""
        self.assertRefused(text)

    def test_numpy_view_of_an_input(self):
        text = ADD.replace("    x = nl.load(a[0:128, :])",
                           "    v = memoryview(a)\n    x = nl.load(a[0:128, :])")
        self.assertRefused(text)

    def test_zeroed_scheduler_has_no_effect(self):
        # The kernel patches the simulator in its own process: latency 0, instant DMA.
        text = ADD.replace("import numpy as np", """import numpy as np
import sys
_t = sys.modules["nkisim.machine.timing"]
_t.Scheduler.makespan = property(lambda self: 0.0, lambda self, v: None)
sys.modules["nkisim.machine.simulator"]._result.__code__ = (lambda *a, **k: None).__code__""")
        path, ans = self.record(text)
        self.assertTrue(ans["ok"], ans)
        _, honest = self.honest()
        res = self.replay(path, ans, 2)
        ref = self.replay(path, honest, 2)
        self.assertGreater(res.latency_us, 0.0)
        self.assertEqual(res.latency_us, ref.latency_us)

    def test_constant_answer_fails_other_seeds(self):
        # The kernel regenerates seed 0's inputs itself and stores the answer as a constant.
        text = HEADER + """
def add_kernel(a, b):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 64), dtype=np.float32)
    y = rng.standard_normal((128, 64), dtype=np.float32)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a[0:128, :])
    nl.store(out[0:128, :], value=nl.add(nl.multiply(t, 0.0), x + y))
    return out
"""
        path, ans = self.record(text)
        if ans["ok"]:
            res = self.replay(path, ans, 1)
            inp = _inputs(1)
            self.assertFalse(np.allclose(res.outputs[0], inp["a"] + inp["b"]))

    def test_python_callables_cannot_cross(self):
        self.assertRefused(ADD.replace("nl.add(x, y)", "nl.add(x, lambda: 0)"))

    # -- forged traces ------------------------------------------------------------------------
    def forged(self, mutate):
        path, trace = self.honest()
        t = copy.deepcopy(trace)
        mutate(t)
        with self.assertRaises(nkisim.NkiError) as err:
            self.replay(path, t)
        return err.exception

    def _out_id(self, t):
        for ev in t["events"]:
            if ev[0] == "c" and ev[2] == {"$s": "nki.language.ndarray"}:
                return ev[5]["$n"]
        raise AssertionError("no ndarray call")

    def test_forged_internal_attribute(self):
        def m(t):
            oid = self._out_id(t)
            t["events"].append(["g", 9, {"$r": oid}, "st", {"$n": 10 ** 6}])
        e = self.forged(m)
        self.assertIsInstance(e, boundary.NkiForbiddenAccess)
        self.assertIn("not part of the NKI API", e.message)

    def test_forged_write_method(self):
        def m(t):
            oid = self._out_id(t)
            arr = boundary.encode(np.zeros((128, 64), np.float32), None)
            t["events"] += [["g", 9, {"$r": oid}, "write", {"$n": 10 ** 6}],
                            ["c", 9, {"$r": 10 ** 6}, [arr], {}, None]]
        self.forged(m)

    def test_forged_names_ids_and_operators(self):
        self.forged(lambda t: t["events"].append(
            ["c", 9, {"$s": "nki.language.np"}, [], {}, None]))
        self.forged(lambda t: t["events"].append(
            ["c", 9, {"$s": "nki.language.dma"}, [], {}, None]))
        self.forged(lambda t: t["events"].append(["o", 9, "getitem", [{"$r": 4242}, 0], None]))
        self.forged(lambda t: t["events"].append(["o", 9, "setattr", [1, 2, 3], None]))
        self.forged(lambda t: t["events"].append(["o", 9, "__class__", [], None]))
        self.forged(lambda t: t["events"].append(["x", 9]))
        self.forged(lambda t: t.update(ret={"$r": 777}))
        self.forged(lambda t: t.update(format="other"))

    def test_forged_results_are_checked(self):
        def m(t):
            for ev in t["events"]:
                if ev[0] == "g" and ev[3] == "shape":
                    ev[4] = {"$t": [1, 1]}
                    return
            raise AssertionError("no shape read")
        e = self.forged(m)
        self.assertIsInstance(e, boundary.NkiForbiddenAccess)
        self.assertIn("the trace says", e.message)

    def test_forged_grid_and_programs(self):
        self.forged(lambda t: t["events"].insert(0, ["pid", [0]]))
        self.forged(lambda t: t.update(events=[e for e in t["events"] if e[0] != "pid"]))

    def test_pickle_never_loads(self):
        import base64
        import io
        buf = io.BytesIO()
        np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
        text = base64.b64encode(buf.getvalue()).decode()
        with self.assertRaises(boundary.Divergence):
            boundary.decode({"$nd": text}, lambda e: None)
        obj = np.array([object()], dtype=object)
        self.assertFalse(boundary.is_value(obj))

    # -- a process that misbehaves ------------------------------------------------------------
    def test_dead_or_silent_child_is_a_failure(self):
        for body in ("    import os\n    os._exit(0)\n",
                     "    import os\n    os.write(int(os.environ.get('NKISIM_ANSWER_FD', 9)),"
                     " b'garbage\\n')\n    os._exit(3)\n",
                     "    raise SystemExit(0)\n"):
            load = "    x = nl.load(a[0:128, :])\n"
            text = ADD.replace(load, body + load)
            _, ans = self.record(text)
            self.assertFalse(ans["ok"], ans)

    def test_hung_child_times_out(self):
        path = os.path.join(self.dir, "hang.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(ADD.replace("    x = nl.load(a[0:128, :])",
                                                "    while True:\n        pass")))
        inputs = _inputs(0)
        kp = sandbox.KernelProcess({
            "kernel_path": path, "loader": loader_spec(HARNESS_DIR), "target": "trn2",
            "input_names": list(inputs), "kernel_name": None, "problem_kernel": None},
            timeout=120)
        # Loading (imports) may be slow on a busy machine; the hang is in tracing, timed at 3 s.
        self.assertTrue(kp.loaded()["ok"])
        kp.timeout = 3
        ans = kp.record({"inputs": _specs(inputs), "input_dtypes": {}, "grid": None})
        self.assertEqual(ans["kind"], "timeout")
        self.assertIsNotNone(kp.proc.returncode)


if __name__ == "__main__":
    unittest.main()
