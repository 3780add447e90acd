#include "search/engine/candidate.hpp"

#include <cstdio>
#include <tuple>

namespace autocomp::search::engine {

std::string Origin::label() const {
  return "i" + std::to_string(iteration) + "/m" + std::to_string(member) + "/p" +
         std::to_string(plan) + "/k" + std::to_string(impl) + "/r" + std::to_string(repair) + "/" +
         proposer;
}

std::optional<Origin> Origin::parse(const std::string& label) {
  Origin origin;
  char proposer[128] = {0};
  if (std::sscanf(label.c_str(), "i%d/m%d/p%d/k%d/r%d/%127s", &origin.iteration, &origin.member,
                  &origin.plan, &origin.impl, &origin.repair, proposer) != 6) {
    return std::nullopt;
  }
  origin.proposer = proposer;
  return origin;
}

bool Origin::operator<(const Origin& other) const {
  return std::tie(iteration, member, proposer, plan, impl, repair) <
         std::tie(other.iteration, other.member, other.proposer, other.plan, other.impl,
                  other.repair);
}

}  // namespace autocomp::search::engine
