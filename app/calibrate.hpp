#pragma once

namespace autocomp::app {

// Entry point of `autocomp-mcp calibrate --backend SPEC [--target T] [--name NAME] [--db PATH]
// [--from-history] [--json] [--harness-dir DIR]`: fits the simulator's cost table to a device
// (search/calibration/calibrate.hpp) and stores it as a named profile. Returns 0 when the
// profile was stored, 1 when calibration failed, 2 on bad usage.
int calibrate_main(int argc, char** argv);

}  // namespace autocomp::app
