#include "tools/search_jobs.hpp"

namespace autocomp::tools {

namespace engine = search::engine;

SearchJobs::SearchJobs(int max_running, std::shared_ptr<const core::Clock> clock, Runner runner)
    : m_max_running(max_running),
      m_clock(core::clock_or_steady(std::move(clock))),
      m_runner(runner ? std::move(runner) : Runner(search::launch::run)) {}

SearchJobs::~SearchJobs() {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    std::lock_guard lock(m_mutex);
    jobs = m_all;
  }
  for (auto& job : jobs) {
    job->cancel.cancel();
  }
  for (auto& job : jobs) {
    if (job->thread.joinable()) {
      job->thread.join();
    }
  }
}

int SearchJobs::running() const {
  std::lock_guard lock(m_mutex);
  int count = 0;
  for (const auto& job : m_all) {
    count += job->snapshot.finished ? 0 : 1;
  }
  return count;
}

core::Result<std::string> SearchJobs::start(search::launch::Launch launch, JobModel model) {
  if (running() >= m_max_running) {
    return core::make_failure(core::FailureKind::unavailable, "search",
                              std::to_string(m_max_running) +
                                  " searches are already running in this server; wait for one "
                                  "or cancel one (cancel_search)");
  }
  auto job = std::make_shared<Job>();
  job->snapshot.model = std::move(model);
  // The engine reports the run id through `started`; until then the starter waits here.
  struct Handshake {
    std::mutex mutex;
    std::condition_variable ready;
    bool done = false;
    std::string run_id;
    std::optional<core::Failure> failure;
  };
  auto handshake = std::make_shared<Handshake>();

  engine::SearchHooks hooks;
  hooks.started = [this, job, handshake](const std::string& run_id) {
    {
      std::lock_guard lock(m_mutex);
      job->snapshot.run_id = run_id;
      m_jobs[run_id] = job;
    }
    std::lock_guard lock(handshake->mutex);
    handshake->run_id = run_id;
    handshake->done = true;
    handshake->ready.notify_all();
  };
  hooks.progress = [this, job](const engine::ProgressEvent& event) {
    std::lock_guard lock(m_mutex);
    job->snapshot.progress = event;
    ++job->snapshot.updates;
    m_changed.notify_all();
  };

  {
    std::lock_guard lock(m_mutex);
    m_all.push_back(job);
  }
  job->thread = std::thread([this, job, handshake, launch = std::move(launch), hooks] {
    engine::SearchOutcome outcome;
    try {
      outcome = m_runner(launch, job->cancel, hooks);
    } catch (const std::exception& error) {
      // The search reports failures as values; this keeps a defect from ending the server.
      outcome.status = "failed";
      outcome.failure = core::make_failure(core::FailureKind::internal, "search", error.what());
      outcome.stop_reason = outcome.failure->describe();
    }
    {
      std::lock_guard lock(m_mutex);
      job->snapshot.finished = true;
      ++job->snapshot.updates;
      job->snapshot.outcome = std::move(outcome);
      m_changed.notify_all();
    }
    std::lock_guard lock(handshake->mutex);
    if (!handshake->done) {
      handshake->done = true;
      handshake->failure = job->snapshot.outcome->failure.value_or(core::make_failure(
          core::FailureKind::internal, "search", "the search ended before it started"));
      handshake->ready.notify_all();
    }
  });

  std::unique_lock lock(handshake->mutex);
  handshake->ready.wait(lock, [&] { return handshake->done; });
  if (handshake->failure) {
    return *handshake->failure;
  }
  return handshake->run_id;
}

std::optional<JobSnapshot> SearchJobs::snapshot(const std::string& run_id) const {
  std::lock_guard lock(m_mutex);
  auto found = m_jobs.find(run_id);
  if (found == m_jobs.end()) {
    return std::nullopt;
  }
  return found->second->snapshot;
}

std::optional<JobSnapshot> SearchJobs::wait(const std::string& run_id, long after_update,
                                            std::chrono::milliseconds timeout,
                                            const core::CancelToken& cancel) const {
  const auto deadline = m_clock->now() + timeout;
  std::unique_lock lock(m_mutex);
  auto found = m_jobs.find(run_id);
  if (found == m_jobs.end()) {
    return std::nullopt;
  }
  const auto job = found->second;
  auto settled = [&] {
    return job->snapshot.finished || job->snapshot.updates > after_update || cancel.cancelled();
  };
  while (!settled()) {
    const auto now = m_clock->now();
    if (now >= deadline) {
      break;
    }
    // Short slices so that a cancelled caller is noticed promptly.
    const auto slice =
        std::min<core::Clock::Duration>(deadline - now, std::chrono::milliseconds(200));
    m_clock->wait_for(slice, [&](core::Clock::Duration real_timeout) {
      return m_changed.wait_for(lock, real_timeout, settled);
    });
  }
  return job->snapshot;
}

bool SearchJobs::cancel(const std::string& run_id) {
  std::lock_guard lock(m_mutex);
  auto found = m_jobs.find(run_id);
  if (found == m_jobs.end() || found->second->snapshot.finished) {
    return false;
  }
  found->second->cancel.cancel();
  return true;
}

server::JobSource::Started SearchTaskSource::start(server::ToolContext& context,
                                                   const server::TaskCall& call) {
  nlohmann::json result = call(context);
  const auto structured = result.value("structuredContent", nlohmann::json::object());
  if (result.value("isError", false) || !structured.contains("run_id") ||
      !structured.at("run_id").is_string()) {
    return {"", std::move(result)};
  }
  return {structured.at("run_id").get<std::string>(), nullptr};
}

server::JobStatus SearchTaskSource::status(const std::string& run_id) {
  server::JobStatus status;
  auto snapshot = m_jobs.snapshot(run_id);
  if (!snapshot) {
    status.state = server::TaskState::failed;
    status.error = {{"code", -32603}, {"message", "search run " + run_id + " is not running here"}};
    return status;
  }
  if (!snapshot->finished) {
    const auto& progress = snapshot->progress;
    status.message =
        "run " + run_id + ": " + (progress.phase.empty() ? "starting" : progress.phase);
    if (progress.iterations > 0) {
      status.message += ", iteration " + std::to_string(progress.iteration) + "/" +
                        std::to_string(progress.iterations);
    }
    status.message += ", " + std::to_string(progress.candidates_evaluated) + " candidates";
    return status;
  }
  const std::string outcome = snapshot->outcome ? snapshot->outcome->status : "completed";
  status.state =
      outcome == "cancelled" ? server::TaskState::cancelled : server::TaskState::completed;
  status.message = "run " + run_id + " " + outcome;
  status.result = m_final_result(run_id);
  return status;
}

}  // namespace autocomp::tools
