#include "backends/calibrated_backend.hpp"

#include "core/hash.hpp"

namespace autocomp::backends {
namespace {

class CalibratedBackend final : public Backend {
 public:
  CalibratedBackend(std::shared_ptr<Backend> inner, CalibrationTable table)
      : m_inner(std::move(inner)), m_table(std::move(table)) {
    const std::string base = m_inner->identity();
    m_identity = base + (base.find('?') == std::string::npos ? "?" : "&") +
                 "calibration=" + m_table.name + "@" + cost_table_digest(m_table.json);
  }

  std::string identity() const override { return m_identity; }
  std::string device() const override { return m_inner->device(); }
  std::string harness_version() const override { return m_inner->harness_version(); }
  int slots() const override { return m_inner->slots(); }

  std::vector<EvalResult> evaluate(const std::vector<EvalRequest>& batch,
                                   const core::CancelToken& cancel,
                                   const ProgressFn& progress) override {
    std::vector<EvalRequest> priced = batch;
    for (auto& request : priced) {
      request.cost_table_json = m_table.json;
    }
    auto results = m_inner->evaluate(priced, cancel, progress);
    for (auto& result : results) {
      result.backend_identity = m_identity;
      result.receipt.backend = m_identity;
      if (result.receipt.cost_table.empty()) {
        result.receipt.cost_table = m_table.name;
      }
    }
    return results;
  }

 private:
  std::shared_ptr<Backend> m_inner;
  CalibrationTable m_table;
  std::string m_identity;
};

}  // namespace

std::string cost_table_digest(const std::string& json) {
  return core::sha256_hex(json).substr(0, 16);
}

std::shared_ptr<Backend> make_calibrated_backend(std::shared_ptr<Backend> inner,
                                                 CalibrationTable table) {
  return std::make_shared<CalibratedBackend>(std::move(inner), std::move(table));
}

}  // namespace autocomp::backends
