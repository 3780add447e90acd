#include "search/store/sql_parts.hpp"

// Calibration profiles, pending probe measurements and device pairs over SQLite.
namespace autocomp::search::store {
namespace {

constexpr std::string_view k_profile_columns =
    "SELECT id, name, target, device_spec, versions, table_json, fit_json, source, created_at "
    "FROM calibration_profiles ";

CalibrationProfile read_profile(const Stmt& row) {
  CalibrationProfile profile;
  profile.id = row.int64(0);
  profile.name = row.text(1);
  profile.target = row.text(2);
  profile.device_spec = row.text(3);
  profile.versions = row.text(4);
  profile.table_json = row.text(5);
  profile.fit_json = row.text(6);
  profile.source = row.text(7);
  profile.created_at_ms = row.int64(8);
  return profile;
}

constexpr std::string_view k_pair_columns =
    "SELECT id, kernel_digest, kernel_source, kernel_name, problem_source, problem_key, target, "
    "device_spec, sim_spec, measured_us, simulated_us, run_id, created_at FROM device_pairs ";

DevicePair read_pair(const Stmt& row) {
  DevicePair pair;
  pair.id = row.int64(0);
  pair.kernel_digest = row.text(1);
  pair.kernel_source = row.text(2);
  pair.kernel_name = row.text(3);
  pair.problem_source = row.text(4);
  pair.problem_key = row.text(5);
  pair.target = row.text(6);
  pair.device_spec = row.text(7);
  pair.sim_spec = row.text(8);
  pair.measured_us = row.real(9);
  pair.simulated_us = row.real(10);
  pair.run_id = row.text(11);
  pair.created_at_ms = row.int64(12);
  return pair;
}

}  // namespace

core::Result<std::int64_t> SqlCalibrations::put_profile(const CalibrationProfile& profile) {
  return m_db->guarded("put_profile", [&] {
    return m_db->transaction([&] {
      // Replaced, not updated: the profile stored last is the newest ("latest"), whatever the
      // clock says.
      auto drop = m_db->prepare("DELETE FROM calibration_profiles WHERE name = ?");
      drop.bind(profile.name);
      drop.run();
      auto stmt = m_db->prepare(
          "INSERT INTO calibration_profiles (name, target, device_spec, versions, table_json, "
          "fit_json, source, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id");
      stmt.bind(profile.name)
          .bind(profile.target)
          .bind(profile.device_spec)
          .bind(profile.versions.empty() ? std::string("{}") : profile.versions)
          .bind(profile.table_json)
          .bind(profile.fit_json)
          .bind(profile.source)
          .bind(now_ms());
      std::int64_t id = stmt.step() ? stmt.int64(0) : 0;
      stmt.run();
      auto retire = m_db->prepare(
          "DELETE FROM calibration_measurements WHERE name = ? AND device_spec = ? AND target = ?");
      retire.bind(profile.name).bind(profile.device_spec).bind(profile.target);
      retire.run();
      return id;
    });
  });
}

core::Result<std::optional<CalibrationProfile>> SqlCalibrations::get_profile(
    const std::string& name) {
  return m_db->guarded("get_profile", [&]() -> std::optional<CalibrationProfile> {
    auto stmt = m_db->prepare(std::string(k_profile_columns) + "WHERE name = ?");
    stmt.bind(name);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return read_profile(stmt);
  });
}

core::Result<std::optional<CalibrationProfile>> SqlCalibrations::latest_profile(
    const std::string& target) {
  return m_db->guarded("latest_profile", [&]() -> std::optional<CalibrationProfile> {
    auto stmt =
        m_db->prepare(std::string(k_profile_columns) + "WHERE target = ? ORDER BY id DESC LIMIT 1");
    stmt.bind(target);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return read_profile(stmt);
  });
}

core::Result<std::vector<CalibrationProfile>> SqlCalibrations::list_profiles() {
  return m_db->guarded("list_profiles", [&] {
    auto stmt = m_db->prepare(std::string(k_profile_columns) + "ORDER BY id DESC");
    std::vector<CalibrationProfile> out;
    while (stmt.step()) {
      out.push_back(read_profile(stmt));
    }
    return out;
  });
}

core::Status SqlCalibrations::record_measurement(const std::string& name,
                                                 const std::string& device_spec,
                                                 const std::string& target,
                                                 const CalibrationMeasurement& measurement) {
  return m_db->guarded("record_measurement", [&] {
    auto stmt = m_db->prepare(
        "INSERT INTO calibration_measurements (name, device_spec, target, probe_id, probe_digest, "
        "latency_us, receipt, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (name, device_spec, target, probe_id, probe_digest) DO UPDATE SET "
        "latency_us = excluded.latency_us, receipt = excluded.receipt, created_at = "
        "excluded.created_at");
    stmt.bind(name)
        .bind(device_spec)
        .bind(target)
        .bind(measurement.probe_id)
        .bind(measurement.probe_digest)
        .bind(measurement.latency_us)
        .bind(measurement.receipt)
        .bind(now_ms());
    stmt.run();
    return core::Unit{};
  });
}

core::Result<std::vector<CalibrationMeasurement>> SqlCalibrations::pending_measurements(
    const std::string& name, const std::string& device_spec, const std::string& target) {
  return m_db->guarded("pending_measurements", [&] {
    auto stmt = m_db->prepare(
        "SELECT probe_id, probe_digest, latency_us, receipt FROM calibration_measurements "
        "WHERE name = ? AND device_spec = ? AND target = ? ORDER BY id");
    stmt.bind(name).bind(device_spec).bind(target);
    std::vector<CalibrationMeasurement> out;
    while (stmt.step()) {
      out.push_back({stmt.text(0), stmt.text(1), stmt.real(2), stmt.text(3)});
    }
    return out;
  });
}

core::Result<std::int64_t> SqlCalibrations::record_pair(const DevicePair& pair) {
  return m_db->guarded("record_pair", [&] {
    auto stmt = m_db->prepare(
        "INSERT INTO device_pairs (kernel_digest, kernel_source, kernel_name, problem_source, "
        "problem_key, target, device_spec, sim_spec, measured_us, simulated_us, run_id, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id");
    stmt.bind(pair.kernel_digest)
        .bind(pair.kernel_source)
        .bind(pair.kernel_name)
        .bind(pair.problem_source)
        .bind(pair.problem_key)
        .bind(pair.target)
        .bind(pair.device_spec)
        .bind(pair.sim_spec)
        .bind(pair.measured_us)
        .bind(pair.simulated_us)
        .bind(pair.run_id)
        .bind(now_ms());
    std::int64_t id = stmt.step() ? stmt.int64(0) : 0;
    stmt.run();
    return id;
  });
}

core::Result<std::vector<DevicePair>> SqlCalibrations::pairs(const std::string& target,
                                                             const std::string& device_spec) {
  return m_db->guarded("pairs", [&] {
    auto stmt = m_db->prepare(std::string(k_pair_columns) +
                              "WHERE (?1 = '' OR target = ?1) AND (?2 = '' OR device_spec = ?2) "
                              "ORDER BY id");
    stmt.bind(target).bind(device_spec);
    std::vector<DevicePair> out;
    while (stmt.step()) {
      out.push_back(read_pair(stmt));
    }
    return out;
  });
}

core::Result<std::vector<DevicePair>> SqlCalibrations::pairs_for_run(const std::string& run_id) {
  return m_db->guarded("pairs_for_run", [&] {
    auto stmt = m_db->prepare(std::string(k_pair_columns) + "WHERE run_id = ? ORDER BY id");
    stmt.bind(run_id);
    std::vector<DevicePair> out;
    while (stmt.step()) {
      out.push_back(read_pair(stmt));
    }
    return out;
  });
}

}  // namespace autocomp::search::store
