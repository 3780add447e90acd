"""The committed prompts/generated/facts.json is what the simulator says today."""
import importlib.util
import json
import os
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "backends", "nkisim", "export_facts.py")


def load_exporter():
    spec = importlib.util.spec_from_file_location("export_facts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ExportFactsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.exporter = load_exporter()
        cls.facts = json.loads(cls.exporter.render())

    def test_committed_file_matches_regeneration(self):
        with open(self.exporter.DEFAULT_OUT, encoding="utf-8") as f:
            committed = f.read()
        self.assertEqual(committed, self.exporter.render(),
                         "prompts/generated/facts.json is stale: run "
                         "/usr/bin/python3 backends/nkisim/export_facts.py")

    def test_numbers_are_the_simulators(self):
        from nkisim.machine import constants as C
        from nkisim.machine import runtime
        for name in ("trn1", "trn2", "trn3"):
            target = C.get_target(name)
            facts = self.facts["targets"][name]
            # What a simulation's DMA queues deliver between HBM and SBUF (efficiency included).
            self.assertAlmostEqual(facts["effective_gbps_per_core"],
                                   runtime.Sim(target, numerics=False).dma_bw, 1)
            self.assertAlmostEqual(facts["dma_fixed_us"], C.DMA_FIXED_NS / 1000.0, 3)
            self.assertAlmostEqual(facts["vector_ghz"], target.vector_hz / 1e9, 3)
            self.assertEqual(facts["pass_cost_vs_vector"]["VectorE"], 1.0)

    def test_trn3_has_mx_and_the_older_targets_do_not(self):
        from nkisim.machine import constants as C
        targets = self.facts["targets"]
        self.assertTrue(targets["trn3"]["mx"])
        self.assertAlmostEqual(targets["trn3"]["peak_mx_tflops"],
                               C.get_target("trn3").peak_flops_mx / 1e12, 1)
        self.assertEqual(targets["trn3"]["mx_matmul_speedup"], C.MX_MATMUL_SPEEDUP)
        self.assertEqual(targets["trn3"]["sbuf_kib_per_partition"], 240)
        for name in ("trn1", "trn2"):
            self.assertFalse(targets[name]["mx"])
            self.assertEqual(targets[name]["mx_matmul_speedup"], 1)

    def test_mx_instructions_take_dst_first_and_have_no_return_value_form(self):
        instructions = self.facts["instructions"]
        matmul = instructions["nisa.nc_matmul_mx"]
        self.assertEqual(matmul["signature"].split(", tile_position")[0],
                         "nisa.nc_matmul_mx(dst, stationary, moving, stationary_scale, "
                         "moving_scale")
        self.assertEqual(matmul["engine"], "TensorE")
        self.assertNotIn("legacy_signature", matmul)
        quantize = instructions["nisa.quantize_mx"]
        self.assertEqual(quantize["signature"], "nisa.quantize_mx(dst, src, dst_scale)")
        self.assertEqual(quantize["engine"], "VectorE")
        self.assertNotIn("legacy_signature", quantize)

    def test_signatures_come_from_the_argument_binding(self):
        instructions = self.facts["instructions"]
        self.assertTrue(instructions["nisa.bn_stats"]["signature"].startswith(
            "nisa.bn_stats(dst, data"))
        self.assertIn("reduce_res", instructions["nisa.activation_reduce"]["signature"])
        self.assertEqual(instructions["nisa.activation"]["engine"], "ScalarE")
        self.assertEqual(instructions["nl.rsqrt"]["engine"], "ScalarE")
        self.assertEqual(instructions["nl.add"]["engine"], "VectorE")

    def test_dst_first_instructions_have_the_return_value_form_too(self):
        instructions = self.facts["instructions"]
        self.assertEqual(instructions["nisa.activation"]["legacy_signature"].split("(")[0],
                         "y = nisa.activation")
        # dma_copy takes dst in both namespaces
        self.assertNotIn("legacy_signature", instructions["nisa.dma_copy"])
        # memset allocates its tile in the old form: it takes the shape and dtype instead
        self.assertEqual(instructions["nisa.memset"]["legacy_signature"],
                         "y = nisa.memset(shape, value, dtype, mask=None, engine=None)")
        for name, entry in instructions.items():
            if "legacy_signature" in entry and name != "nisa.memset":
                self.assertEqual(entry["legacy_signature"],
                                 "y = " + entry["signature"].replace("(dst, ", "("), name)

    def test_signatures_mark_optional_parameters_with_their_defaults(self):
        instructions = self.facts["instructions"]
        self.assertEqual(instructions["nisa.activation"]["signature"].split(", acc_flags")[0],
                         "nisa.activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, "
                         "reduce_res=None, reduce_cmd=None, mask=None, dtype=None")
        self.assertEqual(instructions["nisa.memset"]["signature"],
                         "nisa.memset(dst, value, engine=None, mask=None, dtype=None)")
        self.assertIn("op1=None", instructions["nisa.tensor_scalar"]["signature"])

    def test_check_mode_reports_a_stale_file(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "facts.json")
            with open(path, "w", encoding="utf-8") as f:
                f.write("{}\n")
            self.assertEqual(self.exporter.main(["--check", "--out", path]), 1)
            self.assertEqual(self.exporter.main(["--out", path]), 0)
            self.assertEqual(self.exporter.main(["--check", "--out", path]), 0)


if __name__ == "__main__":
    unittest.main()
