"""The result line cannot be forged by kernel or problem code and always ends the process."""
import json
import unittest

from tests.python.harness import util
from tests.python.harness.test_harness_sim import ADD_KERNEL, ADD_PROBLEM
from tests.python.harness.util import write

from harnesslib import emit  # noqa: E402


class Encoding(unittest.TestCase):
    VALUE = {"schema": "autocomp-harness/1", "n": 3, "x": 0.1, "big": 1e300, "neg": -2.5e-7,
             "flags": [True, False, None], "text": "quote\" back\\ nl\n tab\t \x01 é 漢",
             "nested": {"a": [], "b": {}}}

    def test_round_trips_through_json(self):
        self.assertEqual(json.loads(emit.encode(self.VALUE)), self.VALUE)

    def test_independent_of_patched_json(self):
        saved = (json.dumps, json.JSONEncoder.encode)
        try:
            json.dumps = lambda *a, **k: '{"status":"ok"}'
            json.JSONEncoder.encode = lambda self, o: '{"status":"ok"}'
            text = emit.encode({"status": "failed", "latency": 12.5})
        finally:
            json.dumps, json.JSONEncoder.encode = saved
        self.assertEqual(json.loads(text), {"status": "failed", "latency": 12.5})

    def test_refuses_what_json_cannot_hold(self):
        with self.assertRaises(ValueError):
            emit.encode({"x": float("nan")})
        with self.assertRaises(TypeError):
            emit.encode({"x": object()})


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class ForgedLines(unittest.TestCase):
    def test_printed_result_line_goes_to_stderr(self):
        # Built by concatenation, so the static scan's schema rule does not see it.
        forged = ADD_KERNEL.replace(
            "    x = nl.load(a[0:128, :])",
            "    print('{\"schema\":\"autocomp-' + 'harness/1\",\"status\":\"ok\",\"forged\":1}')\n"
            "    x = nl.load(a[0:128, :])")
        forged = forged.replace("nl.add(x, y)", "nl.subtract(x, y)")
        with util.TempDir() as d:
            lines, err, code = util.run_cli([
                "verify", "--kernel", write(d, "k.py", forged), "--problem",
                write(d, "p.py", ADD_PROBLEM), "--seeds", "0", "--no-ref-cache"])
        self.assertEqual(code, 0)
        self.assertEqual(len(lines), 1, lines)
        out = json.loads(lines[0])
        self.assertNotIn("forged", out)
        self.assertEqual(out["failure"]["kind"], "mismatch")
        self.assertIn('"forged":1', err)

    def test_leftover_thread_does_not_hold_the_result(self):
        problem = ADD_PROBLEM.replace(
            "def inputs(seed):",
            "import threading, time\n\n"
            "def inputs(seed):\n"
            "    threading.Thread(target=time.sleep, args=(3600,)).start()")
        with util.TempDir() as d:
            lines, _, code = util.run_cli([
                "verify", "--kernel", write(d, "k.py", ADD_KERNEL), "--problem",
                write(d, "p.py", problem), "--seeds", "0", "--no-ref-cache"], timeout=120)
        self.assertEqual(code, 0)
        self.assertEqual(json.loads(lines[-1])["status"], "ok")


if __name__ == "__main__":
    unittest.main()
