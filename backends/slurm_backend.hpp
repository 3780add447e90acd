#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/spec.hpp"
#include "core/failure.hpp"
#include "core/result.hpp"

namespace autocomp::backends {

// Evaluations as Slurm jobs, submitted with sbatch (a batch is one job array) on this machine,
// "slurm:?partition=P&...", or on a remote head node over SSH, "slurm+ssh://user@head[:port]?...".
// Options: partition, device=neuron|sim|fake, python, stage (shared folder; default
// ~/.autocomp/slurm), account, qos, time (sbatch --time), cores_per_task (NeuronCores per
// evaluation), gres (GRES name for NeuronCores, e.g. neuron), max_parallel (array %N), target,
// fake_ms, slots, queue_timeout (seconds a job may wait in the queue), poll_ms, setup (a file
// sourced on the head before Slurm commands), and for
// slurm+ssh the ssh options key, known_hosts, accept_new_host_key, connect_timeout.
// See docs/backends.md.
core::Result<std::shared_ptr<Backend>> make_slurm_backend(const std::vector<BackendSpec>& specs,
                                                          const BackendOptions& options);

class SlurmHead;
// The same on a given head (tests pass a fake one; null: the head the spec names).
core::Result<std::shared_ptr<Backend>> make_slurm_backend(const std::vector<BackendSpec>& specs,
                                                          const BackendOptions& options,
                                                          std::unique_ptr<SlurmHead> head);

// One record of `scontrol -o show job`: an array task (or a whole job when not an array).
struct SlurmJobRecord {
  std::string job_id;         // JobId=
  std::string array_job_id;   // ArrayJobId= (empty when not an array)
  std::string array_task_id;  // ArrayTaskId= ("3", or "4-7" for tasks still pending together)
  std::string state;          // JobState=, e.g. RUNNING, COMPLETED, NODE_FAIL
  std::string reason;         // Reason=
  std::string node;           // NodeList= ("(null)" is returned empty)
};

// Parses `scontrol -o show job` output (one record a line; other lines are skipped).
std::vector<SlurmJobRecord> parse_scontrol_jobs(const std::string& text);

// Whether a job in `state` will never run again (COMPLETED, FAILED, NODE_FAIL, ...).
bool slurm_state_is_final(const std::string& state);

// The failure for a job that ended in `state` without leaving a result, naming the job and node;
// `retryable` is set when another node may succeed (node failure, boot failure, preemption).
core::Failure slurm_end_failure(const std::string& state, const std::string& reason,
                                const std::string& job, const std::string& node, bool& retryable);

}  // namespace autocomp::backends
