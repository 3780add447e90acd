#include "core/process_runner.hpp"

namespace autocomp::core {
namespace {

class SystemProcessRunner final : public ProcessRunner {
 public:
  Result<ProcessResult> run(const ProcessSpec& spec, const CancelToken& cancel) override {
    return run_process(spec, cancel);
  }
};

}  // namespace

std::shared_ptr<ProcessRunner> system_process_runner() {
  static const auto k_runner = std::make_shared<SystemProcessRunner>();
  return k_runner;
}

std::shared_ptr<ProcessRunner> runner_or_system(std::shared_ptr<ProcessRunner> runner) {
  return runner ? std::move(runner) : system_process_runner();
}

}  // namespace autocomp::core
