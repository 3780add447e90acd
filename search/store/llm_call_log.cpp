#include "search/store/sql_parts.hpp"

// The LLM call log over SQLite.
namespace autocomp::search::store {
namespace {

constexpr std::string_view k_llm_columns =
    "run_id, request_hash, purpose, provider, prompt, response, input_tokens, output_tokens, "
    "cost_usd, latency_ms, attempts, created_at, origin";

LlmCall read_llm_call(const Stmt& row) {
  LlmCall call;
  call.run_id = row.text(0);
  call.request_hash = row.text(1);
  call.purpose = row.text(2);
  call.provider = row.text(3);
  call.prompt = row.text(4);
  call.response = row.text(5);
  call.usage.input_tokens = static_cast<long>(row.int64(6));
  call.usage.output_tokens = static_cast<long>(row.int64(7));
  call.usage.cost_usd = row.real(8);
  call.latency_ms = row.real(9);
  call.attempts = row.integer(10);
  call.created_at_ms = row.int64(11);
  call.origin = row.text(12);
  return call;
}

}  // namespace

core::Result<std::optional<LlmCall>> SqlLlmCallLog::find_llm_response(
    const std::string& run_id, const std::string& request_hash) {
  return m_db->guarded("find_llm_response", [&]() -> std::optional<LlmCall> {
    auto stmt = m_db->prepare("SELECT " + std::string(k_llm_columns) +
                              " FROM llm_calls WHERE run_id = ? AND request_hash = ?");
    stmt.bind(run_id).bind(request_hash);
    if (!stmt.step()) {
      return std::nullopt;
    }
    return read_llm_call(stmt);
  });
}

core::Result<std::int64_t> SqlLlmCallLog::put_llm_call(const LlmCall& call) {
  return m_db->guarded("put_llm_call", [&] {
    return m_db->transaction([&]() -> std::int64_t {
      if (!call.run_id.empty()) {
        m_db->require_run(call.run_id);
      }
      auto stmt = m_db->prepare(
          "INSERT INTO llm_calls (run_id, request_hash, purpose, provider, prompt, response, "
          "input_tokens, output_tokens, cost_usd, latency_ms, attempts, created_at, origin) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, request_hash) DO "
          "NOTHING");
      stmt.bind(call.run_id)
          .bind(call.request_hash)
          .bind(call.purpose)
          .bind(call.provider)
          .bind(call.prompt)
          .bind(call.response)
          .bind(static_cast<std::int64_t>(call.usage.input_tokens))
          .bind(static_cast<std::int64_t>(call.usage.output_tokens))
          .bind(call.usage.cost_usd)
          .bind(call.latency_ms)
          .bind(call.attempts)
          .bind(now_ms())
          .bind(call.origin);
      stmt.run();
      if (m_db->changes() > 0) {
        return m_db->last_insert_rowid();
      }
      auto existing =
          m_db->prepare("SELECT id FROM llm_calls WHERE run_id = ? AND request_hash = ?");
      existing.bind(call.run_id).bind(call.request_hash);
      existing.step();
      return existing.int64(0);
    });
  });
}

core::Result<LlmTotals> SqlLlmCallLog::llm_totals(const std::string& run_id) {
  return m_db->guarded("llm_totals", [&] {
    auto stmt = m_db->prepare(
        "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(cost_usd), 0) FROM llm_calls WHERE run_id = ?");
    stmt.bind(run_id);
    stmt.step();
    return LlmTotals{static_cast<long>(stmt.int64(0)), static_cast<long>(stmt.int64(1)),
                     static_cast<long>(stmt.int64(2)), stmt.real(3)};
  });
}

core::Result<std::vector<LlmCall>> SqlLlmCallLog::llm_calls(const std::string& run_id) {
  return m_db->guarded("llm_calls", [&] {
    auto stmt = m_db->prepare("SELECT " + std::string(k_llm_columns) +
                              " FROM llm_calls WHERE run_id = ? ORDER BY id");
    stmt.bind(run_id);
    std::vector<LlmCall> out;
    while (stmt.step()) {
      out.push_back(read_llm_call(stmt));
    }
    return out;
  });
}

}  // namespace autocomp::search::store
