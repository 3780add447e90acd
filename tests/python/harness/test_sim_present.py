"""The simulator ships with the harness: the sim-backed suites must never be skipped for its absence."""
import unittest

from tests.python.harness import util


class SimulatorPresent(unittest.TestCase):
    def test_nkisim_imports_from_the_bundle(self):
        self.assertTrue(util.sim_available(), "backends/nkisim is not importable by the harness")


if __name__ == "__main__":
    unittest.main()
