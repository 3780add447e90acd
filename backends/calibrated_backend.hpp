#pragma once

#include <memory>

#include "backends/backend.hpp"

namespace autocomp::backends {

// A simulator backend that prices with a calibration profile's cost table: every request carries
// the table (EvalRequest::cost_table_json, so it travels to remote hosts like the kernel does),
// and the identity names the profile and the table's digest, so cached results of other tables
// never answer. Made by make_backend for a spec with "calibration=NAME|latest".
std::shared_ptr<Backend> make_calibrated_backend(std::shared_ptr<Backend> inner,
                                                 CalibrationTable table);

// The first 16 hex digits of the sha256 of a cost table file's content.
std::string cost_table_digest(const std::string& json);

}  // namespace autocomp::backends
