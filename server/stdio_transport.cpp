#include "server/stdio_transport.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

namespace autocomp::server {

namespace {

// Writes whole lines to the output descriptor; one writer at a time.
class LineWriter {
 public:
  explicit LineWriter(int fd) : m_fd(fd) {}

  void write_line(std::string line) {
    line.push_back('\n');
    std::lock_guard lock(m_mutex);
    if (m_broken) {
      return;
    }
    std::size_t written = 0;
    while (written < line.size()) {
      const ssize_t n = ::write(m_fd, line.data() + written, line.size() - written);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        spdlog::warn("stdout closed; dropping further messages");
        m_broken = true;
        return;
      }
      written += static_cast<std::size_t>(n);
    }
  }

  bool broken() const {
    std::lock_guard lock(m_mutex);
    return m_broken;
  }

 private:
  int m_fd;
  mutable std::mutex m_mutex;
  bool m_broken = false;
};

class StdioOutbox : public Outbox {
 public:
  explicit StdioOutbox(std::shared_ptr<LineWriter> writer) : m_writer(std::move(writer)) {}
  void send(const nlohmann::json& message) override {
    m_writer->write_line(jsonrpc::serialize(message));
  }
  void finish(std::optional<nlohmann::json> response) override {
    if (response) {
      m_writer->write_line(jsonrpc::serialize(*response));
    }
  }
  bool connected() const override { return !m_writer->broken(); }

 private:
  std::shared_ptr<LineWriter> m_writer;
};

}  // namespace

bool serve_stdio(Server& server, const StdioOptions& options) {
  auto writer = std::make_shared<LineWriter>(options.out_fd);
  auto outbox = std::make_shared<StdioOutbox>(writer);
  auto session = server.create_session(outbox);
  const std::size_t limit = server.options().limits.max_message_bytes;

  std::string line;
  bool oversize = false;  // discarding the rest of an over-long line
  std::size_t oversize_bytes = 0;
  std::string buffer(64 * 1024, '\0');
  auto deliver = [&](std::string& text) {
    if (!text.empty() && text.back() == '\r') {
      text.pop_back();
    }
    if (text.find_first_not_of(" \t\r") == std::string::npos) {
      return;  // blank line
    }
    session->handle_raw(text, outbox);
  };
  for (;;) {
    const ssize_t n = ::read(options.in_fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      spdlog::warn("reading stdin failed; stopping");
      break;
    }
    if (n == 0) {
      break;
    }
    std::size_t start = 0;
    const auto count = static_cast<std::size_t>(n);
    while (start < count) {
      const void* found = std::memchr(buffer.data() + start, '\n', count - start);
      const std::size_t end =
          found ? static_cast<std::size_t>(static_cast<const char*>(found) - buffer.data()) : count;
      if (oversize) {
        oversize_bytes += end - start;
      } else {
        line.append(buffer, start, end - start);
        if (line.size() > limit) {
          oversize = true;
          oversize_bytes = line.size();
          line.clear();
          line.shrink_to_fit();
        }
      }
      if (found) {
        if (oversize) {
          spdlog::warn("discarded a message of {} bytes (limit {})", oversize_bytes, limit);
          outbox->finish(jsonrpc::make_error(
              nullptr, jsonrpc::k_invalid_request,
              "Invalid Request: message of " + std::to_string(oversize_bytes) +
                  " bytes exceeds the limit of " + std::to_string(limit) + " bytes"));
          oversize = false;
          oversize_bytes = 0;
        } else {
          deliver(line);
        }
        line.clear();
        start = end + 1;
      } else {
        start = count;
      }
    }
  }
  if (!oversize && !line.empty()) {
    deliver(line);  // a last message without its newline
  }
  spdlog::info("stdin closed; finishing");
  bool idle = server.wait_idle(options.grace);
  if (!idle) {
    spdlog::warn("cancelling {} running call(s) at exit", session->running_calls());
    session->close();
    idle = server.wait_idle(std::chrono::milliseconds(1000));
  }
  session->close();
  return idle;
}

}  // namespace autocomp::server
