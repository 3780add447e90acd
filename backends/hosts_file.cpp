#include "backends/hosts_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace autocomp::backends {
namespace {

namespace fs = std::filesystem;

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
                      "only ssh://[user@]host[:port][?options] lines belong in a hosts "
                      "file, got '" +
                          std::string(line) + "'");
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
  std::error_code ec;
  auto status = fs::status(expanded, ec);
  if (status.type() == fs::file_type::not_found) {
    return cannot_read("no such file");
  }
  if (status.type() == fs::file_type::directory) {
    return cannot_read("it is a directory");
  }
  std::ifstream in(expanded, std::ios::binary);
  if (!in) {
    return cannot_read(std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return cannot_read("read error");
  }
  return parse_hosts_file(text.str(), expanded);
}

}  // namespace autocomp::backends
