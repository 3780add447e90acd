#include "search/store/sql_parts.hpp"

// The kernel file history over SQLite (revert_to_best).
namespace autocomp::search::store {

// The qualifying evaluations of a set of candidates (correct, no failure, a latency) on one
// problem and target. When no backend is named, the backend of the newest qualifying evaluation
// is used, so that simulated and measured latencies are never compared with each other.
namespace {
constexpr std::string_view k_best_select =
    "SELECT e.id, e.candidate_key, c.source, e.latency_median_us, e.backend_identity, e.device, "
    "e.created_at FROM evaluations e JOIN candidates c ON c.key = e.candidate_key ";
constexpr std::string_view k_best_where =
    " AND e.correct = 1 AND e.failure_kind IS NULL AND e.latency_median_us IS NOT NULL ";

}  // namespace

std::string_view best_select() {
  return k_best_select;
}

std::string_view best_where() {
  return k_best_where;
}

BestVersion read_best(const Stmt& row) {
  BestVersion best;
  best.evaluation_id = row.int64(0);
  best.candidate_key = row.text(1);
  best.source = row.text(2);
  best.median_us = row.real(3);
  best.backend_identity = row.text(4);
  best.device = row.text(5);
  best.evaluated_at_ms = row.int64(6);
  return best;
}

core::Status SqlFileHistory::record_file_version(const std::string& abs_path,
                                                 const std::string& candidate_key,
                                                 const std::string& problem_key,
                                                 const std::string& target) {
  return m_db->guarded("record_file_version", [&] {
    auto stmt = m_db->prepare(
        "INSERT INTO file_versions (path, candidate_key, problem_key, target, recorded_at, seq) "
        "VALUES (?1, ?2, ?3, ?4, ?5, (SELECT coalesce(max(seq), 0) + 1 FROM file_versions "
        "WHERE path = ?1)) "
        "ON CONFLICT (path, candidate_key, problem_key, target) DO UPDATE "
        "SET recorded_at = excluded.recorded_at, seq = excluded.seq");
    stmt.bind(abs_path).bind(candidate_key).bind(problem_key).bind(target).bind(now_ms());
    stmt.run();
    return core::Unit{};
  });
}

core::Result<std::vector<FileVersion>> SqlFileHistory::file_versions(const std::string& abs_path,
                                                                     int limit) {
  return m_db->guarded("file_versions", [&] {
    auto stmt = m_db->prepare(
        "SELECT id, path, candidate_key, problem_key, target, recorded_at FROM file_versions "
        "WHERE path = ? ORDER BY seq DESC LIMIT ?");
    stmt.bind(abs_path).bind(limit);
    std::vector<FileVersion> out;
    while (stmt.step()) {
      out.push_back(FileVersion{stmt.int64(0), stmt.text(1), stmt.text(2), stmt.text(3),
                                stmt.text(4), stmt.int64(5)});
    }
    return out;
  });
}

core::Result<std::optional<BestVersion>> SqlFileHistory::best_for_file(
    const std::string& abs_path, const std::string& problem_key, const std::string& target,
    const std::string& backend_identity) {
  return m_db->guarded("best_for_file", [&]() -> std::optional<BestVersion> {
    const std::string from =
        std::string(best_select()) +
        "JOIN file_versions f ON f.candidate_key = e.candidate_key AND f.problem_key = "
        "e.problem_key AND f.target = e.target WHERE f.path = ? AND f.problem_key = ? AND "
        "f.target = ?" +
        std::string(best_where());
    std::string backend = backend_identity;
    if (backend.empty()) {
      auto newest = m_db->prepare(from + "ORDER BY e.id DESC LIMIT 1");
      newest.bind(abs_path).bind(problem_key).bind(target);
      if (!newest.step()) {
        return std::nullopt;
      }
      backend = newest.text(4);
    }
    auto stmt = m_db->prepare(from +
                              "AND e.backend_identity = ? ORDER BY e.latency_median_us ASC, "
                              "e.id DESC LIMIT 1");
    stmt.bind(abs_path).bind(problem_key).bind(target).bind(backend);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return read_best(stmt);
  });
}

}  // namespace autocomp::search::store
