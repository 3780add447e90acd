"""Device `neuron` pieces that do not need the SDK: command lines, summary-json parsing,
roofline and bottleneck, and the `unavailable` failure on this machine."""
import json
import os
import unittest

from tests.python.harness import util
from harnesslib import neuron, sdkformats


def fixture(name):
    with open(os.path.join(util.FIXTURES, name)) as f:
        return f.read()


class CommandLines(unittest.TestCase):
    def test_capture_full(self):
        cmd = neuron.build_capture_cmd("neuron-profile", "/w/k.neff", "/w/p.ntff",
                                       {"a": "/w/a.npy", "b": "/w/b.npy"}, num_exec=12,
                                       profile_nth=2)
        self.assertEqual(cmd, ["neuron-profile", "capture", "-n", "/w/k.neff", "-s", "/w/p.ntff",
                               "--num-exec", "12", "--profile-nth-exec", "2",
                               "a", "/w/a.npy", "b", "/w/b.npy"])

    def test_capture_single_run_has_no_exec_flags(self):
        cmd = neuron.build_capture_cmd("np", "k.neff", "p.ntff")
        self.assertEqual(cmd, ["np", "capture", "-n", "k.neff", "-s", "p.ntff"])

    def test_view(self):
        self.assertEqual(neuron.build_view_cmd("neuron-profile", "k.neff", "p.ntff"),
                         ["neuron-profile", "view", "-n", "k.neff", "-s", "p.ntff",
                          "--output-format", "summary-json"])
        self.assertEqual(neuron.build_view_cmd("t", "k", "s", "json", "/o.json")[-2:],
                         ["--output-file", "/o.json"])

    def test_ntff_names(self):
        self.assertEqual(neuron.ntff_for_exec("/w/profile.ntff", 1), "/w/profile.ntff")
        self.assertEqual(neuron.ntff_for_exec("/w/profile.ntff", 7), "/w/profile_exec_7.ntff")

    def test_env(self):
        env = neuron.neuron_env({"PATH": "/usr/bin"}, "trn1", "/w/art", visible_cores=3)
        self.assertEqual(env["NEURON_PLATFORM_TARGET_OVERRIDE"], "trn1")
        self.assertEqual(env["NKI_ARTIFACTS_DIR"], "/w/art")
        self.assertEqual(env["NEURON_RT_VISIBLE_CORES"], "3")
        self.assertTrue(env["PATH"].endswith("/opt/aws/neuron/bin"))
        kept = neuron.neuron_env({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"}, "trn1")
        self.assertEqual(kept["NEURON_PLATFORM_TARGET_OVERRIDE"], "trn2")

    def test_namespace_detection(self):
        self.assertEqual(sdkformats.detect_namespace("import neuronxcc.nki as nki\n"), "neuronxcc")
        self.assertEqual(sdkformats.detect_namespace("from neuronxcc import nki\n"), "neuronxcc")
        self.assertEqual(sdkformats.detect_namespace("import nki\nimport nki.isa as nisa\n"), "nki")
        self.assertEqual(sdkformats.detect_namespace("from nki import language as nl\n"), "nki")
        self.assertIsNone(sdkformats.detect_namespace("import nkix\nimport numpy\n"))


class SummaryJson(unittest.TestCase):
    def test_wrapped_fractions_are_scaled(self):
        m = neuron.parse_summary_json(fixture("summary_wrapped_fraction.json"))
        self.assertAlmostEqual(m["total_time"], 0.000123456)
        self.assertAlmostEqual(m["tensor_engine_active_time_percent"], 73.87)
        self.assertAlmostEqual(m["mfu_estimated_percent"], 60.23)
        self.assertNotIn("gpsimd_engine_active_time_percent", m)   # -1 means unavailable
        self.assertNotIn("instance_type", m)                       # non-numeric dropped
        self.assertEqual(m["hbm_read_bytes"], 16777216)

    def test_flat_percent_with_noise_and_strings(self):
        m = neuron.parse_summary_json(fixture("summary_flat_percent.json"))
        self.assertAlmostEqual(m["total_time"], 2.5e-05)
        self.assertAlmostEqual(m["vector_engine_active_time_percent"], 81.0)
        self.assertAlmostEqual(m["tensor_engine_active_time_percent"], 12.5)
        self.assertNotIn("hardware_flops", m)

    def test_legacy_summary_list(self):
        m = neuron.parse_summary_json(fixture("summary_legacy_list.json"))
        self.assertAlmostEqual(m["total_time"], 0.001)
        self.assertAlmostEqual(m["dma_active_time_percent"], 95.0)

    def test_garbage_and_empty(self):
        self.assertEqual(neuron.parse_summary_json("no json here"), {})
        self.assertEqual(neuron.parse_summary_json(""), {})
        self.assertEqual(neuron.parse_summary_json("{}"), {})

    def test_forced_percent_modes(self):
        self.assertEqual(neuron.normalize_percent({"x_percent": 0.5}, "percent"), {"x_percent": 0.5})
        self.assertEqual(neuron.normalize_percent({"x_percent": 0.5}, "fraction"), {"x_percent": 50.0})

    def test_roofline_and_bottleneck(self):
        m = neuron.parse_summary_json(fixture("summary_wrapped_fraction.json"))
        r = neuron.roofline_from_metrics(m, "trn2")
        self.assertAlmostEqual(r["achieved_tflops"], 8589934592 / 0.000123456 / 1e12)
        self.assertAlmostEqual(r["arithmetic_intensity"], 8589934592 / (16777216 + 4194304))
        self.assertEqual(r["peak_tflops"], 78.6)
        self.assertIn("hbm_pct", r)
        self.assertEqual(neuron.bottleneck_from_metrics(m, r), "compute-bound")
        flat = neuron.parse_summary_json(fixture("summary_flat_percent.json"))
        rf = neuron.roofline_from_metrics(flat, "trn1")
        self.assertNotIn("achieved_tflops", rf)
        self.assertEqual(neuron.bottleneck_from_metrics(flat, rf), "vector-engine-bound")
        self.assertEqual(neuron.bottleneck_from_metrics({}, {}), "unknown")


class Availability(unittest.TestCase):
    def test_missing_parts_message(self):
        missing = neuron.missing_sdk_parts("neuronxcc", True, lambda name: False, None)
        self.assertEqual(neuron.unavailable_message(missing),
                         "device 'neuron' needs the AWS Neuron SDK: python module 'neuronxcc' "
                         "not importable and 'neuron-profile' not on PATH")
        self.assertEqual(neuron.missing_sdk_parts("nki", True, lambda n: n == "nki", "/x/np"), [])
        self.assertEqual(neuron.missing_sdk_parts("nki", False, lambda n: False, None),
                         ["python module 'nki' not importable"])

    def test_find_tool(self):
        self.assertEqual(neuron.find_tool(lambda t: "/usr/bin/" + t if t == "neuron-explorer"
                                          else None, lambda p: False), "/usr/bin/neuron-explorer")
        self.assertEqual(neuron.find_tool(lambda t: None, lambda p: p.endswith("neuron-profile")),
                         "/opt/aws/neuron/bin/neuron-profile")
        self.assertIsNone(neuron.find_tool(lambda t: None, lambda p: False))

    @unittest.skipIf(neuron.module_available("neuronxcc"), "Neuron SDK present")
    def test_cli_reports_unavailable(self):
        problem = os.path.join(util.SEEDS_DIR, "rmsnorm", "problem.py")
        kernel = os.path.join(util.SEEDS_DIR, "rmsnorm", "naive.py")
        lines, _, code = util.run_cli(["evaluate", "--device", "neuron", "--kernel", kernel,
                                       "--problem", problem])
        self.assertEqual(code, 0)
        out = util.last_json(lines)
        self.assertEqual(out["status"], "failed")
        self.assertEqual(out["failure"]["kind"], "unavailable")
        self.assertIn("python module 'neuronxcc' not importable", out["failure"]["message"])
        self.assertIn("'neuron-profile' not on PATH", out["failure"]["message"])


if __name__ == "__main__":
    unittest.main()


class DeviceFlowWithRecordedTools(unittest.TestCase):
    """NeuronDevice's benchmark/profile orchestration against a scripted neuron-profile."""

    def make_device(self, workdir, namespace="nki"):
        dev = neuron.NeuronDevice.__new__(neuron.NeuronDevice)
        dev.target, dev.workdir, dev.namespace = "trn2", workdir, namespace
        dev.tool = "/opt/aws/neuron/bin/neuron-profile"
        dev.artifacts = os.path.join(workdir, "artifacts")
        dev.neff = os.path.join(dev.artifacts, "kernel.neff")
        dev.calls = []
        times = iter([100e-6, 101e-6, 99e-6, 100.5e-6, 98e-6])

        def run_cmd(cmd, env, timeout=600):
            dev.calls.append(cmd)
            self.assertEqual(env["NEURON_PLATFORM_TARGET_OVERRIDE"], "trn2")
            if cmd[1] == "capture":
                return 0, "", ""
            wrapped = {"n_0123abcd": {"total_time": next(times), "dma_active_time_percent": 0.5}}
            return 0, "INFO view\n" + json.dumps(wrapped), ""
        dev.run_cmd = run_cmd
        return dev

    def test_benchmark_views_each_measured_execution(self):
        import numpy as np
        with util.TempDir() as d:
            dev = self.make_device(d)
            samples = dev.benchmark_samples(None, {"a": np.zeros((2, 2), np.float32)}, warmup=2,
                                            iters=3)
            self.assertTrue(os.path.exists(os.path.join(d, "inputs", "a.npy")))
        self.assertEqual([round(s, 6) for s in samples], [100.0, 101.0, 99.0])
        capture = dev.calls[0]
        self.assertEqual(capture[:2], ["/opt/aws/neuron/bin/neuron-profile", "capture"])
        self.assertIn("--num-exec", capture)
        self.assertEqual(capture[capture.index("--num-exec") + 1], "5")
        self.assertEqual(capture[-2], "a")
        viewed = [c[c.index("-s") + 1] for c in dev.calls[1:]]
        self.assertEqual([os.path.basename(v) for v in viewed],
                         ["bench_exec_3.ntff", "bench_exec_4.ntff", "bench_exec_5.ntff"])

    def test_profile_reads_second_execution(self):
        with util.TempDir() as d:
            dev = self.make_device(d)
            metrics = dev.profile_metrics(None, {})
        self.assertAlmostEqual(metrics["total_time"], 100e-6)
        self.assertAlmostEqual(metrics["dma_active_time_percent"], 50.0)
        capture = dev.calls[0]
        self.assertEqual(capture[capture.index("--profile-nth-exec") + 1], "2")

    def test_tool_failure_is_runtime_error(self):
        from harnesslib.failures import HarnessFailure
        with util.TempDir() as d:
            dev = self.make_device(d)
            dev.run_cmd = lambda cmd, env, timeout=600: (3, "", "NRT_EXEC_OOB(1006)")
            with self.assertRaises(HarnessFailure) as cm:
                dev.profile_metrics(None, {})
        self.assertEqual(cm.exception.kind, "runtime_error")
        self.assertIn("NRT_EXEC_OOB", cm.exception.message)
