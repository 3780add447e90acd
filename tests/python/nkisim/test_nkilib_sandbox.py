"""The sandboxed kernel process as NKI Library code meets it: an API object the API returns
(`t.buffer`) is the API entry itself, so `t.buffer == nl.sbuf` and `is` hold as in NKI."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
HARNESS = os.path.join(REPO, "backends", "harness", "autocomp_harness.py")

KERNEL = '''
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def copy_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    assert t.buffer == nl.sbuf and t.buffer is nl.sbuf and not (t.buffer != nl.sbuf)
    assert a.buffer != nl.sbuf
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t)
    return out
'''

PROBLEM = '''
import numpy as np


def inputs(seed):
    return {"a": np.random.default_rng(seed).standard_normal((128, 64)).astype(np.float32)}


def reference(a):
    return a
'''


def verify(kernel_text, problem_text):
    with tempfile.TemporaryDirectory() as d:
        k = os.path.join(d, "kernel.py")
        p = os.path.join(d, "problem.py")
        with open(k, "w") as f:
            f.write(textwrap.dedent(kernel_text))
        with open(p, "w") as f:
            f.write(textwrap.dedent(problem_text))
        out = subprocess.run([sys.executable, "-I", "-B", HARNESS, "verify", "--kernel", k,
                              "--problem", p, "--target", "trn2", "--no-ref-cache"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300,
                             check=False)
        return json.loads(out.stdout.decode().strip().splitlines()[-1])


class ApiEntriesKeepTheirIdentity(unittest.TestCase):
    def test_a_tensor_buffer_is_the_buffer_entry(self):
        res = verify(KERNEL, PROBLEM)
        self.assertEqual(res["status"], "ok", res.get("failure"))


if __name__ == "__main__":
    unittest.main()
