#pragma once

// A ProcessRunner for tests: records every ProcessSpec it is given and answers with what the
// test's script returns, without starting a process.

#include <functional>
#include <mutex>
#include <vector>

#include "core/process_runner.hpp"

namespace autocomp::testing {

class FakeProcessRunner final : public core::ProcessRunner {
 public:
  using Script = std::function<core::Result<core::ProcessResult>(const core::ProcessSpec&)>;
  explicit FakeProcessRunner(Script script) : m_script(std::move(script)) {}

  core::Result<core::ProcessResult> run(const core::ProcessSpec& spec,
                                        const core::CancelToken& cancel) override {
    {
      std::lock_guard lock(m_mutex);
      m_specs.push_back(spec);
    }
    if (cancel.cancelled()) {
      core::ProcessResult result;
      result.cancelled = true;
      return result;
    }
    return m_script(spec);
  }

  std::vector<core::ProcessSpec> specs() const {
    std::lock_guard lock(m_mutex);
    return m_specs;
  }

  // A process that exited with `code` after printing `out` and `err`.
  static core::ProcessResult exited(int code, std::string out, std::string err = {}) {
    core::ProcessResult result;
    result.exited = true;
    result.exit_code = code;
    result.stdout_text = std::move(out);
    result.stderr_text = std::move(err);
    return result;
  }

 private:
  Script m_script;
  mutable std::mutex m_mutex;
  std::vector<core::ProcessSpec> m_specs;
};

}  // namespace autocomp::testing
