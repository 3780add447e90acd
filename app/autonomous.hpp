#pragma once

namespace autocomp::app {

// Entry point of `autocomp-mcp --autonomous ...`: parses its own flags from argv, runs the search
// and returns the process exit code (0 success, 1 failure, 2 bad usage).
int autonomous_main(int argc, char** argv);

}  // namespace autocomp::app
