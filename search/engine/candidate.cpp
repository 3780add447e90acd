#include "search/engine/candidate.hpp"

#include <tuple>


namespace autocomp::search::engine {

std::string Origin::label() const {
  return "i" + std::to_string(iteration) + "/m" + std::to_string(member) + "/p" +
         std::to_string(plan) + "/k" + std::to_string(impl) + "/r" + std::to_string(repair) + "/" +
         proposer;
}

bool Origin::operator<(const Origin& other) const {
  return std::tie(iteration, member, proposer, plan, impl, repair) <
         std::tie(other.iteration, other.member, other.proposer, other.plan, other.impl,
                  other.repair);
}

}  // namespace autocomp::search::engine
