"""SimDevice runs kernels in their own process and replays their trace: the hostile fixtures
(run here without the static scan in front) are never accepted as correct, a kernel that
patches its process's json, stdout or simulator changes nothing, and input shapes are
traced separately."""
import glob
import json
import os
import unittest

import numpy as np

from tests.python.harness import util
from tests.python.harness.test_harness_sim import ADD_KERNEL, ADD_PROBLEM
from tests.python.harness.util import write

HOSTILE = sorted(glob.glob(os.path.join(util.FIXTURES, "hostile", "*.py")))


def _inputs(seed, n=64):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((128, n), dtype=np.float32),
            "b": rng.standard_normal((128, n), dtype=np.float32)}


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class SimSandbox(unittest.TestCase):
    def setUp(self):
        from harnesslib.simdev import SimDevice
        self.dev = SimDevice("trn2")
        self._td = util.TempDir()
        self.dir = self._td.__enter__()

    def tearDown(self):
        self._td.__exit__(None, None, None)

    def run_dev(self, path, seed=1, n=64):
        h = self.dev.load_kernel(path, ["a", "b"])
        inp = _inputs(seed, n)
        res = self.dev.run(h, inp)
        outs, _ = self.dev.outputs(res)
        return res, np.allclose(outs[0], inp["a"] + inp["b"])

    def test_hostile_fixtures_never_pass(self):
        from harnesslib.failures import HarnessFailure
        self.assertGreater(len(HOSTILE), 5)
        for path in HOSTILE:
            with self.subTest(os.path.basename(path)):
                try:
                    _, correct = self.run_dev(path)
                except HarnessFailure as f:
                    self.assertIn(f.kind, ("forbidden_access", "compile_error",
                                           "runtime_error"), f.message)
                    continue
                self.assertFalse(correct)

    def test_patching_json_stdout_and_scheduler_changes_nothing(self):
        honest = write(self.dir, "honest.py", ADD_KERNEL)
        patches = """
import json, sys
json.dumps = lambda *a, **k: '{"status":"ok","latency_us":0.0}'
sys.stdout.write('{"schema":"autocomp-' + 'harness/1","status":"ok","forged":1}\\n')
sys.modules["nkisim.machine.timing"].Scheduler.makespan = property(lambda s: 0.0, lambda s, v: None)
import neuronxcc.nki as nki"""
        hostile = write(self.dir, "hostile.py",
                        ADD_KERNEL.replace("import neuronxcc.nki as nki", patches))
        ref, ok_ref = self.run_dev(honest)
        res, ok = self.run_dev(hostile)
        self.assertTrue(ok_ref and ok)
        self.assertGreater(res.latency_us, 0.0)
        self.assertEqual(res.latency_us, ref.latency_us)
        self.assertEqual(json.dumps({"x": 1}), '{"x": 1}')

    def test_same_latency_as_in_process_simulation(self):
        import nkisim
        path = write(self.dir, "k.py", ADD_KERNEL)
        res, ok = self.run_dev(path)
        self.assertTrue(ok)
        nkisim.activate()
        try:
            ns = {}
            with open(path) as f:
                exec(compile(f.read(), path, "exec"), ns)
            direct = nkisim.simulate(ns["add_kernel"], _inputs(1))
        finally:
            nkisim.deactivate()
        self.assertEqual(res.latency_us, direct.latency_us)
        self.assertEqual(res.metrics, direct.metrics)
        self.assertEqual(res.hotspots, direct.hotspots)

    def test_each_input_shape_gets_its_own_trace(self):
        text = ADD_KERNEL.replace("[0:128, :]", "")
        path = write(self.dir, "k.py", text)
        h = self.dev.load_kernel(path, ["a", "b"])
        for n in (64, 32, 64):
            inp = _inputs(2, n)
            outs, _ = self.dev.outputs(self.dev.run(h, inp))
            np.testing.assert_allclose(outs[0], inp["a"] + inp["b"])
        self.assertEqual(len(h.ref.traces), 2)

    def test_value_replays_skip_the_capacity_check_only_after_a_timed_replay_passed_it(self):
        from harnesslib.failures import HarnessFailure
        # nine PSUM tiles live at once: each fits, together they exceed the eight banks; the
        # check runs at the end of a replay over the liveness it records
        over = ADD_KERNEL.replace(
            "    return out\n",
            "    tiles = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)\n"
            "             for _ in range(9)]\n"
            "    nl.store(out[0:128, :], value=nl.add(nl.copy(tiles[0][:, 0:64]), x))\n"
            "    return out\n")
        h = self.dev.load_kernel(write(self.dir, "over.py", over), ["a", "b"])
        for timing in (True, False, True):
            with self.subTest(timing=timing):
                with self.assertRaises(HarnessFailure) as cm:
                    self.dev.run(h, _inputs(3), timing=timing)
                self.assertEqual(cm.exception.kind, "compile_error")
                self.assertIn("Out of memory in psum", cm.exception.message)
        self.assertEqual(h.ref.checked, set())
        h = self.dev.load_kernel(write(self.dir, "add.py", ADD_KERNEL), ["a", "b"])
        first = self.dev.run(h, _inputs(1), timing=False)  # not yet checked: full liveness
        self.assertGreater(first.metrics["peak_sbuf_bytes_per_partition"], 0)
        self.dev.run(h, _inputs(1), timing=True)
        self.assertEqual(len(h.ref.checked), 1)
        for seed in (2, 3):
            inp = _inputs(seed)
            res = self.dev.run(h, inp, timing=False)
            np.testing.assert_array_equal(self.dev.outputs(res)[0][0], inp["a"] + inp["b"])
            self.assertEqual(res.metrics["peak_sbuf_bytes_per_partition"], 0)  # no liveness

    def test_harness_never_imports_the_kernel(self):
        # A kernel whose import would break the harness process if it ran there.
        text = ADD_KERNEL.replace("import neuronxcc.nki as nki",
                                  "import numpy as np\nnp.allclose = None\n"
                                  "import neuronxcc.nki as nki")
        with util.TempDir() as d:
            lines, err, code = util.run_cli([
                "verify", "--kernel", write(d, "k.py", text), "--problem",
                write(d, "p.py", ADD_PROBLEM), "--seeds", "0,1", "--no-ref-cache"])
        self.assertEqual(code, 0)
        out = json.loads(lines[-1])
        self.assertIn(out["status"], ("ok", "failed"))
        if out["status"] == "failed":  # refused by the static scan before anything ran
            self.assertEqual(out["failure"]["kind"], "forbidden_access")
        else:
            self.assertTrue(out["verify"]["correct"])


if __name__ == "__main__":
    unittest.main()
