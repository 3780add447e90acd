#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "search/calibration/calibrate.hpp"
#include "search/store/store.hpp"

// Calibration profiles, the pending measurements that let a calibration resume, device pairs, and
// the resolver that turns "calibration=NAME|latest" into a profile's table.
namespace autocomp::search::store {
namespace {

std::shared_ptr<Store> memory_store() {
  auto opened = Store::open(":memory:");
  EXPECT_TRUE(opened.ok());
  return std::move(opened).value();
}

CalibrationProfile profile(const std::string& name, const std::string& target,
                           const std::string& table) {
  CalibrationProfile out;
  out.name = name;
  out.target = target;
  out.device_spec = "local?device=sim-perturbed&seed=1";
  out.table_json = table;
  out.fit_json = "{}";
  out.source = "probes";
  return out;
}

TEST(CalibrationStore, MeasurementsStayPendingUntilTheirProfileIsStored) {
  auto db = memory_store();
  auto& part = db->calibrations();
  const std::string device = "local?device=sim-perturbed&seed=1";
  ASSERT_TRUE(part.record_measurement("host", device, "trn1", {"p1", "d1", 10.0, "r"}).ok());
  ASSERT_TRUE(part.record_measurement("host", device, "trn1", {"p2", "d2", 20.0, "r"}).ok());
  // The same probe again replaces its measurement; another device's are its own.
  ASSERT_TRUE(part.record_measurement("host", device, "trn1", {"p2", "d2", 21.0, "r"}).ok());
  ASSERT_TRUE(part.record_measurement("host", "other", "trn1", {"p1", "d1", 99.0, "r"}).ok());
  auto pending = part.pending_measurements("host", device, "trn1");
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 2u);
  EXPECT_DOUBLE_EQ(pending->at(1).latency_us, 21.0);

  ASSERT_TRUE(part.put_profile(profile("host", "trn1", "{\"a\":1}")).ok());
  EXPECT_TRUE(part.pending_measurements("host", device, "trn1")->empty());
  EXPECT_EQ(part.pending_measurements("host", "other", "trn1")->size(), 1u);
}

TEST(CalibrationStore, ProfilesAreFoundByNameOrAsTheTargetsLatest) {
  auto db = memory_store();
  auto& part = db->calibrations();
  ASSERT_TRUE(part.put_profile(profile("old", "trn1", "{\"v\":1}")).ok());
  ASSERT_TRUE(part.put_profile(profile("other-target", "trn2", "{\"v\":2}")).ok());
  ASSERT_TRUE(part.put_profile(profile("new", "trn1", "{\"v\":3}")).ok());
  EXPECT_EQ(part.latest_profile("trn1")->value().name, "new");
  EXPECT_EQ(part.latest_profile("trn2")->value().name, "other-target");
  EXPECT_FALSE(part.latest_profile("trn3")->has_value());
  // Storing a name again replaces that profile.
  ASSERT_TRUE(part.put_profile(profile("old", "trn1", "{\"v\":4}")).ok());
  EXPECT_EQ(part.get_profile("old")->value().table_json, "{\"v\":4}");
  EXPECT_EQ(part.list_profiles()->size(), 3u);

  auto resolve = calibration::calibration_resolver(db);
  auto latest = resolve("latest", "trn1");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->name, "old");  // the newest stored for trn1
  auto missing = resolve("nope", "trn1");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.failure().kind, core::FailureKind::invalid_argument);
  EXPECT_NE(missing.failure().message.find("old (trn1)"), std::string::npos)
      << missing.failure().message;
  auto none = resolve("latest", "trn3");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.failure().message.find("target trn3"), std::string::npos);
}

TEST(CalibrationStore, DevicePairsAreKeptPerTargetDeviceAndRun) {
  auto db = memory_store();
  auto& part = db->calibrations();
  DevicePair pair;
  pair.kernel_digest = "k1";
  pair.kernel_source = "src";
  pair.problem_source = "prob";
  pair.target = "trn1";
  pair.device_spec = "dev";
  pair.sim_spec = "sim";
  pair.measured_us = 12;
  pair.simulated_us = 10;
  pair.run_id = "run-a";
  ASSERT_TRUE(part.record_pair(pair).ok());
  pair.target = "trn2";
  pair.run_id = "";
  ASSERT_TRUE(part.record_pair(pair).ok());
  EXPECT_EQ(part.pairs("trn1", "dev")->size(), 1u);
  EXPECT_EQ(part.pairs("", "dev")->size(), 2u);
  EXPECT_EQ(part.pairs("trn1", "elsewhere")->size(), 0u);
  auto run = part.pairs_for_run("run-a");
  ASSERT_EQ(run->size(), 1u);
  EXPECT_DOUBLE_EQ(run->front().measured_us, 12);
  EXPECT_EQ(run->front().kernel_source, "src");
}

TEST(CalibrationStore, ProfileNamesFitInASpec) {
  EXPECT_TRUE(calibration::valid_profile_name("trn1-host_a.2"));
  EXPECT_FALSE(calibration::valid_profile_name("latest"));
  EXPECT_FALSE(calibration::valid_profile_name("a&b"));
  EXPECT_FALSE(calibration::valid_profile_name(""));
  EXPECT_EQ(calibration::default_profile_name("trn1", "ssh://u@h:22?device=neuron"),
            "trn1-ssh-u-h-22-device-neuron");
  EXPECT_TRUE(calibration::valid_profile_name(
      calibration::default_profile_name("trn2", "local?device=sim-perturbed&seed=3")));
}

TEST(CalibrationSuite, BadManifestsAndFitAnswersAreClearErrors) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("calibration_suite_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto manifest = (dir / "probes.json").string();
  std::ofstream(manifest) << R"({"probes": [{"id": "a", "kernel": "k.py", "problem": "p.py",
                                "targets": ["trn2"]}]})";
  auto trn2 = calibration::load_probe_suite(manifest, "trn2");
  ASSERT_TRUE(trn2.ok());
  EXPECT_EQ(trn2->front().kernel_path, (dir / "k.py").string());
  auto trn1 = calibration::load_probe_suite(manifest, "trn1");
  ASSERT_FALSE(trn1.ok());
  EXPECT_NE(trn1.failure().message.find("no probe for target trn1"), std::string::npos);
  std::ofstream(manifest) << "[1, 2]";
  EXPECT_FALSE(calibration::load_probe_suite(manifest, "trn2").ok());
  EXPECT_FALSE(calibration::load_probe_suite((dir / "missing.json").string(), "trn2").ok());
  std::filesystem::remove_all(dir);

  EXPECT_FALSE(calibration::parse_fit("{\"parameters\": []}", "n", "trn1").ok());
  auto fit = calibration::parse_fit(
      R"({"values": {"dma_fixed_ns": 900}, "parameters": [{"name": "dma_fixed_ns",
          "shipped": 1300, "fitted": 900, "change_pct": -30.8, "identified": true}],
          "residuals": [{"id": "p", "measured_us": 2, "before_us": 3, "after_us": 2,
          "error_pct_before": 50, "error_pct_after": 0}]})",
      "host", "trn1");
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->table_json, R"({"name":"host","target":"trn1","values":{"dma_fixed_ns":900}})");
  ASSERT_EQ(fit->parameters.size(), 1u);
  EXPECT_TRUE(fit->parameters[0].identified);
  ASSERT_EQ(fit->residuals.size(), 1u);
  EXPECT_DOUBLE_EQ(fit->residuals[0].error_pct_before, 50);
}

}  // namespace
}  // namespace autocomp::search::store
