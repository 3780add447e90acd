#include "search/store/database.hpp"

#include <unistd.h>

#include <array>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "search/store/schema.hpp"

namespace autocomp::search::store {

using core::FailureKind;

void throw_sqlite(sqlite3* db, int rc, std::string_view context) {
  const int primary = rc & 0xff;
  const FailureKind kind =
      primary == SQLITE_CONSTRAINT ? FailureKind::invalid_argument : FailureKind::io_error;
  std::string message(context);
  message += ": ";
  message += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) {
    message += " (a referenced candidate, workload, run or evaluation is not stored)";
  }
  throw StoreError(kind, message);
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

std::string this_host() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) {
    return "localhost";
  }
  return std::string(name.data());
}

int latest_version() {
  const auto& steps = migrations();
  return steps.empty() ? 0 : steps.back().version;
}

std::string newer_schema_message(int version) {
  return "the database has schema version " + std::to_string(version) +
         ", newer than this autocomp-mcp understands (" + std::to_string(latest_version()) + ")";
}

}  // namespace

// -- Stmt --------------------------------------------------------------------------------------

Stmt::~Stmt() {
  sqlite3_reset(m_stmt);
  sqlite3_clear_bindings(m_stmt);
}

Stmt& Stmt::bind(std::string_view value) {
  check(sqlite3_bind_text(m_stmt, ++m_index, value.data(), static_cast<int>(value.size()),
                          SQLITE_TRANSIENT));
  return *this;
}

Stmt& Stmt::bind_blob(std::string_view value) {
  check(sqlite3_bind_blob(m_stmt, ++m_index, value.data(), static_cast<int>(value.size()),
                          SQLITE_TRANSIENT));
  return *this;
}

Stmt& Stmt::bind(std::int64_t value) {
  check(sqlite3_bind_int64(m_stmt, ++m_index, value));
  return *this;
}

Stmt& Stmt::bind(double value) {
  check(sqlite3_bind_double(m_stmt, ++m_index, value));
  return *this;
}

Stmt& Stmt::bind(std::nullopt_t) {
  check(sqlite3_bind_null(m_stmt, ++m_index));
  return *this;
}

bool Stmt::step() {
  const int rc = sqlite3_step(m_stmt);
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  throw_sqlite(m_db, sqlite3_extended_errcode(m_db), "step");
}

std::string Stmt::text(int col) const {
  const auto* data = sqlite3_column_text(m_stmt, col);
  const int size = sqlite3_column_bytes(m_stmt, col);
  if (data == nullptr) {
    return {};
  }
  return std::string(reinterpret_cast<const char*>(data), static_cast<std::size_t>(size));
}

std::vector<double> Stmt::doubles(int col) const {
  const void* data = sqlite3_column_blob(m_stmt, col);
  const auto size = static_cast<std::size_t>(sqlite3_column_bytes(m_stmt, col));
  std::vector<double> out(size / sizeof(double));
  if (data != nullptr && !out.empty()) {
    std::memcpy(out.data(), data, out.size() * sizeof(double));
  }
  return out;
}

void Stmt::check(int rc) {
  if (rc != SQLITE_OK) {
    throw_sqlite(m_db, rc, "bind");
  }
}

// -- Database ----------------------------------------------------------------------------------

Database::~Database() {
  for (auto& [sql, stmt] : m_statements) {
    sqlite3_finalize(stmt);
  }
  if (m_db != nullptr) {
    sqlite3_close(m_db);
  }
}

Stmt Database::prepare(std::string_view sql) {
  auto it = m_statements.find(std::string(sql));
  if (it == m_statements.end()) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(m_db, sql.data(), static_cast<int>(sql.size()),
                                      SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) {
      throw_sqlite(m_db, rc, "prepare");
    }
    it = m_statements.emplace(std::string(sql), stmt).first;
  }
  return Stmt(m_db, it->second);
}

void Database::exec(std::string_view sql) {
  const std::string text(sql);
  char* error = nullptr;
  const int rc = sqlite3_exec(m_db, text.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = error != nullptr ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    throw StoreError(
        (rc & 0xff) == SQLITE_CONSTRAINT ? FailureKind::invalid_argument : FailureKind::io_error,
        message);
  }
}

void Database::require_run(const std::string& run_id) {
  auto stmt = prepare("SELECT 1 FROM runs WHERE id = ?");
  stmt.bind(run_id);
  if (!stmt.step()) {
    throw StoreError(FailureKind::invalid_argument, "no run with id '" + run_id + "'");
  }
}

core::Failure Database::failure(std::string_view what, FailureKind kind,
                                const std::string& message) const {
  if (m_read_only && message.find("readonly") != std::string::npos) {
    return core::make_failure(
        FailureKind::io_error, "store",
        std::string(what) + ": the store " + m_path +
            " is open read-only (it could not be opened for writing), so nothing can be "
            "recorded; reading tools still work. Make it writable or choose another database "
            "with --db");
  }
  return core::make_failure(kind, "store", std::string(what) + " (" + m_path + "): " + message);
}

void Database::migrate() {
  auto version = [&] {
    auto stmt = prepare("PRAGMA user_version");
    stmt.step();
    return stmt.integer(0);
  };
  if (version() > latest_version()) {
    throw StoreError(FailureKind::invalid_argument,
                     newer_schema_message(version()) +
                         "; upgrade autocomp-mcp or choose another database with --db");
  }
  for (const auto& step : migrations()) {
    // Re-read inside the transaction: another process may have migrated meanwhile.
    transaction([&] {
      if (version() >= step.version) {
        return;
      }
      exec(step.sql);
      exec("PRAGMA user_version = " + std::to_string(step.version));
    });
  }
}

core::Result<std::shared_ptr<Database>> Database::open_read_only(const std::string& path,
                                                                 const StoreOptions& options) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (path == ":memory:" || !fs::is_regular_file(path, error)) {
    return core::make_failure(FailureKind::io_error, "store",
                              "cannot open database " + path + " read-only: no such file");
  }
  std::shared_ptr<Database> db(new Database());
  db->m_path = path;
  db->m_options = options;
  db->m_host = this_host();
  db->m_read_only = true;
  // immutable=1: the media cannot change under us, so no lock or -shm file is needed (a read-only
  // folder cannot hold one).
  std::string uri = "file:";
  static constexpr char k_hex[] = "0123456789ABCDEF";
  for (unsigned char c : fs::absolute(path, error).string()) {
    if (std::isalnum(c) != 0 || c == '/' || c == '.' || c == '-' || c == '_' || c == '~') {
      uri.push_back(static_cast<char>(c));
    } else {
      uri += {'%', k_hex[c >> 4], k_hex[c & 0xf]};
    }
  }
  uri += "?immutable=1";
  const int rc =
      sqlite3_open_v2(uri.c_str(), &db->m_db,
                      SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db->m_db != nullptr ? sqlite3_errmsg(db->m_db) : sqlite3_errstr(rc);
    return core::make_failure(FailureKind::io_error, "store",
                              "cannot open database " + path + " read-only: " + message);
  }
  sqlite3_extended_result_codes(db->m_db, 1);
  auto ready = db->guarded("open", [&] {
    auto stmt = db->prepare("PRAGMA user_version");
    stmt.step();
    const int version = stmt.integer(0);
    if (version > latest_version()) {
      throw StoreError(FailureKind::invalid_argument, newer_schema_message(version));
    }
    if (version < latest_version()) {
      throw StoreError(FailureKind::io_error,
                       "the database has schema version " + std::to_string(version) +
                           " and cannot be upgraded to " + std::to_string(latest_version()) +
                           " while it is read-only");
    }
    return core::Unit{};
  });
  if (!ready) {
    core::Failure failure = ready.failure();
    failure.message = "cannot open database read-only: " + failure.message;
    return failure;
  }
  return db;
}

int Database::trace_statement(unsigned /*type*/, void* context, void* statement, void* /*sql*/) {
  const auto* db = static_cast<const Database*>(context);
  char* expanded = sqlite3_expanded_sql(static_cast<sqlite3_stmt*>(statement));
  if (expanded != nullptr) {
    db->m_options.on_statement(expanded);
    sqlite3_free(expanded);
  }
  return 0;
}

core::Result<std::shared_ptr<Database>> Database::open(const std::string& path,
                                                       const StoreOptions& options) {
  namespace fs = std::filesystem;
  if (path.empty()) {
    return core::make_failure(FailureKind::invalid_argument, "store", "empty database path");
  }
  if (options.read_only) {
    return open_read_only(path, options);
  }
  const bool in_memory = path == ":memory:";
  if (!in_memory) {
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) {
      std::error_code error;
      fs::create_directories(parent, error);
      if (error) {
        return core::make_failure(
            FailureKind::io_error, "store",
            "cannot create folder " + parent.string() + ": " + error.message());
      }
    }
  }
  std::shared_ptr<Database> db(new Database());
  db->m_path = path;
  db->m_options = options;
  db->m_host = this_host();
  const int rc =
      sqlite3_open_v2(path.c_str(), &db->m_db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db->m_db != nullptr ? sqlite3_errmsg(db->m_db) : sqlite3_errstr(rc);
    return core::make_failure(FailureKind::io_error, "store",
                              "cannot open database " + path + ": " + message);
  }
  sqlite3_extended_result_codes(db->m_db, 1);
  sqlite3_busy_timeout(db->m_db, options.busy_timeout_ms);
  auto ready = db->guarded("open", [&] {
    // Reading the header first turns "not a database" into a clear error.
    db->exec("PRAGMA user_version");
    if (!in_memory) {
      auto stmt = db->prepare("PRAGMA journal_mode = WAL");
      stmt.step();
      const std::string mode = stmt.text(0);
      if (mode != "wal") {
        throw StoreError(FailureKind::io_error, "cannot switch to WAL journal mode (got " + mode +
                                                    "); is the folder on a network file system?");
      }
    }
    // NORMAL in WAL mode: a commit survives the process being killed; only a power loss can
    // roll back the last transactions (the database itself stays consistent).
    db->exec("PRAGMA synchronous = NORMAL");
    db->exec("PRAGMA foreign_keys = ON");
    // Up to 32 MB of pages per connection (allocated as used): cache hits then rarely read the
    // file, which keeps their latency low when the database grows to tens of MB.
    db->exec("PRAGMA cache_size = -32000");
    db->migrate();
    return core::Unit{};
  });
  if (!ready) {
    core::Failure failure = ready.failure();
    failure.message = "cannot open database: " + failure.message;
    return failure;
  }
  if (options.on_statement) {
    sqlite3_trace_v2(db->m_db, SQLITE_TRACE_STMT, &Database::trace_statement, db.get());
  }
  return db;
}

}  // namespace autocomp::search::store
