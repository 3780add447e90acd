#include "search/engine/proposer.hpp"

namespace autocomp::search::engine {

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
