"""Real-SDK formats on fixture files: target/namespace rules, Explorer JSON, the Parquet digest,
both neuron-ls JSON forms, and the receipt fields of the neuron device."""
import json
import os
import unittest

from tests.python.harness import util

from harnesslib import neuron, sdkformats  # noqa: E402
from harnesslib.failures import HarnessFailure  # noqa: E402


def fixture(name):
    with open(os.path.join(util.FIXTURES, name), encoding="utf-8") as f:
        return f.read()


def parse(text):
    return sdkformats.parse_profile(text, neuron.parse_summary_json)


class Targets(unittest.TestCase):
    def test_nki_namespace_refuses_trn1_and_neuronxcc_refuses_trn3(self):
        kind, why = sdkformats.target_problem("trn1", "nki")
        self.assertEqual(kind, "unavailable")   # the host's SDK is too old for the kernel
        self.assertIn("trn2 and trn3 only", why)
        self.assertIn("neuronxcc", why)
        kind, why = sdkformats.target_problem("trn3", "neuronxcc")
        self.assertEqual(kind, "compile_error")  # the kernel's fault, on every device
        self.assertIn("import nki", why)
        for target, ns in (("trn2", "nki"), ("trn3", "nki"), ("trn1", "neuronxcc"),
                           ("trn2", "neuronxcc")):
            self.assertIsNone(sdkformats.target_problem(target, ns))

    def test_the_simulator_keeps_only_the_trn3_rule(self):
        self.assertIsNone(sdkformats.target_problem("trn1", "nki", device="sim"))
        self.assertEqual(sdkformats.target_problem("trn3", "neuronxcc", device="sim")[0],
                         "compile_error")

    @unittest.skipUnless(util.sim_available(), "nkisim not importable")
    def test_the_simulator_refuses_a_legacy_kernel_on_trn3_as_a_compile_error(self):
        from tests.python.harness.test_harness_sim import ADD_KERNEL, ADD_PROBLEM
        from tests.python.harness.util import autocomp_harness
        with util.TempDir() as d:
            def run(target, kernel):
                return autocomp_harness.run(["verify", "--kernel", util.write(d, "k.py", kernel),
                                             "--problem", util.write(d, "p.py", ADD_PROBLEM),
                                             "--seeds", "0", "--no-ref-cache",
                                             "--target", target])
            out = run("trn3", ADD_KERNEL)
            self.assertEqual(out["status"], "failed")
            self.assertEqual(out["failure"]["kind"], "compile_error", out["failure"])
            self.assertIn("trn3 needs the `nki` namespace", out["failure"]["message"])
            self.assertIn("import nki", out["failure"]["message"])
            for target in ("trn1", "trn2"):
                self.assertEqual(run(target, ADD_KERNEL)["status"], "ok")
            modern = ADD_KERNEL.replace("neuronxcc.nki", "nki")
            for target in ("trn1", "trn2", "trn3"):
                self.assertEqual(run(target, modern)["status"], "ok", target)

    def test_neuron_device_refuses_before_looking_for_the_sdk(self):
        with util.TempDir() as d:
            kernel = util.write(d, "k.py", "import nki\nimport nki.language as nl\n")
            with self.assertRaises(HarnessFailure) as cm:
                neuron.NeuronDevice("trn1", kernel, d, "verify")
        self.assertEqual(cm.exception.kind, "unavailable")
        self.assertIn("trn2 and trn3 only", cm.exception.message)
        with util.TempDir() as d:
            kernel = util.write(d, "k.py", "import neuronxcc.nki as nki\n")
            with self.assertRaises(HarnessFailure) as cm:
                neuron.NeuronDevice("trn3", kernel, d, "verify")
        self.assertEqual(cm.exception.kind, "compile_error")
        self.assertIn("trn3 needs the `nki` namespace", cm.exception.message)


class Profiles(unittest.TestCase):
    def test_summary_json_stays_the_cheap_path(self):
        metrics, fmt, schema = parse(fixture("summary_wrapped_fraction.json"))
        self.assertEqual(fmt, "summary-json")
        self.assertIsNone(schema)
        self.assertIn("total_time", metrics)

    def test_explorer_json_schema_12(self):
        metrics, fmt, schema = parse(fixture("explorer_full_v12.json"))
        self.assertEqual((fmt, schema), ("explorer-json", "12.0.1"))
        self.assertAlmostEqual(metrics["total_time"], 2.5e-4)
        self.assertEqual(metrics["hbm_write_bytes"], 2097152)
        self.assertAlmostEqual(metrics["tensor_engine_active_time_percent"], 42.0)
        self.assertNotIn("vector_engine_active_time_percent", metrics)

    def test_explorer_json_schema_7_with_noise(self):
        metrics, fmt, schema = parse(fixture("explorer_full_v7.json"))
        self.assertEqual((fmt, schema), ("explorer-json", "7.4.0"))
        self.assertAlmostEqual(metrics["dma_active_time_percent"], 80.0)

    def test_parquet_digest_from_tables(self):
        tables = json.loads(fixture("parquet_tables_v12.json"))
        digest = sdkformats.digest_from_tables(tables)
        self.assertEqual(digest["profile_schema"], "12.0.1")
        self.assertAlmostEqual(digest["summary"]["vector_engine_active_time"], 9e-5)
        self.assertEqual([r["line"] for r in digest["lines"]], [41, 33])
        self.assertEqual(digest["lines"][1]["instructions"], 2)
        self.assertAlmostEqual(digest["lines"][1]["time_us"], 1.0)
        # The digest is JSON: what the host prints is what the harness reads.
        metrics, fmt, schema = parse(json.dumps(digest))
        self.assertEqual((fmt, schema), ("parquet-digest", "12.0.1"))
        self.assertAlmostEqual(metrics["dma_active_time_percent"], 71.5)  # percent, not scaled
        self.assertAlmostEqual(metrics["total_time"], 1.5e-4)

    def test_garbage(self):
        self.assertEqual(parse("no json here"), ({}, None, None))


class NeuronLs(unittest.TestCase):
    def test_old_j_form(self):
        info = sdkformats.parse_neuron_ls(fixture("neuron_ls_j.json"))
        self.assertEqual(info, {"format": "neuron-ls -j", "instance_type": None, "devices": 2,
                                "cores_per_device": 4, "total_cores": 8, "lnc": 2})

    def test_new_output_format_form(self):
        info = sdkformats.parse_neuron_ls(fixture("neuron_ls_output_format.json"))
        self.assertEqual(info, {"format": "neuron-ls --output-format json",
                                "instance_type": "trn2.48xlarge", "devices": 2,
                                "cores_per_device": 8, "total_cores": 16, "lnc": 2})

    def test_command_follows_the_help_text(self):
        self.assertEqual(sdkformats.neuron_ls_command("  --output-format {table,json}"),
                         ["neuron-ls", "--output-format", "json"])
        self.assertEqual(sdkformats.neuron_ls_command("  -j, --json-output"), ["neuron-ls", "-j"])

    def test_not_json(self):
        self.assertIsNone(sdkformats.parse_neuron_ls("neuron-ls: command not found"))


class NeuronReceipt(unittest.TestCase):
    def device(self, workdir):
        dev = neuron.NeuronDevice.__new__(neuron.NeuronDevice)
        dev.target, dev.workdir, dev.namespace = "trn2", workdir, "nki"
        dev.artifacts = workdir
        dev.tool = "/opt/aws/neuron/bin/neuron-explorer"
        dev.neff = os.path.join(workdir, "kernel.neff")
        with open(dev.neff, "wb") as f:
            f.write(b"neff bytes")
        return dev

    def test_receipt_fields_after_an_explorer_profile(self):
        with util.TempDir() as d:
            dev = self.device(d)
            dev.run_cmd = lambda cmd, env, timeout=600: (0, fixture("explorer_full_v12.json"), "")
            metrics = dev._view(os.path.join(d, "profile.ntff"))
            self.assertIn("total_time", metrics)
            self.assertEqual(dev.receipt_profile_format(), "explorer-json")
            self.assertEqual(dev.receipt_profile_schema(), "12.0.1")
            self.assertEqual(len(dev.receipt_neff_hash()), 16)
        versions = {"nki": "0.7.0", "neuronx-cc": "2.28.7631.0"}

        def version_of(dist):
            if dist not in versions:
                raise LookupError(dist)
            return versions[dist]
        self.assertEqual(dev.receipt_sdk(version_of), versions)

    def test_parquet_fallback_when_summary_json_is_gone(self):
        tables = json.loads(fixture("parquet_tables_v12.json"))
        with util.TempDir() as d:
            dev = self.device(d)
            calls = []

            def run_cmd(cmd, env, timeout=600):
                calls.append(cmd[cmd.index("--output-format") + 1])
                return (2, "", "unknown format summary-json") if calls[-1] == "summary-json" \
                    else (0, "", "")
            dev.run_cmd = run_cmd
            dev.parquet_reader = lambda folder: tables
            metrics = dev._view(os.path.join(d, "p.ntff"))
        self.assertEqual(calls, ["summary-json", "parquet"])
        self.assertEqual(dev.receipt_profile_format(), "parquet-digest")
        self.assertAlmostEqual(metrics["total_time"], 1.5e-4)


if __name__ == "__main__":
    unittest.main()
