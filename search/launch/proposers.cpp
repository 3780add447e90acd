#include "search/launch/proposers.hpp"

#include <map>
#include <mutex>

#include "search/autotune/autotune_proposer.hpp"

namespace autocomp::search::launch {

namespace {

std::mutex& table_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<std::string, ProposerFactory>& table() {
  static std::map<std::string, ProposerFactory> proposers{
      {"llm", [] { return engine::make_llm_proposer(); }},
      {"autotune", [] { return autotune::make_autotune_proposer(); }},
  };
  return proposers;
}

}  // namespace

core::Result<std::unique_ptr<engine::Proposer>> make_proposer(const std::string& name) {
  std::lock_guard lock(table_mutex());
  auto it = table().find(name);
  if (it == table().end()) {
    std::string known;
    for (const auto& [known_name, factory] : table()) {
      known += (known.empty() ? "" : ", ") + known_name;
    }
    return core::make_failure(core::FailureKind::invalid_argument, "config",
                              "unknown proposer '" + name + "' (known: " + known + ")");
  }
  return it->second();
}

std::vector<std::string> proposer_names() {
  std::lock_guard lock(table_mutex());
  std::vector<std::string> names;
  for (const auto& [name, factory] : table()) {
    names.push_back(name);
  }
  return names;
}

void register_proposer(const std::string& name, ProposerFactory factory) {
  std::lock_guard lock(table_mutex());
  table()[name] = std::move(factory);
}

}  // namespace autocomp::search::launch
