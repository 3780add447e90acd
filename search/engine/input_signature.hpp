#pragma once

#include <cstddef>
#include <string>

#include "backends/backend.hpp"
#include "core/cancel.hpp"

namespace autocomp::search::engine {

// The canonical input signature ("name:dtype[d0,d1];...", PROTOCOL.md) the problem of `like`
// produces on `backend` for `like.target`: the harness's `signature` command, which runs only the
// problem's inputs(first seed). It is part of every evaluation key, so that a result measured at
// one shape is never served for another (the same problem file can produce other shapes under
// another environment, e.g. AUTOCOMP_SMALL=1).
//
// Answers are remembered for the life of the process per (problem source, problem file name,
// backend identity, device, harness version, target, seeds): probing costs one harness start.
// Returns "" when the backend cannot say (an older harness, a problem whose inputs() fails, a
// transport failure); failures that may pass on retry (timeout, transport, cancelled, ...) are
// not remembered.
std::string input_signature(backends::Backend& backend, const backends::EvalRequest& like,
                            const core::CancelToken& cancel);

// How many answers are remembered (for tests).
std::size_t remembered_signatures();

}  // namespace autocomp::search::engine
