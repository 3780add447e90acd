#include "core/environment.hpp"

#include <array>
#include <cstdlib>

extern char** environ;

namespace autocomp::core {
namespace {

constexpr std::array<std::string_view, 21> k_allowed_names{"PATH",
                                                           "HOME",
                                                           "USER",
                                                           "LOGNAME",
                                                           "SHELL",
                                                           "LANG",
                                                           "LANGUAGE",
                                                           "TZ",
                                                           "TMPDIR",
                                                           "TMP",
                                                           "TEMP",
                                                           "LD_LIBRARY_PATH",
                                                           "VIRTUAL_ENV",
                                                           "CONDA_PREFIX",
                                                           "CONDA_DEFAULT_ENV",
                                                           "XDG_CACHE_HOME",
                                                           "OMP_NUM_THREADS",
                                                           "OPENBLAS_NUM_THREADS",
                                                           "MKL_NUM_THREADS",
                                                           "AUTOCOMP_SMALL",
                                                           "AUTOCOMP_REF_CACHE"};

constexpr std::array<std::string_view, 5> k_allowed_prefixes{"LC_", "PYTHON", "NEURON_", "NKI_",
                                                             "XLA_"};

constexpr std::array<std::string_view, 4> k_denied_parts{"API_KEY", "TOKEN", "SECRET", "PASSWORD"};
constexpr std::array<std::string_view, 4> k_denied_prefixes{"ANTHROPIC_", "OPENAI_", "AWS_",
                                                            "AUTOCOMP_AUTH"};

constexpr std::string_view k_extra_variable = "AUTOCOMP_HARNESS_ENV";

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool denied(std::string_view name) {
  for (auto part : k_denied_parts) {
    if (name.find(part) != std::string_view::npos) {
      return true;
    }
  }
  for (auto prefix : k_denied_prefixes) {
    if (starts_with(name, prefix)) {
      return true;
    }
  }
  return false;
}

// A name the shell can handle: [A-Za-z_][A-Za-z0-9_]*.
bool plain_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) {
    return false;
  }
  for (char c : name) {
    bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> extra_names() {
  std::vector<std::string> names;
  const char* text = std::getenv(std::string(k_extra_variable).c_str());
  if (text == nullptr) {
    return names;
  }
  std::string_view rest(text);
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view name = rest.substr(0, comma);
    while (!name.empty() && name.front() == ' ') {
      name.remove_prefix(1);
    }
    while (!name.empty() && name.back() == ' ') {
      name.remove_suffix(1);
    }
    if (plain_name(name)) {
      names.emplace_back(name);
    }
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return names;
}

}  // namespace

bool harness_may_inherit(std::string_view name, const std::vector<std::string>& extra) {
  if (!plain_name(name) || denied(name)) {
    return false;
  }
  for (auto allowed : k_allowed_names) {
    if (name == allowed) {
      return true;
    }
  }
  for (auto prefix : k_allowed_prefixes) {
    if (starts_with(name, prefix)) {
      return true;
    }
  }
  for (const auto& allowed : extra) {
    if (name == allowed) {
      return true;
    }
  }
  return false;
}

EnvironmentList harness_environment() {
  const auto extra = extra_names();
  EnvironmentList list;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    auto equals = text.find('=');
    if (equals == std::string_view::npos) {
      continue;
    }
    std::string_view name = text.substr(0, equals);
    if (harness_may_inherit(name, extra)) {
      list.emplace_back(std::string(name), std::string(text.substr(equals + 1)));
    }
  }
  return list;
}

std::string harness_environment_shell_filter(const std::vector<std::string>& keep) {
  // The case patterns mirror harness_may_inherit: deny patterns first, then the allowed ones.
  std::string deny;
  for (auto part : k_denied_parts) {
    deny += (deny.empty() ? "" : "|") + std::string("*") + std::string(part) + "*";
  }
  for (auto prefix : k_denied_prefixes) {
    deny += "|" + std::string(prefix) + "*";
  }
  std::string allow;
  for (auto name : k_allowed_names) {
    allow += (allow.empty() ? "" : "|") + std::string(name);
  }
  for (auto prefix : k_allowed_prefixes) {
    allow += "|" + std::string(prefix) + "*";
  }
  for (const auto& name : extra_names()) {
    allow += "|" + name;
  }
  for (const auto& name : keep) {
    if (plain_name(name)) {
      allow += "|" + name;
    }
  }
  // `env` lists NAME=value lines; values with newlines can produce lines that are no variable,
  // and unsetting a name that is not set is harmless.
  return "for autocomp_v in $(env | sed -n 's/^\\([A-Za-z_][A-Za-z0-9_]*\\)=.*/\\1/p'); do "
         "case $autocomp_v in " +
         deny + ") unset \"$autocomp_v\" ;; " + allow +
         ") ;; *) unset \"$autocomp_v\" 2>/dev/null ;; esac; done; unset autocomp_v; ";
}

}  // namespace autocomp::core
