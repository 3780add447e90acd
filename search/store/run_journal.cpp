#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <random>
#include <set>

#include "search/store/sql_parts.hpp"

// The run journal over SQLite: runs, their candidates and beams.
namespace autocomp::search::store {
namespace {

using json = nlohmann::json;
using core::FailureKind;

std::string strings_to_json(const std::vector<std::string>& values) {
  return json(values).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<std::string> strings_from_json(const std::string& text) {
  return json::parse(text).get<std::vector<std::string>>();
}

std::string random_run_id() {
  static thread_local std::mt19937_64 generator{std::random_device{}() ^
                                                static_cast<std::uint64_t>(now_ms())};
  static constexpr char k_hex[] = "0123456789abcdef";
  std::uint64_t bits = generator();
  std::string id;
  for (int i = 0; i < 12; ++i) {
    id.push_back(k_hex[bits & 0xf]);
    bits >>= 4;
  }
  return id;
}

bool process_exists(int pid) {
  if (pid <= 0) {
    return false;
  }
  return kill(pid, 0) == 0 || errno == EPERM;
}

constexpr std::string_view k_run_columns =
    "id, kernel_path, problem_path, problem_key, seed_candidate_key, target, backend, llm_specs, "
    "beam, plans, impls, iterations, dropout, rng_seed, max_llm_calls, max_tokens, max_cost_usd, "
    "max_wall_s, settings, status, status_message, owner_pid, owner_host, created_at, "
    "updated_at, finished_at, iteration, best_candidate_key, best_latency_us, baseline_latency_us";

Run read_run(const Stmt& row) {
  Run run;
  run.id = row.text(0);
  RunConfig& config = run.config;
  config.kernel_path = row.text(1);
  config.problem_path = row.text(2);
  config.problem_key = row.text(3);
  config.seed_candidate_key = row.text(4);
  config.target = row.text(5);
  config.backend = row.text(6);
  config.llm_specs = strings_from_json(row.text(7));
  config.beam = row.integer(8);
  config.plans = row.integer(9);
  config.impls = row.integer(10);
  config.iterations = row.integer(11);
  config.dropout = row.real(12);
  config.rng_seed = std::strtoull(row.text(13).c_str(), nullptr, 10);
  if (!row.is_null(14)) {
    config.budgets.max_llm_calls = static_cast<long>(row.int64(14));
  }
  if (!row.is_null(15)) {
    config.budgets.max_tokens = static_cast<long>(row.int64(15));
  }
  config.budgets.max_cost_usd = row.opt_real(16);
  config.budgets.max_wall_s = row.opt_real(17);
  config.settings = row.text(18);
  run.status = run_status_from_string(row.text(19)).value_or(RunStatus::interrupted);
  run.status_message = row.text(20);
  run.owner_pid = row.integer(21);
  run.owner_host = row.text(22);
  run.created_at_ms = row.int64(23);
  run.updated_at_ms = row.int64(24);
  run.finished_at_ms = row.opt_int64(25);
  run.iteration = row.integer(26);
  run.best_candidate_key = row.opt_text(27);
  run.best_latency_us = row.opt_real(28);
  run.baseline_latency_us = row.opt_real(29);
  return run;
}

constexpr std::string_view k_run_candidate_columns =
    "run_id, iteration, candidate_key, parent_key, plan_text, provider, status, evaluation_id, "
    "median_us, correct, note, created_at, updated_at, origin";

RunCandidate read_run_candidate(const Stmt& row) {
  RunCandidate out;
  out.run_id = row.text(0);
  out.iteration = row.integer(1);
  out.candidate_key = row.text(2);
  out.parent_key = row.text(3);
  out.plan_text = row.text(4);
  out.provider = row.text(5);
  out.status = candidate_status_from_string(row.text(6)).value_or(CandidateStatus::proposed);
  out.evaluation_id = row.opt_int64(7);
  out.median_us = row.opt_real(8);
  out.correct = row.integer(9) != 0;
  out.note = row.text(10);
  out.created_at_ms = row.int64(11);
  out.updated_at_ms = row.int64(12);
  out.origin = row.text(13);
  return out;
}

std::optional<RunCandidate> run_candidate(Database& db, const std::string& run_id,
                                          const std::string& key) {
  auto stmt = db.prepare("SELECT " + std::string(k_run_candidate_columns) +
                         " FROM run_candidates WHERE run_id = ? AND candidate_key = ?");
  stmt.bind(run_id).bind(key);
  if (!stmt.step()) {
    return std::nullopt;
  }
  return read_run_candidate(stmt);
}

}  // namespace

namespace {
constexpr std::array<std::pair<RunStatus, std::string_view>, 6> k_run_status_names{{
    {RunStatus::running, "running"},
    {RunStatus::completed, "completed"},
    {RunStatus::budget_exhausted, "budget_exhausted"},
    {RunStatus::cancelled, "cancelled"},
    {RunStatus::failed, "failed"},
    {RunStatus::interrupted, "interrupted"},
}};
constexpr std::array<std::pair<CandidateStatus, std::string_view>, 6> k_candidate_status_names{{
    {CandidateStatus::proposed, "proposed"},
    {CandidateStatus::evaluated, "evaluated"},
    {CandidateStatus::accepted, "accepted"},
    {CandidateStatus::rejected, "rejected"},
    {CandidateStatus::failed, "failed"},
    {CandidateStatus::duplicate, "duplicate"},
}};
}  // namespace

std::string_view to_string(RunStatus status) {
  for (const auto& [value, name] : k_run_status_names) {
    if (value == status) {
      return name;
    }
  }
  return "failed";
}

std::optional<RunStatus> run_status_from_string(std::string_view name) {
  for (const auto& [value, n] : k_run_status_names) {
    if (n == name) {
      return value;
    }
  }
  return std::nullopt;
}

std::string_view to_string(CandidateStatus status) {
  for (const auto& [value, name] : k_candidate_status_names) {
    if (value == status) {
      return name;
    }
  }
  return "proposed";
}

std::optional<CandidateStatus> candidate_status_from_string(std::string_view name) {
  for (const auto& [value, n] : k_candidate_status_names) {
    if (n == name) {
      return value;
    }
  }
  return std::nullopt;
}

core::Result<std::string> SqlRunJournal::create_run(const RunConfig& config) {
  const json settings = json::parse(config.settings, nullptr, false);
  if (!settings.is_object()) {
    return core::make_failure(FailureKind::invalid_argument, "store",
                              "create_run: a run's settings must be a JSON object");
  }
  return m_db->guarded("create_run", [&] {
    return m_db->transaction([&] {
      std::string id;
      for (int attempt = 0;; ++attempt) {
        id = random_run_id();
        auto exists = m_db->prepare("SELECT 1 FROM runs WHERE id = ?");
        exists.bind(id);
        if (!exists.step()) {
          break;
        }
        if (attempt > 16) {
          throw StoreError(FailureKind::internal, "cannot draw an unused run id");
        }
      }
      const std::int64_t now = now_ms();
      auto stmt = m_db->prepare(
          "INSERT INTO runs (id, kernel_path, problem_path, problem_key, seed_candidate_key, "
          "target, backend, llm_specs, beam, plans, impls, iterations, dropout, rng_seed, "
          "max_llm_calls, max_tokens, max_cost_usd, max_wall_s, settings, status, "
          "status_message, owner_pid, owner_host, created_at, updated_at) VALUES (?, ?, ?, ?, ?, "
          "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', '', ?, ?, ?, ?)");
      stmt.bind(id)
          .bind(config.kernel_path)
          .bind(config.problem_path)
          .bind(config.problem_key)
          .bind(config.seed_candidate_key)
          .bind(config.target)
          .bind(config.backend)
          .bind(strings_to_json(config.llm_specs))
          .bind(config.beam)
          .bind(config.plans)
          .bind(config.impls)
          .bind(config.iterations)
          .bind(config.dropout)
          .bind(std::to_string(config.rng_seed));
      if (config.budgets.max_llm_calls) {
        stmt.bind(static_cast<std::int64_t>(*config.budgets.max_llm_calls));
      } else {
        stmt.bind(std::nullopt);
      }
      if (config.budgets.max_tokens) {
        stmt.bind(static_cast<std::int64_t>(*config.budgets.max_tokens));
      } else {
        stmt.bind(std::nullopt);
      }
      stmt.bind(config.budgets.max_cost_usd)
          .bind(config.budgets.max_wall_s)
          .bind(config.settings)
          .bind(static_cast<int>(getpid()))
          .bind(m_db->host())
          .bind(now)
          .bind(now);
      stmt.run();
      return id;
    });
  });
}

core::Result<std::optional<Run>> SqlRunJournal::get_run(const std::string& run_id) {
  return m_db->guarded("get_run", [&]() -> std::optional<Run> {
    {
      auto stmt = m_db->prepare("SELECT " + std::string(k_run_columns) + " FROM runs WHERE id = ?");
      stmt.bind(run_id);
      if (stmt.step()) {
        return read_run(stmt);
      }
    }
    if (run_id.size() < 4 || run_id.size() >= 12 ||
        run_id.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return std::nullopt;
    }
    auto stmt = m_db->prepare("SELECT " + std::string(k_run_columns) +
                              " FROM runs WHERE substr(id, 1, length(?1)) = ?1 LIMIT 2");
    stmt.bind(run_id);
    if (!stmt.step()) {
      return std::nullopt;
    }
    Run run = read_run(stmt);
    if (stmt.step()) {
      throw StoreError(FailureKind::invalid_argument,
                       "run id prefix '" + run_id + "' is ambiguous; give more characters");
    }
    return run;
  });
}

core::Result<std::vector<Run>> SqlRunJournal::list_runs(int limit) {
  return m_db->guarded("list_runs", [&] {
    auto stmt = m_db->prepare("SELECT " + std::string(k_run_columns) +
                              " FROM runs ORDER BY created_at DESC, rowid DESC LIMIT ?");
    stmt.bind(limit);
    std::vector<Run> out;
    while (stmt.step()) {
      out.push_back(read_run(stmt));
    }
    return out;
  });
}

core::Status SqlRunJournal::set_run_status(const std::string& run_id, RunStatus status,
                                           const std::string& message) {
  return m_db->guarded("set_run_status", [&] {
    const std::int64_t now = now_ms();
    const bool finished = status != RunStatus::running;
    auto stmt = m_db->prepare(
        "UPDATE runs SET status = ?, status_message = ?, updated_at = ?, finished_at = ? "
        "WHERE id = ?");
    stmt.bind(to_string(status)).bind(message).bind(now);
    if (finished) {
      stmt.bind(now);
    } else {
      stmt.bind(std::nullopt);
    }
    stmt.bind(run_id);
    stmt.run();
    if (m_db->changes() == 0) {
      throw StoreError(FailureKind::invalid_argument, "no run with id '" + run_id + "'");
    }
    return core::Unit{};
  });
}

core::Status SqlRunJournal::claim_run(const std::string& run_id) {
  return m_db->guarded("claim_run", [&] {
    auto stmt = m_db->prepare(
        "UPDATE runs SET status = 'running', status_message = '', owner_pid = ?, owner_host = ?, "
        "updated_at = ?, finished_at = NULL WHERE id = ?");
    stmt.bind(static_cast<int>(getpid())).bind(m_db->host()).bind(now_ms()).bind(run_id);
    stmt.run();
    if (m_db->changes() == 0) {
      throw StoreError(FailureKind::invalid_argument, "no run with id '" + run_id + "'");
    }
    return core::Unit{};
  });
}

core::Result<std::vector<std::string>> SqlRunJournal::interrupt_orphaned_runs() {
  return m_db->guarded("interrupt_orphaned_runs", [&] {
    return m_db->transaction([&] {
      std::vector<std::string> orphans;
      {
        auto stmt = m_db->prepare(
            "SELECT id, owner_pid FROM runs WHERE status = 'running' AND owner_host = ?");
        stmt.bind(m_db->host());
        while (stmt.step()) {
          const int pid = stmt.integer(1);
          if (pid != static_cast<int>(getpid()) && !process_exists(pid)) {
            orphans.push_back(stmt.text(0));
          }
        }
      }
      const std::int64_t now = now_ms();
      for (const auto& id : orphans) {
        auto stmt = m_db->prepare(
            "UPDATE runs SET status = 'interrupted', status_message = 'the process running it "
            "ended without finishing', updated_at = ?, finished_at = ? WHERE id = ?");
        stmt.bind(now).bind(now).bind(id);
        stmt.run();
      }
      return orphans;
    });
  });
}

core::Status SqlRunJournal::set_run_progress(const std::string& run_id, int iteration,
                                             const std::optional<std::string>& best_candidate_key,
                                             std::optional<double> best_latency_us,
                                             std::optional<double> baseline_latency_us) {
  return m_db->guarded("set_run_progress", [&] {
    auto stmt = m_db->prepare(
        "UPDATE runs SET iteration = ?, best_candidate_key = ?, best_latency_us = ?, "
        "baseline_latency_us = coalesce(?, baseline_latency_us), updated_at = ? WHERE id = ?");
    stmt.bind(iteration)
        .bind(best_candidate_key)
        .bind(best_latency_us)
        .bind(baseline_latency_us)
        .bind(now_ms())
        .bind(run_id);
    stmt.run();
    if (m_db->changes() == 0) {
      throw StoreError(FailureKind::invalid_argument, "no run with id '" + run_id + "'");
    }
    return core::Unit{};
  });
}

core::Status SqlRunJournal::record_beam(const std::string& run_id, int iteration,
                                        const std::vector<std::string>& candidate_keys) {
  return m_db->guarded("record_beam", [&] {
    m_db->transaction([&] {
      m_db->require_run(run_id);
      {
        auto stmt = m_db->prepare("DELETE FROM beams WHERE run_id = ? AND iteration = ?");
        stmt.bind(run_id).bind(iteration);
        stmt.run();
      }
      int position = 0;
      for (const auto& key : candidate_keys) {
        auto stmt = m_db->prepare(
            "INSERT INTO beams (run_id, iteration, position, candidate_key) VALUES (?, ?, ?, ?)");
        stmt.bind(run_id).bind(iteration).bind(position++).bind(key);
        stmt.run();
      }
      auto touch = m_db->prepare("UPDATE runs SET updated_at = ? WHERE id = ?");
      touch.bind(now_ms()).bind(run_id);
      touch.run();
    });
    return core::Unit{};
  });
}

core::Status SqlRunJournal::record_iteration(const std::string& run_id,
                                             const IterationRecord& record) {
  return m_db->guarded("record_iteration", [&] {
    m_db->transaction([&] {
      m_db->require_run(run_id);
      const std::int64_t now = now_ms();
      for (const auto& child : record.children) {
        const RunCandidate& row = child.row;
        put_candidate_source(*m_db, child.source, row.provider);
        // A row already in the run (a resumed iteration, or a key seen before) keeps its lineage;
        // a non-duplicate brings its status and evaluation up to date.
        auto stmt = m_db->prepare(
            "INSERT INTO run_candidates (run_id, candidate_key, iteration, parent_key, plan_text, "
            "provider, status, evaluation_id, median_us, correct, note, created_at, updated_at, "
            "origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, "
            "candidate_key) DO UPDATE SET status = excluded.status, evaluation_id = "
            "coalesce(excluded.evaluation_id, evaluation_id), median_us = CASE WHEN "
            "excluded.evaluation_id IS NOT NULL THEN excluded.median_us ELSE median_us END, "
            "correct = CASE WHEN excluded.evaluation_id IS NOT NULL THEN excluded.correct ELSE "
            "correct END, updated_at = excluded.updated_at WHERE excluded.status != 'duplicate'");
        stmt.bind(run_id)
            .bind(row.candidate_key)
            .bind(row.iteration)
            .bind(row.parent_key)
            .bind(row.plan_text)
            .bind(row.provider)
            .bind(to_string(row.status))
            .bind(row.evaluation_id)
            .bind(row.median_us)
            .bind(row.correct)
            .bind(row.note)
            .bind(now)
            .bind(now)
            .bind(row.origin);
        stmt.run();
      }
      if (record.beam) {
        {
          auto stmt = m_db->prepare("DELETE FROM beams WHERE run_id = ? AND iteration = ?");
          stmt.bind(run_id).bind(record.iteration);
          stmt.run();
        }
        int position = 0;
        for (const auto& key : *record.beam) {
          auto stmt = m_db->prepare(
              "INSERT INTO beams (run_id, iteration, position, candidate_key) VALUES (?, ?, ?, ?)");
          stmt.bind(run_id).bind(record.iteration).bind(position++).bind(key);
          stmt.run();
        }
      }
      if (record.progress) {
        const RunProgress& progress = *record.progress;
        auto stmt = m_db->prepare(
            "UPDATE runs SET iteration = ?, best_candidate_key = ?, best_latency_us = ?, "
            "baseline_latency_us = coalesce(?, baseline_latency_us), updated_at = ? WHERE id = ?");
        stmt.bind(progress.iteration)
            .bind(progress.best_candidate_key)
            .bind(progress.best_latency_us)
            .bind(progress.baseline_latency_us)
            .bind(now)
            .bind(run_id);
        stmt.run();
      } else {
        auto touch = m_db->prepare("UPDATE runs SET updated_at = ? WHERE id = ?");
        touch.bind(now).bind(run_id);
        touch.run();
      }
    });
    return core::Unit{};
  });
}

core::Result<std::vector<Beam>> SqlRunJournal::get_beams(const std::string& run_id) {
  return m_db->guarded("get_beams", [&] {
    auto stmt = m_db->prepare(
        "SELECT iteration, candidate_key FROM beams WHERE run_id = ? ORDER BY iteration, "
        "position");
    stmt.bind(run_id);
    std::vector<Beam> out;
    while (stmt.step()) {
      const int iteration = stmt.integer(0);
      if (out.empty() || out.back().iteration != iteration) {
        out.push_back(Beam{iteration, {}});
      }
      out.back().members.push_back(stmt.text(1));
    }
    return out;
  });
}

core::Result<bool> SqlRunJournal::add_run_candidate(const RunCandidate& candidate) {
  return m_db->guarded("add_run_candidate", [&] {
    m_db->require_run(candidate.run_id);
    std::optional<double> median;
    bool correct = candidate.correct;
    if (candidate.evaluation_id) {
      auto evaluation = evaluation_by_id(*m_db, *candidate.evaluation_id);
      if (!evaluation) {
        throw StoreError(FailureKind::invalid_argument,
                         "no evaluation with id " + std::to_string(*candidate.evaluation_id));
      }
      if (evaluation->result.latency) {
        median = evaluation->result.latency->median_us;
      }
      correct = evaluation->result.correct && evaluation->result.ok();
    }
    if (candidate.median_us) {
      median = candidate.median_us;
    }
    const std::int64_t now = now_ms();
    auto stmt = m_db->prepare(
        "INSERT INTO run_candidates (run_id, candidate_key, iteration, parent_key, plan_text, "
        "provider, status, evaluation_id, median_us, correct, note, created_at, updated_at, "
        "origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, "
        "candidate_key) DO "
        "NOTHING");
    stmt.bind(candidate.run_id)
        .bind(candidate.candidate_key)
        .bind(candidate.iteration)
        .bind(candidate.parent_key)
        .bind(candidate.plan_text)
        .bind(candidate.provider)
        .bind(to_string(candidate.status))
        .bind(candidate.evaluation_id)
        .bind(median)
        .bind(correct)
        .bind(candidate.note)
        .bind(now)
        .bind(now)
        .bind(candidate.origin);
    stmt.run();
    return m_db->changes() > 0;
  });
}

core::Status SqlRunJournal::update_run_candidate(const std::string& run_id,
                                                 const std::string& candidate_key,
                                                 CandidateStatus status,
                                                 std::optional<std::int64_t> evaluation_id,
                                                 const std::string& note) {
  return m_db->guarded("update_run_candidate", [&] {
    std::optional<double> median;
    std::optional<bool> correct;
    if (evaluation_id) {
      auto evaluation = evaluation_by_id(*m_db, *evaluation_id);
      if (!evaluation) {
        throw StoreError(FailureKind::invalid_argument,
                         "no evaluation with id " + std::to_string(*evaluation_id));
      }
      if (evaluation->result.latency) {
        median = evaluation->result.latency->median_us;
      }
      correct = evaluation->result.correct && evaluation->result.ok();
    }
    // Without an evaluation id the linked evaluation (and its figures) stay as they were.
    auto stmt = m_db->prepare(
        "UPDATE run_candidates SET status = ?, evaluation_id = coalesce(?, evaluation_id), "
        "median_us = CASE WHEN ? THEN ? ELSE median_us END, correct = coalesce(?, correct), "
        "note = CASE WHEN ? != '' THEN ? ELSE note END, updated_at = ? WHERE run_id = ? AND "
        "candidate_key = ?");
    stmt.bind(to_string(status))
        .bind(evaluation_id)
        .bind(evaluation_id.has_value())
        .bind(median)
        .bind(correct)
        .bind(note)
        .bind(note)
        .bind(now_ms())
        .bind(run_id)
        .bind(candidate_key);
    stmt.run();
    if (m_db->changes() == 0) {
      throw StoreError(FailureKind::invalid_argument,
                       "candidate " + candidate_key + " is not part of run '" + run_id + "'");
    }
    return core::Unit{};
  });
}

core::Result<std::optional<RunCandidate>> SqlRunJournal::get_run_candidate(
    const std::string& run_id, const std::string& candidate_key) {
  return m_db->guarded("get_run_candidate",
                       [&] { return run_candidate(*m_db, run_id, candidate_key); });
}

core::Result<std::vector<RunCandidate>> SqlRunJournal::run_candidates(const std::string& run_id) {
  return m_db->guarded("run_candidates", [&] {
    auto stmt = m_db->prepare("SELECT " + std::string(k_run_candidate_columns) +
                              " FROM run_candidates WHERE run_id = ? ORDER BY id");
    stmt.bind(run_id);
    std::vector<RunCandidate> out;
    while (stmt.step()) {
      out.push_back(read_run_candidate(stmt));
    }
    return out;
  });
}

core::Result<std::vector<RunCandidate>> SqlRunJournal::lineage(const std::string& run_id,
                                                               const std::string& candidate_key) {
  return m_db->guarded("lineage", [&] {
    std::vector<RunCandidate> chain;
    std::set<std::string> seen;
    std::string key = candidate_key;
    while (!key.empty() && seen.insert(key).second) {
      auto candidate = run_candidate(*m_db, run_id, key);
      if (!candidate) {
        break;
      }
      key = candidate->parent_key;
      chain.push_back(std::move(*candidate));
    }
    std::reverse(chain.begin(), chain.end());
    return chain;
  });
}

core::Result<RunCounts> SqlRunJournal::run_counts(const std::string& run_id) {
  return m_db->guarded("run_counts", [&] {
    auto stmt = m_db->prepare(
        "SELECT status, count(*) FROM run_candidates WHERE run_id = ? GROUP BY status");
    stmt.bind(run_id);
    RunCounts counts;
    while (stmt.step()) {
      const int n = stmt.integer(1);
      counts.candidates += n;
      switch (candidate_status_from_string(stmt.text(0)).value_or(CandidateStatus::proposed)) {
        case CandidateStatus::proposed:
          break;
        case CandidateStatus::evaluated:
          counts.evaluated += n;
          break;
        case CandidateStatus::accepted:
          counts.evaluated += n;
          counts.accepted += n;
          break;
        case CandidateStatus::rejected:
          counts.evaluated += n;
          counts.rejected += n;
          break;
        case CandidateStatus::failed:
          counts.evaluated += n;
          counts.failed += n;
          break;
        case CandidateStatus::duplicate:
          counts.duplicates += n;
          break;
      }
    }
    return counts;
  });
}

core::Result<std::optional<BestVersion>> SqlRunJournal::best_for_run(const std::string& run_id) {
  return m_db->guarded("best_for_run", [&]() -> std::optional<BestVersion> {
    m_db->require_run(run_id);
    // The evaluations the run itself used, as linked from its candidates.
    const std::string from = std::string(best_select()) +
                             "JOIN run_candidates r ON r.evaluation_id = e.id WHERE r.run_id = ?" +
                             std::string(best_where());
    auto stmt = m_db->prepare(from + "ORDER BY e.latency_median_us ASC, e.id DESC LIMIT 1");
    stmt.bind(run_id);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return read_best(stmt);
  });
}

}  // namespace autocomp::search::store
