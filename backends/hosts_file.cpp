#include "backends/hosts_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace autocomp::backends {
namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

// The line without its comment: '#' at the start or after a blank begins one.
std::string_view strip_comment(std::string_view line) {
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '#' && (i == 0 || is_blank(line[i - 1]))) {
      return line.substr(0, i);
    }
  }
  return line;
}

std::string_view trim_blanks(std::string_view text) {
  while (!text.empty() && is_blank(text.front())) {
    text.remove_prefix(1);
  }
  while (!text.empty() && is_blank(text.back())) {
    text.remove_suffix(1);
  }
  return text;
}

constexpr std::string_view k_ssh_prefix = "ssh://";

core::Failure bad_line(const std::string& where, const std::string& why) {
  return core::make_failure(core::FailureKind::invalid_argument, "backend", where + ": " + why);
}

}  // namespace

core::Result<std::vector<BackendSpec>> parse_hosts_file(std::string_view text,
                                                        const std::string& origin) {
  std::vector<BackendSpec> specs;
  int number = 0;
  while (!text.empty()) {
    auto newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
    ++number;
    line = trim_blanks(strip_comment(line));
    if (line.empty()) {
      continue;
    }
    const std::string where = origin + ":" + std::to_string(number);
    // Only a line that starts like a spec is quoted back: the path may name any file the server
    // can read, and its contents are not the caller's to see.
    if (line.substr(0, k_ssh_prefix.size()) != k_ssh_prefix) {
      return bad_line(where,
                      "not an ssh://[user@]host[:port][?options] line (only such lines, blank "
                      "lines and # comments belong in a hosts file)");
    }
    for (char c : line) {
      if (is_blank(c)) {
        return bad_line(where, "expected one spec per line with no spaces inside, got '" +
                                   std::string(line) + "'");
      }
    }
    auto spec = parse_spec(line);
    if (!spec.ok()) {
      return bad_line(where, spec.failure().message);
    }
    if (spec->scheme != "ssh") {
      return bad_line(where,
                      "only ssh://[user@]host[:port][?options] lines belong in a hosts file");
    }
    spec->origin = where;
    specs.push_back(std::move(spec).value());
  }
  if (specs.empty()) {
    return core::make_failure(core::FailureKind::invalid_argument, "backend",
                              "hosts file " + origin +
                                  " lists no hosts (only blank lines and comments); add one "
                                  "ssh://[user@]host[:port][?options] line per host");
  }
  return specs;
}

core::Result<std::vector<BackendSpec>> read_hosts_file(const std::string& path) {
  if (path.empty()) {
    return core::make_failure(core::FailureKind::invalid_argument, "backend",
                              "hosts: needs a file path, e.g. hosts:~/.config/autocomp/hosts");
  }
  const std::string expanded = expand_home(path);
  auto cannot_read = [&](const std::string& why) {
    return core::make_failure(core::FailureKind::io_error, "backend",
                              "cannot read hosts file " + expanded + ": " + why);
  };
  if (expanded.find('\0') != std::string::npos) {
    return cannot_read("the path contains a NUL character");
  }
  // Non-blocking open: a FIFO or a terminal must not hold the caller; the type is then checked
  // on the open descriptor itself, so nothing can be swapped in between.
  int fd = ::open(expanded.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return cannot_read(errno == ENOENT ? std::string("no such file") : std::strerror(errno));
  }
  struct FdGuard {
    int fd;
    ~FdGuard() { ::close(fd); }
  } guard{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    return cannot_read(std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) {
    return cannot_read("it is a directory");
  }
  if (!S_ISREG(info.st_mode)) {
    return cannot_read("not a regular file (devices, pipes and sockets are refused)");
  }
  if (info.st_size > static_cast<off_t>(k_max_hosts_file_bytes)) {
    return cannot_read("larger than " + std::to_string(k_max_hosts_file_bytes / 1024) +
                       " KiB; a hosts file lists one ssh:// line per host");
  }
  std::string text;
  std::array<char, 16384> buffer{};
  while (true) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return cannot_read(std::strerror(errno));
    }
    if (n == 0) {
      break;
    }
    text.append(buffer.data(), static_cast<std::size_t>(n));
    if (text.size() > k_max_hosts_file_bytes) {  // grew while being read
      return cannot_read("larger than " + std::to_string(k_max_hosts_file_bytes / 1024) +
                         " KiB; a hosts file lists one ssh:// line per host");
    }
  }
  if (text.find('\0') != std::string::npos) {
    return cannot_read("not a text file");
  }
  return parse_hosts_file(text, expanded);
}

}  // namespace autocomp::backends
