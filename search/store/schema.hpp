#pragma once

#include <string_view>
#include <vector>

// The store's schema as an ordered list of forward migrations. Migration i (1-based) takes a
// database from `PRAGMA user_version` i-1 to i; each is applied in its own transaction. Released
// steps are never edited: a change to the schema is a new step appended at the end.
namespace autocomp::search::store {

struct Migration {
  int version;           // user_version after this step
  std::string_view sql;  // one or more statements
};

const std::vector<Migration>& migrations();

}  // namespace autocomp::search::store
