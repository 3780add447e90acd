#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/result.hpp"
#include "search/store/types.hpp"

// The one owner of the store's SQLite connection, shared by the store's parts (evaluation cache,
// file history, run journal, LLM call log, memory). Internal to search/store: callers use store.hpp
// and the part interfaces.
namespace autocomp::search::store {

// Internal error carrier: thrown inside the store and turned into a Failure value at the public
// boundary (Database::guarded), never seen by callers.
class StoreError : public std::runtime_error {
 public:
  StoreError(core::FailureKind kind, const std::string& message)
      : std::runtime_error(message), m_kind(kind) {}
  core::FailureKind kind() const { return m_kind; }

 private:
  core::FailureKind m_kind;
};

[[noreturn]] void throw_sqlite(sqlite3* db, int rc, std::string_view context);

std::int64_t now_ms();

// A prepared statement borrowed from the connection's cache; reset on destruction so that it can
// be reused and holds no read lock. Binds are positional, in call order.
class Stmt {
 public:
  Stmt(sqlite3* db, sqlite3_stmt* stmt) : m_db(db), m_stmt(stmt) {}
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(std::string_view value);
  Stmt& bind(const std::string& value) { return bind(std::string_view(value)); }
  Stmt& bind(const char* value) { return bind(std::string_view(value)); }
  Stmt& bind_blob(std::string_view value);
  Stmt& bind(std::int64_t value);
  Stmt& bind(int value) { return bind(static_cast<std::int64_t>(value)); }
  Stmt& bind(bool value) { return bind(static_cast<std::int64_t>(value ? 1 : 0)); }
  Stmt& bind(double value);
  Stmt& bind(std::nullopt_t);
  template <class T>
  Stmt& bind(const std::optional<T>& value) {
    if (value.has_value()) {
      return bind(*value);
    }
    return bind(std::nullopt);
  }

  // True when a row is available, false when done; throws on error.
  bool step();
  void run() {
    while (step()) {
    }
  }

  bool is_null(int col) const { return sqlite3_column_type(m_stmt, col) == SQLITE_NULL; }
  std::string text(int col) const;
  std::int64_t int64(int col) const { return sqlite3_column_int64(m_stmt, col); }
  std::vector<double> doubles(int col) const;
  int integer(int col) const { return sqlite3_column_int(m_stmt, col); }
  double real(int col) const { return sqlite3_column_double(m_stmt, col); }
  std::optional<double> opt_real(int col) const {
    return is_null(col) ? std::nullopt : std::optional<double>(real(col));
  }
  std::optional<std::int64_t> opt_int64(int col) const {
    return is_null(col) ? std::nullopt : std::optional<std::int64_t>(int64(col));
  }
  std::optional<std::string> opt_text(int col) const {
    return is_null(col) ? std::nullopt : std::optional<std::string>(text(col));
  }
  std::optional<bool> opt_bool(int col) const {
    return is_null(col) ? std::nullopt : std::optional<bool>(integer(col) != 0);
  }

 private:
  void check(int rc);

  sqlite3* m_db;
  sqlite3_stmt* m_stmt;
  int m_index = 0;
};

class Database {
 public:
  // Opens (creating if needed, with parent folders) and migrates; or, with options.read_only,
  // opens an existing file of the current schema for reading only.
  static core::Result<std::shared_ptr<Database>> open(const std::string& path,
                                                      const StoreOptions& options);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return m_path; }
  const StoreOptions& options() const { return m_options; }
  const std::string& host() const { return m_host; }
  bool read_only() const { return m_read_only; }

  // Only inside guarded():
  Stmt prepare(std::string_view sql);
  void exec(std::string_view sql);
  int changes() const { return sqlite3_changes(m_db); }
  std::int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(m_db); }
  // Fails with invalid_argument when there is no run `run_id`.
  void require_run(const std::string& run_id);

  // Runs `body` in one write transaction (BEGIN IMMEDIATE, so that a busy database is waited for
  // up front rather than failing at the first write); rolls back when it throws.
  template <class F>
  auto transaction(F&& body) -> decltype(body()) {
    exec("BEGIN IMMEDIATE");
    try {
      if constexpr (std::is_void_v<decltype(body())>) {
        body();
        exec("COMMIT");
      } else {
        auto value = body();
        exec("COMMIT");
        return value;
      }
    } catch (...) {
      sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  // Serialises access and converts internal errors into failure values naming `what`.
  template <class F>
  auto guarded(std::string_view what, F&& body) -> core::Result<decltype(body())> {
    std::lock_guard<std::mutex> lock(m_mutex);
    try {
      return body();
    } catch (const StoreError& error) {
      return failure(what, error.kind(), error.what());
    } catch (const nlohmann::json::exception& error) {
      return failure(what, core::FailureKind::io_error,
                     std::string("malformed stored data: ") + error.what());
    }
  }

 private:
  Database() = default;
  static core::Result<std::shared_ptr<Database>> open_read_only(const std::string& path,
                                                                const StoreOptions& options);
  core::Failure failure(std::string_view what, core::FailureKind kind,
                        const std::string& message) const;
  void migrate();
  // sqlite3_trace_v2 callback: passes each statement to StoreOptions::on_statement.
  static int trace_statement(unsigned type, void* context, void* statement, void* sql);

  std::string m_path;
  StoreOptions m_options;
  sqlite3* m_db = nullptr;
  std::mutex m_mutex;
  std::unordered_map<std::string, sqlite3_stmt*> m_statements;
  std::string m_host;
  bool m_read_only = false;
};

}  // namespace autocomp::search::store
