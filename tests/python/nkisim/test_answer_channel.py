"""The kernel process's answer channel (nkisim/sandbox/process.py): answers are read into one
bounded buffer; an answer without an end larger than MAX_ANSWER_BYTES is refused at once
(runtime_error), never held whole."""
import os
import subprocess
import sys
import unittest

from tests.python.nkisim import _util  # noqa: F401 - puts nkisim on sys.path

from nkisim.sandbox import process


def _channel(script):
    """A KernelProcess reading the stdout of `python -c script` as its answer pipe."""
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    kp = process.KernelProcess.__new__(process.KernelProcess)
    kp.proc, kp.ans, kp.cmd, kp.log = child, os.dup(child.stdout.fileno()), None, None
    kp.timeout = 120.0
    kp._buf = bytearray()
    child.stdout.close()
    return kp


class AnswerChannel(unittest.TestCase):
    def test_answers_in_one_chunk_are_read_in_order(self):
        kp = _channel("import os; os.write(1, b'{\"ok\": true, \"n\": 1}\\n{\"ok\": false}\\n')")
        try:
            self.assertEqual(kp._message(), {"ok": True, "n": 1})
            self.assertEqual(kp._message(), {"ok": False})
        finally:
            kp.close()

    def test_endless_answer_is_refused_at_the_bound(self):
        # 1 GiB without a newline: refused once the buffer passes the bound
        kp = _channel("import os\nb = b'x' * (1 << 20)\ntry:\n    for _ in range(1024):\n"
                      "        os.write(1, b)\nexcept OSError:\n    pass\n")
        try:
            ans = kp._message()
        finally:
            kp.close()
        self.assertEqual(ans["kind"], "runtime_error")
        self.assertIn("more than %d MiB" % (process.MAX_ANSWER_BYTES >> 20), ans["message"])
        self.assertEqual(len(kp._buf), 0)
        self.assertLess(process.MAX_ANSWER_BYTES, 256 << 20)


if __name__ == "__main__":
    unittest.main()
