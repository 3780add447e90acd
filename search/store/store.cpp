#include "search/store/store.hpp"

#include <cstdlib>
#include <filesystem>

#include "search/store/schema.hpp"
#include "search/store/sql_parts.hpp"

namespace autocomp::search::store {

Store::Store(std::shared_ptr<Database> db)
    : m_db(std::move(db)),
      m_evaluations(std::make_unique<SqlEvaluationCache>(m_db)),
      m_files(std::make_unique<SqlFileHistory>(m_db)),
      m_runs(std::make_unique<SqlRunJournal>(m_db)),
      m_llm_calls(std::make_unique<SqlLlmCallLog>(m_db)),
      m_memory(std::make_unique<SqlMemory>(m_db)),
      m_calibrations(std::make_unique<SqlCalibrations>(m_db)) {}

Store::~Store() = default;

core::Result<std::unique_ptr<Store>> Store::open(const std::string& path,
                                                 const StoreOptions& options) {
  auto db = Database::open(path, options);
  if (!db) {
    return db.failure();
  }
  return std::unique_ptr<Store>(new Store(std::move(db).value()));
}

std::string Store::default_path() {
  namespace fs = std::filesystem;
  fs::path base;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && xdg[0] == '/') {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
    base = fs::path(home) / ".local" / "share";
  } else {
    base = fs::current_path();
  }
  return (base / "autocomp-mcp" / "autocomp.db").string();
}

int Store::schema_version() {
  const auto& steps = migrations();
  return steps.empty() ? 0 : steps.back().version;
}

const std::string& Store::path() const {
  return m_db->path();
}

bool Store::read_only() const {
  return m_db->read_only();
}

EvaluationCache& Store::evaluations() {
  return *m_evaluations;
}

FileHistory& Store::files() {
  return *m_files;
}

RunJournal& Store::runs() {
  return *m_runs;
}

LlmCallLog& Store::llm_calls() {
  return *m_llm_calls;
}

Memory& Store::memory() {
  return *m_memory;
}

Calibrations& Store::calibrations() {
  return *m_calibrations;
}

}  // namespace autocomp::search::store
