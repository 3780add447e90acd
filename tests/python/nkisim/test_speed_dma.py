"""A DMA between storages of one dtype moves values that are representable already: it
copies them without rounding them again, and the result is what rounding would give."""
import unittest
from unittest import mock

import numpy as np

from . import _util  # noqa: F401  (activates the simulator)
import nkisim
import nki
import nki.isa as nisa
import nki.language as nl
from nkisim.data import dtypes as D


@nki.jit
def bf16_roundtrip_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def bf16_to_fp32_kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


class SameDtypeDma(unittest.TestCase):
    def setUp(self):
        self.x = np.random.default_rng(7).standard_normal((128, 64)).astype(np.float32)
        self.x[0, :4] = [np.inf, -np.inf, np.nan, 3.0e38]

    def _run(self, kernel):
        calls = []
        real = D.round_mantissa

        def counting(x, mant_bits):
            calls.append(np.shape(x))
            return real(x, mant_bits)

        with mock.patch.object(D, "round_mantissa", counting):
            res = nkisim.simulate(kernel, {"x": self.x}, input_dtypes={"x": "bfloat16"})
        return res, calls

    def test_no_rounding_after_the_input(self):
        res, calls = self._run(bf16_roundtrip_kernel)
        self.assertEqual(len(calls), 1)  # the input itself, when it enters HBM
        want = D.quantize(self.x, D.BFLOAT16)
        np.testing.assert_array_equal(res.outputs[0], want)

    def test_values_match_rounding_every_transfer(self):
        res, _ = self._run(bf16_roundtrip_kernel)
        once = D.quantize(self.x, D.BFLOAT16)
        np.testing.assert_array_equal(res.outputs[0], D.quantize(once, D.BFLOAT16))

    def test_another_dtype_still_converts(self):
        res, _ = self._run(bf16_to_fp32_kernel)
        np.testing.assert_array_equal(res.outputs[0], D.quantize(self.x, D.BFLOAT16))


if __name__ == "__main__":
    unittest.main()
