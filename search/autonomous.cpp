#include "search/autonomous.hpp"

#include <cstdio>

namespace autocomp::search {

int autonomous_main(int /*argc*/, char** /*argv*/) {
  std::fputs("autocomp-mcp --autonomous: the search engine is not available in this build\n",
             stderr);
  return 1;
}

}  // namespace autocomp::search
