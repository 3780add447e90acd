#include <map>
#include <mutex>

#include "search/autotune/autotune_proposer.hpp"
#include "search/engine/proposer.hpp"

namespace autocomp::search::engine {

namespace {

std::mutex& table_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<std::string, ProposerFactory>& table() {
  static std::map<std::string, ProposerFactory> proposers{
      {"llm", [] { return make_llm_proposer(); }},
      {"autotune", [] { return autotune::make_autotune_proposer(); }},
  };
  return proposers;
}

}  // namespace

core::Result<std::unique_ptr<Proposer>> make_proposer(const std::string& name) {
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

std::uint64_t derive_seed(std::uint64_t run_seed, std::initializer_list<std::uint64_t> parts) {
  auto mix = [](std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  std::uint64_t state = mix(run_seed);
  for (std::uint64_t part : parts) {
    state = mix(state ^ mix(part));
  }
  return state;
}

}  // namespace autocomp::search::engine
