"""The matmul ladder (tiled -> hoisted loads -> M/N blocking -> M/N/K blocking with SBUF
partial sums) computes the same product at every step and ranks in the published order; the
last step in the older block-dimension style costs what the same step costs without them."""
import unittest

import numpy as np

from . import _util  # noqa: F401
from . import ladder
import nkisim


def _specs(K, M, N):
    return {"lhsT": nkisim.TensorSpec((K, M), "bfloat16"),
            "rhs": nkisim.TensorSpec((K, N), "bfloat16")}


class LadderTest(unittest.TestCase):
    def test_every_step_computes_the_product(self):
        rng = np.random.default_rng(5)
        K, M, N = 256, 256, 1024
        lhsT = nkisim.to_bf16(rng.standard_normal((K, M), dtype=np.float32))
        rhs = nkisim.to_bf16(rng.standard_normal((K, N), dtype=np.float32))
        ref = lhsT.T.astype(np.float64) @ rhs.astype(np.float64)
        dts = {"lhsT": "bfloat16", "rhs": "bfloat16"}
        small = {"bm": 2, "bn": 2}
        for kernel, extra in ((ladder.step1_tiled, {}), (ladder.step2_hoisted, {}),
                              (ladder.step3_blocked_free, small),
                              (ladder.step4_blocked_all, dict(small, bk=2)),
                              (ladder.step4_blocked_all_blockdim, dict(small, bk=2))):
            with self.subTest(kernel=kernel.__name__):
                r = nkisim.simulate(kernel, dict({"lhsT": lhsT, "rhs": rhs}, **extra),
                                    input_dtypes=dts)
                np.testing.assert_allclose(r.outputs[0], ref, rtol=2e-2, atol=0.25)

    def test_ladder_ranks_in_order(self):
        K = M = N = 2048
        for target in ("trn1", "trn2"):
            lat = [nkisim.simulate(k, _specs(K, M, N), target=target, numerics=False)
                   for k in ladder.LADDER]
            us = [r.latency_us for r in lat]
            with self.subTest(target=target, latency_us=us):
                for slow, fast in zip(us[:3], us[1:4]):
                    self.assertGreater(slow, 1.2 * fast)
                if target == "trn1":
                    # the last step moves under half the bytes (at trn1's ~104 GB/s of DMA
                    # it stays memory-bound at this shape, as it nearly is on hardware at
                    # the tutorial's larger one)
                    self.assertGreater(us[2], 1.7 * us[3])
                    self.assertLess(lat[3].metrics["dma_transfer_total_bytes"],
                                    0.5 * lat[2].metrics["dma_transfer_total_bytes"])
                # block-dimension accumulators are charged per element, not per block
                self.assertLess(abs(us[4] - us[3]), 0.05 * us[3])


if __name__ == "__main__":
    unittest.main()
