"""sendrecv and core_barrier between the programs of a launch, through the sandbox recording
and the trusted replay (machine/sync.py): values exchanged, waits timed, mismatches refused."""
import os
import sys
import tempfile
import textwrap
import unittest

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
HARNESS_DIR = os.path.join(REPO, "backends", "harness")
NKISIM_DIR = os.path.join(REPO, "backends", "nkisim")
for d in (NKISIM_DIR, HARNESS_DIR):
    if d not in sys.path:
        sys.path.insert(0, d)

import nkisim  # noqa: E402
from nkisim import sandbox  # noqa: E402
from nkisim.machine import sync  # noqa: E402
from nkisim.sandbox import replay  # noqa: E402
from harnesslib.simchild import loader_spec  # noqa: E402

HEADER = """
import nki
import nki.isa as nisa
import nki.language as nl
"""

# each program loads its half of `a`, swaps halves with the other and adds them
EXCHANGE = HEADER + """
@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    rows = a.shape[0] // 2
    mine = nl.ndarray((rows, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[me * rows:(me + 1) * rows, :])
    other = nl.ndarray((rows, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=other, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    s = nl.ndarray((rows, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=s, data1=mine, data2=other, op=nl.subtract)
    nisa.dma_copy(dst=out[me * rows:(me + 1) * rows, :], src=s)
    return out
"""

# program 1 works WORK times longer before the barrier; after it both store one tile
BARRIER = HEADER + """
@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[0:128, :])
    for i in nl.sequential_range(2 + 300 * me):
        nisa.activation(dst=t, op=nl.exp, data=t, scale=0.0)
    if BARRIER_ON:
        nisa.core_barrier(out, (0, 1))
    nisa.dma_copy(dst=out[me * 128:(me + 1) * 128, :], src=t)
    return out
"""

# the exchange inside a loop of four iterations, on two pipes
LOOP = HEADER + """
@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    for i in nl.affine_range(4):
        mine = nl.ndarray((32, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mine, src=a[me * 128 + i * 32:me * 128 + (i + 1) * 32, :])
        got = nl.ndarray((32, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - me, recv_from_rank=1 - me,
                      pipe_id=i % 2)
        nisa.dma_copy(dst=out[me * 128 + i * 32:me * 128 + (i + 1) * 32, :], src=got)
    return out
"""


def _specs(inputs):
    return {k: {"shape": list(v.shape), "dtype": v.dtype.name} for k, v in inputs.items()}


class Sync(unittest.TestCase):
    def setUp(self):
        self._td = tempfile.TemporaryDirectory(prefix="sync-")
        self.a = np.random.default_rng(0).standard_normal((256, 64), dtype=np.float32)

    def tearDown(self):
        self._td.cleanup()

    def run_kernel(self, text, grid=(2,), timing=True, lnc=None):
        path = os.path.join(self._td.name, "k%d.py" % (abs(hash(text)) % 10 ** 8))
        with open(path, "w") as f:
            f.write(textwrap.dedent(text).lstrip("\n"))
        inputs = {"a": self.a}
        ans = sandbox.record_trace({
            "kernel_path": path, "loader": loader_spec(HARNESS_DIR), "target": "trn2",
            "input_names": ["a"], "kernel_name": None, "problem_kernel": None,
            "inputs": _specs(inputs), "input_dtypes": {}, "grid": list(grid)})
        self.assertTrue(ans["ok"], ans)
        return replay.replay(ans, inputs, target="trn2", kernel_path=path, timing=timing,
                             lnc=lnc)

    def test_sendrecv_swaps_the_programs_tiles(self):
        res = self.run_kernel(EXCHANGE)
        top, bottom = self.a[:128], self.a[128:]
        np.testing.assert_array_equal(res.outputs[0][:128], top - bottom)
        np.testing.assert_array_equal(res.outputs[0][128:], bottom - top)
        self.assertEqual(len(res.core_end_us), 2)
        untimed = self.run_kernel(EXCHANGE, timing=False)
        np.testing.assert_array_equal(untimed.outputs[0], res.outputs[0])
        one_core = self.run_kernel(EXCHANGE, lnc=1)
        np.testing.assert_array_equal(one_core.outputs[0], res.outputs[0])

    def test_sendrecv_in_a_loop_on_two_pipes(self):
        res = self.run_kernel(LOOP)
        np.testing.assert_array_equal(res.outputs[0][:128], self.a[128:])
        np.testing.assert_array_equal(res.outputs[0][128:], self.a[:128])

    def test_barrier_holds_the_early_core_until_the_late_one(self):
        free = self.run_kernel(BARRIER.replace("BARRIER_ON", "False"))
        held = self.run_kernel(BARRIER.replace("BARRIER_ON", "True"))
        np.testing.assert_array_equal(free.outputs[0], held.outputs[0])
        c0, c1 = free.core_end_us
        self.assertGreater(c1, 5 * c0)  # program 1 does 151x the activations
        h0, h1 = held.core_end_us
        # after the barrier core 0 starts its store when core 1 has finished its work
        self.assertGreater(h0, c1 - c0)
        self.assertGreaterEqual(h1, c1)
        self.assertGreaterEqual(held.latency_us, free.latency_us)
        self.assertGreater(sync.K_BARRIER_NS, 0)

    def test_a_call_without_partner_is_an_error(self):
        lonely = EXCHANGE.replace("    nisa.sendrecv(", "    if me == 0:\n        nisa.sendrecv(")
        with self.assertRaises(nkisim.NkiRuntimeError) as c:
            self.run_kernel(lonely)
        self.assertIn("never met", str(c.exception))
        self.assertIn("would hang", str(c.exception))

    def test_crossed_calls_deadlock_is_an_error(self):
        crossed = EXCHANGE.replace(
            "    nisa.sendrecv(",
            "    if me == 1:\n        nisa.core_barrier(out, (0, 1))\n    nisa.sendrecv(")
        with self.assertRaises(nkisim.NkiError) as c:
            self.run_kernel(crossed)
        self.assertIn("never met", str(c.exception))

    def test_sizes_that_do_not_match_the_partner_are_refused(self):
        uneven = EXCHANGE.replace(
            "    nisa.sendrecv(src=mine, dst=other,",
            "    part = mine[0:64 + 64 * me, :]\n"
            "    dst = other[0:64 + 64 * me, :]\n"
            "    nisa.sendrecv(src=part, dst=dst,")
        with self.assertRaises(nkisim.NkiCompileError) as c:
            self.run_kernel(uneven)
        self.assertIn("elements", str(c.exception))

    def test_exchange_with_a_rank_outside_the_launch_is_refused(self):
        far = EXCHANGE.replace("send_to_rank=1 - me, recv_from_rank=1 - me",
                               "send_to_rank=2, recv_from_rank=2")
        path = os.path.join(self._td.name, "far.py")
        with open(path, "w") as f:
            f.write(far)
        ans = sandbox.record_trace({
            "kernel_path": path, "loader": loader_spec(HARNESS_DIR), "target": "trn2",
            "input_names": ["a"], "kernel_name": None, "problem_kernel": None,
            "inputs": _specs({"a": self.a}), "input_dtypes": {}, "grid": [2]})
        self.assertFalse(ans["ok"])
        self.assertIn("the launch has 2 programs", ans["message"])


if __name__ == "__main__":
    unittest.main()
