#include <algorithm>
#include <cmath>

#include "search/store/sql_parts.hpp"

// Optimization memory over SQLite: lessons and reflexions.
namespace autocomp::search::store {
namespace {

using core::FailureKind;

std::optional<std::int64_t> opt_bool_as_int(std::optional<bool> value) {
  if (!value.has_value()) {
    return std::nullopt;
  }
  return *value ? 1 : 0;
}

double lesson_value(double speedup) {
  if (!(speedup > 0) || !std::isfinite(speedup)) {
    return 1.0;
  }
  return std::max(speedup, 1.0 / speedup);
}

}  // namespace

// -- Lessons -----------------------------------------------------------------------------------

core::Result<std::int64_t> SqlMemory::add_lesson(const Lesson& lesson) {
  if (lesson.target.empty() || lesson.text.empty()) {
    return core::make_failure(FailureKind::invalid_argument, "store",
                              "a lesson needs a target and a text");
  }
  return m_db->guarded("add_lesson",
                       [&] { return m_db->transaction([&] { return insert_lesson(lesson); }); });
}

std::int64_t SqlMemory::insert_lesson(const Lesson& lesson) {
  const std::int64_t now = now_ms();
  std::int64_t id = 0;
  {
    auto find = m_db->prepare("SELECT id, speedup FROM lessons WHERE target = ? AND text = ?");
    find.bind(lesson.target).bind(lesson.text);
    if (find.step()) {
      id = find.int64(0);
      const double old_speedup = find.real(1);
      const bool stronger = lesson_value(lesson.speedup) > lesson_value(old_speedup);
      auto update = m_db->prepare(
          "UPDATE lessons SET created_at = ?, speedup = ?, evidence = ?, kind = ?, "
          "source_run = ?, seq = (SELECT max(seq) + 1 FROM lessons) WHERE id = ?");
      update.bind(now);
      if (stronger) {
        update.bind(lesson.speedup).bind(lesson.evidence).bind(lesson.kind).bind(lesson.source_run);
      } else {
        // Keep the stronger evidence already stored.
        update.bind(old_speedup);
        auto keep = m_db->prepare("SELECT evidence, kind, source_run FROM lessons WHERE id = ?");
        keep.bind(id);
        keep.step();
        update.bind(keep.text(0)).bind(keep.text(1)).bind(keep.text(2));
      }
      update.bind(id);
      update.run();
    }
  }
  if (id == 0) {
    auto insert = m_db->prepare(
        "INSERT INTO lessons (target, text, kind, source_run, speedup, evidence, created_at, "
        "problem_key, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 "
        "FROM lessons))");
    insert.bind(lesson.target)
        .bind(lesson.text)
        .bind(lesson.kind)
        .bind(lesson.source_run)
        .bind(std::isfinite(lesson.speedup) ? lesson.speedup : 0.0)
        .bind(lesson.evidence)
        .bind(now)
        .bind(lesson.problem_key);
    insert.run();
    id = m_db->last_insert_rowid();
  }
  // Enforce the bound: evict the least valuable others, oldest first among equals.
  const int limit = std::max(1, m_db->options().lesson_limit);
  struct Entry {
    std::int64_t id;
    double value;
    std::int64_t seq;  // recency: larger is newer
  };
  std::vector<Entry> others;
  {
    auto all = m_db->prepare("SELECT id, speedup, seq FROM lessons WHERE target = ?");
    all.bind(lesson.target);
    while (all.step()) {
      if (all.int64(0) != id) {
        others.push_back({all.int64(0), lesson_value(all.real(1)), all.int64(2)});
      }
    }
  }
  const auto excess = static_cast<std::ptrdiff_t>(others.size() + 1) - limit;
  if (excess > 0) {
    std::sort(others.begin(), others.end(), [](const Entry& a, const Entry& b) {
      if (a.value != b.value) {
        return a.value < b.value;
      }
      return a.seq < b.seq;
    });
    for (std::ptrdiff_t i = 0; i < excess; ++i) {
      auto evict = m_db->prepare("DELETE FROM lessons WHERE id = ?");
      evict.bind(others[static_cast<std::size_t>(i)].id);
      evict.run();
    }
  }
  return id;
}

core::Result<int> SqlMemory::replace_lessons(const std::vector<std::int64_t>& retired,
                                             const std::vector<Lesson>& lessons) {
  for (const auto& lesson : lessons) {
    if (lesson.target.empty() || lesson.text.empty()) {
      return core::make_failure(FailureKind::invalid_argument, "store",
                                "a lesson needs a target and a text");
    }
  }
  return m_db->guarded("replace_lessons", [&] {
    return m_db->transaction([&] {
      int removed = 0;
      for (const auto id : retired) {
        auto remove = m_db->prepare("DELETE FROM lessons WHERE id = ?");
        remove.bind(id);
        remove.run();
        removed += m_db->changes();
      }
      // Recorded last to first, so the list loads (newest first) in the order given.
      for (auto it = lessons.rbegin(); it != lessons.rend(); ++it) {
        insert_lesson(*it);
      }
      return removed;
    });
  });
}

core::Result<std::vector<Lesson>> SqlMemory::lessons(const std::string& target, int limit) {
  return m_db->guarded("lessons", [&] {
    auto stmt = m_db->prepare(
        "SELECT id, target, text, kind, source_run, speedup, evidence, created_at, problem_key "
        "FROM lessons "
        "WHERE ?1 = '' OR target = ?1 ORDER BY seq DESC LIMIT ?2");
    stmt.bind(target).bind(limit);
    std::vector<Lesson> out;
    while (stmt.step()) {
      Lesson lesson;
      lesson.id = stmt.int64(0);
      lesson.target = stmt.text(1);
      lesson.text = stmt.text(2);
      lesson.kind = stmt.text(3);
      lesson.source_run = stmt.text(4);
      lesson.speedup = stmt.real(5);
      lesson.evidence = stmt.text(6);
      lesson.created_at_ms = stmt.int64(7);
      lesson.problem_key = stmt.text(8);
      out.push_back(std::move(lesson));
    }
    return out;
  });
}

core::Result<int> SqlMemory::clear_lessons(const std::string& target) {
  return m_db->guarded("clear_lessons", [&] {
    auto stmt = m_db->prepare("DELETE FROM lessons WHERE ?1 = '' OR target = ?1");
    stmt.bind(target);
    stmt.run();
    return m_db->changes();
  });
}

// -- Reflexions --------------------------------------------------------------------------------

core::Result<std::int64_t> SqlMemory::add_reflexion(const Reflexion& reflexion) {
  if (reflexion.scope.empty()) {
    return core::make_failure(FailureKind::invalid_argument, "store",
                              "a reflexion needs a scope (run id or kernel path)");
  }
  return m_db->guarded("add_reflexion", [&] {
    auto stmt = m_db->prepare(
        "INSERT INTO reflexions (scope, candidate_key, diagnosis_right, fix_worked, expected, "
        "actual, lessons, avoid, try_next, raw_text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?)");
    stmt.bind(reflexion.scope)
        .bind(reflexion.candidate_key)
        .bind(opt_bool_as_int(reflexion.diagnosis_right))
        .bind(opt_bool_as_int(reflexion.fix_worked))
        .bind(reflexion.expected)
        .bind(reflexion.actual)
        .bind(reflexion.lessons)
        .bind(reflexion.avoid)
        .bind(reflexion.try_next)
        .bind(reflexion.raw_text)
        .bind(now_ms());
    stmt.run();
    return static_cast<std::int64_t>(m_db->last_insert_rowid());
  });
}

core::Result<std::vector<Reflexion>> SqlMemory::recent_reflexions(const std::string& scope,
                                                                  int limit) {
  return m_db->guarded("recent_reflexions", [&] {
    auto stmt = m_db->prepare(
        "SELECT id, scope, candidate_key, diagnosis_right, fix_worked, expected, actual, "
        "lessons, avoid, try_next, raw_text, created_at FROM reflexions WHERE scope = ? ORDER BY "
        "id DESC LIMIT ?");
    stmt.bind(scope).bind(limit);
    std::vector<Reflexion> out;
    while (stmt.step()) {
      Reflexion r;
      r.id = stmt.int64(0);
      r.scope = stmt.text(1);
      r.candidate_key = stmt.text(2);
      r.diagnosis_right = stmt.opt_bool(3);
      r.fix_worked = stmt.opt_bool(4);
      r.expected = stmt.text(5);
      r.actual = stmt.text(6);
      r.lessons = stmt.text(7);
      r.avoid = stmt.text(8);
      r.try_next = stmt.text(9);
      r.raw_text = stmt.text(10);
      r.created_at_ms = stmt.int64(11);
      out.push_back(std::move(r));
    }
    return out;
  });
}

}  // namespace autocomp::search::store
