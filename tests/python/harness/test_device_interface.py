"""The device interface: a device loads and selects the kernel and runs the handle it returned."""
import unittest

import numpy as np

from tests.python.harness import util
from tests.python.harness.test_harness_sim import ADD_KERNEL
from tests.python.harness.util import write


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class SimDeviceInterface(unittest.TestCase):
    def test_load_kernel_then_run_handle(self):
        from harnesslib.failures import HarnessFailure
        from harnesslib.simdev import SimDevice
        dev = SimDevice("trn2")
        with util.TempDir() as d:
            path = write(d, "k.py", ADD_KERNEL)
            handle = dev.load_kernel(path, ["a", "b"], None, None)
            self.assertEqual(handle.name, "add_kernel")
            self.assertEqual(handle.path, path)
            a = np.ones((128, 64), np.float32)
            result = dev.run(handle, {"a": a, "b": a}, numerics=True)
            outs, _ = dev.outputs(result)
            np.testing.assert_array_equal(outs[0], a + a)
            with self.assertRaises(HarnessFailure) as err:
                dev.load_kernel(path, ["a", "b"], "missing_kernel", None)
            self.assertEqual(err.exception.kind, "compile_error")


if __name__ == "__main__":
    unittest.main()
