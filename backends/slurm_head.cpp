#include "backends/slurm_head.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/process.hpp"

namespace autocomp::backends {
namespace fs = std::filesystem;

namespace {

core::Failure io_failure(const std::string& what) {
  return core::make_failure(core::FailureKind::io_error, "stage", what);
}

class LocalHead final : public SlurmHead {
 public:
  std::string label() const override { return "localhost"; }

  core::Result<ExecOutput> run(const std::string& command, std::chrono::milliseconds timeout,
                               const core::CancelToken& cancel) override {
    core::ProcessSpec spec;
    spec.argv = {"/bin/sh", "-c", command + " 2>&1"};
    spec.timeout = timeout;
    spec.max_output_bytes = std::size_t{4} << 20;
    auto run = core::run_process(spec, cancel);
    if (!run.ok()) {
      return run.failure();
    }
    if (run->timed_out) {
      return core::make_failure(
          core::FailureKind::timeout, "slurm",
          "a Slurm command did not finish within " + std::to_string(timeout.count()) + " ms");
    }
    if (run->cancelled) {
      return core::make_failure(core::FailureKind::cancelled, "slurm", "cancelled");
    }
    ExecOutput out;
    out.exit_status = run->exited ? run->exit_code : -1;
    out.stdout_text = std::move(run->stdout_text);
    return out;
  }

  core::Status write_file(const std::string& path, const std::string& content) override {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) {
      return io_failure("cannot write " + path);
    }
    return core::ok_status();
  }

  core::Result<std::string> read_file(const std::string& path, std::size_t max_bytes,
                                      bool tail) override {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return io_failure("cannot read " + path);
    }
    std::ostringstream text;
    text << in.rdbuf();
    std::string all = text.str();
    if (all.size() > max_bytes) {
      all = tail ? all.substr(all.size() - max_bytes) : all.substr(0, max_bytes);
    }
    return all;
  }

  core::Status make_dirs(const std::string& path) override {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) {
      return io_failure("cannot create " + path + ": " + ec.message());
    }
    return core::ok_status();
  }

  core::Result<bool> exists(const std::string& path) override {
    std::error_code ec;
    return fs::exists(path, ec);
  }

  core::Status rename(const std::string& from, const std::string& to) override {
    std::error_code ec;
    fs::rename(from, to, ec);
    if (ec) {
      return io_failure("cannot rename " + from + " to " + to + ": " + ec.message());
    }
    return core::ok_status();
  }

  core::Result<std::string> home() override {
    const char* home = std::getenv("HOME");
    if (home == nullptr || *home == '\0') {
      return core::make_failure(core::FailureKind::invalid_argument, "backend",
                                "HOME is not set; give the Slurm backend a stage=DIR");
    }
    return std::string(home);
  }
};

// One SSH session shared by every caller, reopened when it broke.
class SshHead final : public SlurmHead {
 public:
  explicit SshHead(SshEndpoint endpoint) : m_endpoint(std::move(endpoint)) {}

  std::string label() const override { return m_endpoint.describe(); }

  core::Result<ExecOutput> run(const std::string& command, std::chrono::milliseconds timeout,
                               const core::CancelToken& cancel) override {
    return with_connection<ExecOutput>([&](SshConnection& connection) {
      return connection.run_in_shell(command, timeout, cancel);
    });
  }
  core::Status write_file(const std::string& path, const std::string& content) override {
    return with_connection<core::Unit>(
        [&](SshConnection& connection) { return connection.write_file(path, content); });
  }
  core::Result<std::string> read_file(const std::string& path, std::size_t max_bytes,
                                      bool tail) override {
    return with_connection<std::string>(
        [&](SshConnection& connection) { return connection.read_file(path, max_bytes, tail); });
  }
  core::Status make_dirs(const std::string& path) override {
    return with_connection<core::Unit>(
        [&](SshConnection& connection) { return connection.make_dirs(path); });
  }
  core::Result<bool> exists(const std::string& path) override {
    return with_connection<bool>(
        [&](SshConnection& connection) { return connection.exists(path); });
  }
  core::Status rename(const std::string& from, const std::string& to) override {
    return with_connection<core::Unit>(
        [&](SshConnection& connection) { return connection.rename(from, to); });
  }
  core::Result<std::string> home() override {
    return with_connection<std::string>(
        [](SshConnection& connection) { return connection.home(); });
  }

 private:
  // Runs `step` on the session (opened on first use); a broken session is dropped and the step
  // tried once more on a fresh one.
  template <typename T, typename Step>
  core::Result<T> with_connection(Step step) {
    std::lock_guard lock(m_mutex);
    for (int round = 0;; ++round) {
      if (!m_connection) {
        auto opened = SshConnection::open(m_endpoint);
        if (!opened.ok()) {
          return opened.failure();
        }
        m_connection = std::move(opened).value();
      }
      core::Result<T> result = step(*m_connection);
      if (result.ok()) {
        return result;
      }
      auto kind = result.failure().kind;
      if (kind == core::FailureKind::transport_error || kind == core::FailureKind::timeout ||
          kind == core::FailureKind::cancelled) {
        m_connection.reset();
      }
      if (kind != core::FailureKind::transport_error || round > 0) {
        return result;
      }
    }
  }

  SshEndpoint m_endpoint;
  std::mutex m_mutex;
  std::unique_ptr<SshConnection> m_connection;
};

}  // namespace

std::unique_ptr<SlurmHead> make_local_head() {
  return std::make_unique<LocalHead>();
}

std::unique_ptr<SlurmHead> make_ssh_head(SshEndpoint endpoint) {
  return std::make_unique<SshHead>(std::move(endpoint));
}

}  // namespace autocomp::backends
