#pragma once

#include <string_view>

namespace autocomp::server {

// The initialize result's `instructions`: the short version of CLAUDE.md, what a model should know
// before it picks a tool. Keep it under 2 KB (clients truncate longer text).
inline constexpr std::string_view k_server_instructions =
    "autocomp-mcp makes AWS Trainium NKI kernels faster. Every tool takes a kernel file and "
    "its problem file (inputs, reference, tolerances); relative paths resolve against the "
    "client's working folder.\n"
    "\n"
    "Work loop, one change at a time:\n"
    "1. verify_kernel first. Never time or profile a kernel that is not correct.\n"
    "2. profile_kernel before planning: read `bottleneck` (compute-bound, memory-bound, "
    "underutilized), the hot lines (line, engine, share of the time) and which engine "
    "waits on which, then `roofline` and the engine/DMA percentages in `metrics`.\n"
    "3. Plan one change that targets that bottleneck (propose_plan ranks the menu for this "
    "kernel and leaves out what was tried), edit the file, verify_kernel again.\n"
    "4. benchmark_kernel after every correct edit. If `diverged` is true or the median got "
    "worse, call revert_to_best(kernel) and try something else. record_reflexion(kernel, ...) "
    "(it describes the last measured attempt, also after a revert; name the menu item) "
    "keeps the lesson for the next propose_plan.\n"
    "\n"
    "Searches: for many variants or a long budget, call run_beam_search: with an LLM (server "
    "--llm or the llm argument) it plans and rewrites; without one it autotunes the knobs "
    "the kernel declares (# autocomp: knob NAME = [v1, v2]). It returns a run_id at once. "
    "Follow it with get_search_status(run_id, wait_s<=50) in a loop, cancel_search(run_id) "
    "to stop, then revert_to_best(kernel, run_id) to write the winner into the file. "
    "list_runs shows past runs.\n"
    "\n"
    "Answers are brief; detail: \"full\" or the `details` resource links give the whole "
    "record. Quote the key numbers (correct, median latency, bottleneck), not whole results; "
    "resource links such as "
    "autocomp://evaluations/{id}, autocomp://candidates/{hash} and autocomp://runs/{id}. "
    "Results are cached per kernel content; pass fresh=true only "
    "to re-measure.\n"
    "\n"
    "A failing kernel gives correct=false and a failure (kind, message, kernel line): fix "
    "that first. Bad arguments come back as isError results saying what to fix.\n";

}  // namespace autocomp::server
