#pragma once

#include <string_view>

namespace autocomp::server {

// The initialize result's `instructions`: what the model should know about this server before it
// picks a tool. Keep it under 2 KB (clients truncate longer text).
inline constexpr std::string_view k_server_instructions =
    "autocomp-mcp helps optimize AWS Trainium NKI kernels. Typical loop: verify_kernel (does it "
    "compile and match the reference?), benchmark_kernel and profile_kernel (how fast, where does "
    "the time go?), propose_plan (what to try next), then edit and re-verify. run_beam_search "
    "searches in the background and reports progress; revert_to_best restores the best verified "
    "version. Paths in arguments are resolved against the client's working folder. Tool errors "
    "come back as results with isError and a message saying what to fix.";

}  // namespace autocomp::server
