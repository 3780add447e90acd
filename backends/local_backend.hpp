#pragma once

#include <memory>
#include <vector>

#include "backends/backend.hpp"
#include "backends/spec.hpp"
#include "core/result.hpp"

namespace autocomp::backends {

// Runs the harness on this machine as a child process, one fresh temporary work folder per
// request. Specs: "sim" (the simulator) and "local?device=sim|fake|neuron&fake_ms=MS&slots=N
// &target=trn2&python=PATH". At most `slots` requests run at once across all batches (default:
// BackendOptions.local_slots).
core::Result<std::shared_ptr<Backend>> make_local_backend(const std::vector<BackendSpec>& specs,
                                                          const BackendOptions& options);

}  // namespace autocomp::backends
