#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/cancel.hpp"
#include "core/clock.hpp"
#include "core/result.hpp"
#include "search/engine/beam_search.hpp"
#include "search/launch/launcher.hpp"
#include "server/tasks.hpp"
#include "tools/sampling_provider.hpp"

namespace autocomp::tools {

// Where a job's LLM calls go, for status reports.
struct JobModel {
  // "server": the models of --llm or the llm argument; "client": the MCP client's own model
  // through sampling; "none": no model (knob autotuning only).
  std::string source = "none";
  std::shared_ptr<const SessionSamplingProvider> client;  // set when source is "client"
};

// A search running in this server process. Its truth is the store; the job adds the live
// progress snapshot and the cancel switch.
struct JobSnapshot {
  std::string run_id;
  bool finished = false;
  search::engine::ProgressEvent progress;
  std::optional<search::engine::SearchOutcome> outcome;  // set once finished
  long updates = 0;  // increases with every progress event (for waiting callers)
  JobModel model;
};

// Runs searches as background jobs, each on its own thread, at most `max_running` at once.
// Thread-safe. The destructor cancels every job and waits for it.
class SearchJobs {
 public:
  // Runs a prepared search to its end on the calling thread (search::launch::run; tests pass a
  // fake one).
  using Runner = std::function<search::engine::SearchOutcome(
      const search::launch::Launch&, const core::CancelToken&, const search::engine::SearchHooks&)>;

  // `clock` measures wait()'s timeouts (null: the steady clock); `runner` null: launch::run.
  explicit SearchJobs(int max_running = 4, std::shared_ptr<const core::Clock> clock = {},
                      Runner runner = {});
  ~SearchJobs();
  SearchJobs(const SearchJobs&) = delete;
  SearchJobs& operator=(const SearchJobs&) = delete;

  // Starts a prepared search (new or resumed, search/launch) and returns its run id once the
  // engine has created or claimed the run; a search that fails before that returns its failure.
  core::Result<std::string> start(search::launch::Launch launch, JobModel model = {});

  std::optional<JobSnapshot> snapshot(const std::string& run_id) const;
  // Waits until the job sends an update newer than `after_update`, finishes, `timeout` passes or
  // `cancel` is set; returns the latest snapshot (nullopt for a run this process does not run).
  std::optional<JobSnapshot> wait(const std::string& run_id, long after_update,
                                  std::chrono::milliseconds timeout,
                                  const core::CancelToken& cancel) const;
  // True when the job was running here and is now told to stop.
  bool cancel(const std::string& run_id);
  int running() const;

 private:
  struct Job {
    core::CancelToken cancel;
    JobSnapshot snapshot;
    std::thread thread;
  };

  mutable std::mutex m_mutex;
  mutable std::condition_variable m_changed;
  std::map<std::string, std::shared_ptr<Job>> m_jobs;
  std::vector<std::shared_ptr<Job>> m_all;
  int m_max_running;
  std::shared_ptr<const core::Clock> m_clock;
  Runner m_runner;
};

// run_beam_search as a protocol task: the task is a view of the search job it started (the run
// id is in its status line and result, so get_search_status and cancel_search see the same
// work). `final_result` turns a finished run into the task's CallToolResult.
class SearchTaskSource : public server::JobSource {
 public:
  using FinalResult = std::function<nlohmann::json(const std::string& run_id)>;
  SearchTaskSource(SearchJobs& jobs, FinalResult final_result)
      : m_jobs(jobs), m_final_result(std::move(final_result)) {}

  Started start(server::ToolContext& context, const server::TaskCall& call) override;
  server::JobStatus status(const std::string& run_id) override;
  void cancel(const std::string& run_id) override { m_jobs.cancel(run_id); }

 private:
  SearchJobs& m_jobs;
  FinalResult m_final_result;
};

}  // namespace autocomp::tools
