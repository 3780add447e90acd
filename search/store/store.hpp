#pragma once

#include <memory>
#include <string>

#include "core/result.hpp"
#include "search/store/calibrations.hpp"
#include "search/store/evaluation_cache.hpp"
#include "search/store/file_history.hpp"
#include "search/store/llm_call_log.hpp"
#include "search/store/memory.hpp"
#include "search/store/run_journal.hpp"
#include "search/store/types.hpp"

// The SQLite store: the one database that records workloads, candidate kernels, evaluations (the
// evaluation cache), kernel file versions, search runs with their beams, candidates and LLM calls,
// optimization memory, and calibration profiles with the device measurements behind them.
// docs/store.md describes the schema, keys and durability.
//
// A Store owns the connection; callers use the part they need (evaluations(), files(), runs(),
// llm_calls(), memory()) and depend only on that part's interface. Contract shared by every part:
// - Thread-safe: one connection guarded by a mutex; several processes may open the same file (WAL,
//   busy timeout).
// - Every write is committed before the method returns; a multi-row write is one transaction, so a
//   kill -9 leaves either all of it or none of it.
// - Default arguments are declared on the interfaces only (callers hold the interfaces).
// - Failures are values: io_error for database trouble (disk full, locked past the busy timeout,
//   corrupt file), invalid_argument for a bad argument or a reference to a row that does not exist.
namespace autocomp::search::store {

class Database;
class SqlEvaluationCache;
class SqlFileHistory;
class SqlRunJournal;
class SqlLlmCallLog;
class SqlMemory;
class SqlCalibrations;

class Store {
 public:
  // Opens (creating if needed, with parent folders) and migrates the database at `path`.
  // ":memory:" gives a private in-memory store. Fails with io_error when the file cannot be opened
  // or is not a database, and with invalid_argument when it was written by a newer version.
  static core::Result<std::unique_ptr<Store>> open(const std::string& path,
                                                   const StoreOptions& options = {});
  // $XDG_DATA_HOME/autocomp-mcp/autocomp.db, else $HOME/.local/share/autocomp-mcp/autocomp.db.
  static std::string default_path();
  // The schema version this build writes.
  static int schema_version();

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const;
  // Whether the store was opened with StoreOptions::read_only.
  bool read_only() const;

  EvaluationCache& evaluations();
  FileHistory& files();
  RunJournal& runs();
  LlmCallLog& llm_calls();
  Memory& memory();
  Calibrations& calibrations();

 private:
  explicit Store(std::shared_ptr<Database> db);

  std::shared_ptr<Database> m_db;
  std::unique_ptr<SqlEvaluationCache> m_evaluations;
  std::unique_ptr<SqlFileHistory> m_files;
  std::unique_ptr<SqlRunJournal> m_runs;
  std::unique_ptr<SqlLlmCallLog> m_llm_calls;
  std::unique_ptr<SqlMemory> m_memory;
  std::unique_ptr<SqlCalibrations> m_calibrations;
};

// One part of a shared store as a shared pointer that keeps the whole store alive, e.g.
// share(db, db->evaluations()).
template <class Part>
std::shared_ptr<Part> share(const std::shared_ptr<Store>& store, Part& part) {
  return std::shared_ptr<Part>(store, &part);
}

}  // namespace autocomp::search::store
