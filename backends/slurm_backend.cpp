#include "backends/slurm_backend.hpp"

#include <libssh/libssh.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "backends/harness_bundle.hpp"
#include "backends/harness_output.hpp"
#include "backends/slurm_head.hpp"
#include "core/environment.hpp"
#include "core/process.hpp"

namespace autocomp::backends {
namespace {

using namespace std::chrono_literals;

constexpr auto k_command_timeout = 60s;  // one sbatch, scontrol or scancel call
constexpr auto k_run_grace = 10s;        // after a request's timeout, before scancel
constexpr auto k_drain_timeout = 20s;    // waiting for cancelled jobs to leave the queue
constexpr std::size_t k_max_result_bytes = 16u << 20;
constexpr int k_kill_after_s = 2;    // `timeout -k` in the job
constexpr int k_missing_polls = 20;  // polls without any record before giving up

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

std::string random_name() {
  static std::atomic<unsigned> counter{0};
  thread_local std::mt19937_64 generator{std::random_device{}()};
  std::ostringstream name;
  name << std::hex << generator() << "-" << counter.fetch_add(1);
  return name.str();
}

// The environment a job gets: the submitting shell's environment filtered by the harness
// allow-list every backend uses (core/environment.hpp), plus SLURM_CONF for sbatch itself. sbatch
// exports what is left (--export=ALL), so Slurm does not build a login environment (--export=NONE
// would) and no API key reaches a job.
std::string job_environment_filter() {
  return core::harness_environment_shell_filter({"SLURM_CONF"});
}

struct SlurmConfig {
  std::string identity;
  std::string device;
  int fake_ms = 0;
  int device_seed = -1;  // device sim-perturbed only
  std::string target;
  std::string python;        // on the compute nodes
  std::string local_python;  // for `version` on this machine
  std::string partition;
  std::string account;
  std::string qos;
  std::string time;
  std::string gres;
  int cores_per_task = 0;
  int max_parallel = 0;
  int slots = 16;
  std::string stage;  // empty: ~/.autocomp/slurm on the head
  std::string setup;  // a file sourced before Slurm's commands (module loads, SLURM_CONF)
  std::chrono::milliseconds poll{100};
  std::chrono::milliseconds queue_timeout{std::chrono::minutes(30)};
  bool remote = false;
  SshEndpoint endpoint;
  HarnessBundle bundle;
  // Of the poll waits, the queue and run timeouts and the drain; null: the steady clock.
  std::shared_ptr<const core::Clock> clock;
};

// One evaluation in a submitted array.
struct Task {
  std::size_t request = 0;  // index into the batch
  std::string dir;          // its folder on the shared filesystem
  bool done = false;
  bool running = false;
  std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point submitted;
  std::string job;  // "ARRAY_TASK"
  std::string node;
  std::string state;
  std::string reason;
};

struct RoundOutcome {
  std::vector<std::size_t> retry;                    // requests to submit once more
  std::map<std::size_t, EvalResult> first_attempts;  // the failed first attempt of each
  std::set<std::string> bad_nodes;
};

class SlurmBackend final : public Backend {
 public:
  SlurmBackend(SlurmConfig config, std::unique_ptr<SlurmHead> head)
      : m_config(std::move(config)),
        m_head(std::move(head)),
        m_clock(core::clock_or_steady(m_config.clock)) {}

  std::string identity() const override { return m_config.identity; }
  std::string device() const override { return m_config.device; }
  int slots() const override { return m_config.slots; }

  std::string harness_version() const override {
    std::call_once(m_version_once, [this] {
      m_version = probe_harness_version(m_config.local_python, m_config.bundle, m_config.device);
    });
    return m_version;
  }

  std::vector<EvalResult> evaluate(const std::vector<EvalRequest>& batch,
                                   const core::CancelToken& cancel,
                                   const ProgressFn& progress) override {
    std::vector<EvalResult> results(batch.size());
    if (batch.empty()) {
      return results;
    }
    std::string version = harness_version();
    std::atomic<std::size_t> done{0};
    auto finished = [&](std::size_t index) {
      EvalResult& result = results[index];
      result.backend_identity = m_config.identity;
      result.harness_version = version;
      if (result.device.empty()) {
        result.device = m_config.device;
      }
      if (result.host.empty()) {
        result.host = m_head->label();
      }
      result.receipt.backend = m_config.identity;
      result.receipt.host = result.host;
      std::size_t count = done.fetch_add(1) + 1;
      if (progress) {
        progress(count, batch.size(),
                 result.ok() ? "evaluated" : std::string(to_string(result.failure->kind)));
      }
    };

    std::vector<std::size_t> pending(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      pending[i] = i;
    }
    std::set<std::string> exclude;
    std::map<std::size_t, EvalResult> first_attempts;
    for (int round = 0; round < 2 && !pending.empty(); ++round) {
      RoundOutcome outcome = run_round(batch, pending, exclude, round == 0, cancel, results);
      for (std::size_t index : pending) {
        if (std::find(outcome.retry.begin(), outcome.retry.end(), index) != outcome.retry.end()) {
          continue;
        }
        auto first = first_attempts.find(index);
        if (first != first_attempts.end() && results[index].failure) {
          if (results[index].failure->stage == "submit") {
            // No other node could take it: the node failure is the answer.
            std::string why = results[index].failure->message;
            results[index] = first->second;
            results[index].failure->message += "; not retried elsewhere: " + why;
          } else {
            results[index].failure->message +=
                " (on a retry after: " + first->second.failure->message + ")";
          }
        }
        finished(index);
      }
      exclude.insert(outcome.bad_nodes.begin(), outcome.bad_nodes.end());
      first_attempts.insert(outcome.first_attempts.begin(), outcome.first_attempts.end());
      pending = std::move(outcome.retry);
    }
    return results;
  }

 private:
  core::Status ensure_bundle(const std::string& stage, std::vector<StepTiming>& steps) {
    std::lock_guard lock(m_bundle_mutex);
    if (m_bundle_ready) {
      return core::ok_status();
    }
    auto start = std::chrono::steady_clock::now();
    const std::string bundle_dir = stage + "/harness-" + m_config.bundle.hash;
    auto present = m_head->exists(bundle_dir + "/harness/autocomp_harness.py");
    if (!present.ok()) {
      return present.failure();
    }
    if (!*present) {
      const std::string staging = stage + "/.upload-" + random_name();
      for (std::size_t i = 0; i < m_config.bundle.files.size(); ++i) {
        std::string path = staging + "/" + m_config.bundle.files[i];
        if (auto made = m_head->make_dirs(path.substr(0, path.rfind('/'))); !made.ok()) {
          return made;
        }
        if (auto written = m_head->write_file(path, m_config.bundle.contents[i]); !written.ok()) {
          return written;
        }
      }
      if (auto renamed = m_head->rename(staging, bundle_dir); !renamed.ok()) {
        auto now_present = m_head->exists(bundle_dir + "/harness/autocomp_harness.py");
        if (!now_present.ok() || !*now_present) {
          return renamed;
        }
        (void)m_head->run("rm -rf " + shell_quote(staging), k_command_timeout, {});
      }
      m_bundle_uploads.fetch_add(1);
    }
    steps.push_back({"stage_bundle", ms_since(start)});
    m_bundle_ready = true;
    return core::ok_status();
  }

  core::Result<std::string> stage_dir() {
    std::lock_guard lock(m_bundle_mutex);
    if (!m_stage.empty()) {
      return m_stage;
    }
    if (!m_config.stage.empty() && m_config.stage.front() == '/') {
      m_stage = m_config.stage;
    } else {
      auto home = m_head->home();
      if (!home.ok()) {
        return home.failure();
      }
      std::string rest = m_config.stage.empty() ? ".autocomp/slurm" : m_config.stage;
      if (rest == "~") {
        rest.clear();
      } else if (rest.rfind("~/", 0) == 0) {
        rest = rest.substr(2);
      }
      m_stage = *home + (rest.empty() ? "" : "/" + rest);
    }
    return m_stage;
  }

  // The script one task runs inside its job: records where it runs, picks NeuronCores, runs the
  // harness under `timeout` and leaves its exit status in `rc` (written last, atomically).
  std::string task_script(const EvalRequest& request, const std::string& dir,
                          const WorkFileNames& files, const std::string& bundle_dir) const {
    std::string script = "#!/bin/sh\ncd " + shell_quote(dir) + " || exit 1\n" +
                         "echo \"${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}_${SLURM_ARRAY_TASK_ID:-0} "
                         "$SLURMD_NODENAME\" > where\n";
    if (m_config.device == "neuron") {
      // GRES plugins or prologs that know the devices set NEURON_RT_VISIBLE_CORES; otherwise the
      // cores are claimed on the node among the evaluations Slurm placed there.
      int cores = std::max(1, m_config.cores_per_task);
      script +=
          "if [ -z \"$NEURON_RT_VISIBLE_CORES\" ]; then\n"
          "  n=" +
          std::to_string(cores) +
          "; got=''; c=0; lockdir=${TMPDIR:-/tmp}/autocomp-neuron-cores\n"
          "  mkdir -p \"$lockdir\"\n"
          "  while [ $c -lt 256 ] && [ $(echo $got | wc -w) -lt $n ]; do\n"
          "    if mkdir \"$lockdir/$c\" 2>/dev/null; then got=\"$got $c\"; fi; c=$((c+1))\n"
          "  done\n"
          "  trap 'for k in $got; do rmdir \"$lockdir/$k\"; done' EXIT\n"
          "  NEURON_RT_VISIBLE_CORES=$(echo $got | tr ' ' ','); export "
          "NEURON_RT_VISIBLE_CORES\n"
          "fi\n";
    }
    script += "timeout -k " + std::to_string(k_kill_after_s) + " " +
              timeout_command_seconds(request.timeout) + " " + shell_quote(m_config.python) +
              " -I -B " + shell_quote(bundle_dir + "/harness/autocomp_harness.py");
    for (const auto& arg :
         evaluation_arguments(request, dir, files, m_config.device, m_config.fake_ms,
                              m_config.target, m_config.device_seed)) {
      script += " " + shell_quote(arg);
    }
    script += " < /dev/null > out.json 2> err.txt\necho $? > rc.tmp && mv rc.tmp rc\n";
    return script;
  }

  std::string submit_command(const std::string& work, std::size_t count,
                             const std::vector<const EvalRequest*>& requests,
                             const std::set<std::string>& exclude) const {
    std::chrono::milliseconds longest{0};
    bool background = true;
    for (const auto* request : requests) {
      longest = std::max(longest, request->timeout);
      background = background && request->lane == Lane::background;
    }
    std::string array = "0-" + std::to_string(count - 1);
    if (m_config.max_parallel > 0) {
      array += "%" + std::to_string(m_config.max_parallel);
    }
    std::string time = m_config.time;
    if (time.empty()) {
      // Slurm's limit is a backstop; the run's own `timeout` and the poll loop act first.
      auto minutes = std::chrono::duration_cast<std::chrono::minutes>(longest).count() + 2;
      time = std::to_string(minutes);
    }
    std::string command = job_environment_filter() + "exec sbatch --parsable" +
                          " --job-name=autocomp --no-requeue --export=ALL --array=" + array +
                          " --time=" + shell_quote(time) + " --chdir=" + shell_quote(work) +
                          " --output=" + shell_quote(work + "/%a/slurm.out") +
                          " --error=" + shell_quote(work + "/%a/slurm.out");
    if (!m_config.partition.empty()) {
      command += " --partition=" + shell_quote(m_config.partition);
    }
    if (!m_config.account.empty()) {
      command += " --account=" + shell_quote(m_config.account);
    }
    if (!m_config.qos.empty()) {
      command += " --qos=" + shell_quote(m_config.qos);
    }
    if (!m_config.gres.empty()) {
      command += " --gres=" + shell_quote(m_config.gres + ":" +
                                          std::to_string(std::max(1, m_config.cores_per_task)));
    }
    if (background) {
      command += " --nice=100";  // interactive evaluations go first
    }
    if (!exclude.empty()) {
      std::string nodes;
      for (const auto& node : exclude) {
        nodes += (nodes.empty() ? "" : ",") + node;
      }
      command += " --exclude=" + shell_quote(nodes);
    }
    command += " " + shell_quote(work + "/job.sh");
    return command;
  }

  // Submits `indices` as one job array and follows it to the end. Fills their results, except
  // for those returned for a retry (a node failure while `may_retry`).
  RoundOutcome run_round(const std::vector<EvalRequest>& batch,
                         const std::vector<std::size_t>& indices,
                         const std::set<std::string>& exclude, bool may_retry,
                         const core::CancelToken& cancel, std::vector<EvalResult>& results) {
    RoundOutcome outcome;
    auto fail_all = [&](const core::Failure& failure) {
      for (std::size_t index : indices) {
        results[index] = EvalResult{};
        results[index].failure = failure;
      }
      return outcome;
    };
    if (cancel.cancelled()) {
      return fail_all(core::make_failure(core::FailureKind::cancelled, "run",
                                         "cancelled before it was submitted"));
    }
    std::vector<StepTiming> steps;
    auto stage = stage_dir();
    if (!stage.ok()) {
      return fail_all(stage.failure());
    }
    if (auto bundle = ensure_bundle(*stage, steps); !bundle.ok()) {
      return fail_all(bundle.failure());
    }
    const std::string bundle_dir = *stage + "/harness-" + m_config.bundle.hash;

    // stage: one folder per evaluation, the sources and its script
    auto start = std::chrono::steady_clock::now();
    const std::string work = *stage + "/work/" + random_name();
    std::vector<Task> tasks(indices.size());
    std::vector<const EvalRequest*> requests;
    for (std::size_t t = 0; t < indices.size(); ++t) {
      const EvalRequest& request = batch[indices[t]];
      requests.push_back(&request);
      Task& task = tasks[t];
      task.request = indices[t];
      task.dir = work + "/" + std::to_string(t);
      const WorkFileNames files = work_file_names(request);
      core::Status status = m_head->make_dirs(task.dir);
      if (status.ok() && files.kernel.find('/') != std::string::npos) {
        status =
            m_head->make_dirs(task.dir + "/" + files.kernel.substr(0, files.kernel.rfind('/')));
      }
      if (status.ok()) {
        status = m_head->write_file(task.dir + "/" + files.kernel, request.kernel_source);
      }
      if (status.ok()) {
        status = m_head->write_file(task.dir + "/" + files.problem, request.problem_source);
      }
      if (status.ok() && !cost_table_file_name(request).empty()) {
        status = m_head->write_file(task.dir + "/" + cost_table_file_name(request),
                                    request.cost_table_json);
      }
      if (status.ok()) {
        status = check_kernel_modules(request, files);
      }
      for (std::size_t i = 0; status.ok() && i < request.kernel_modules.size(); ++i) {
        const auto& module = request.kernel_modules[i];
        if (const auto slash = module.path.rfind('/'); slash != std::string::npos) {
          status = m_head->make_dirs(task.dir + "/" + module.path.substr(0, slash));
        }
        if (status.ok()) {
          status = m_head->write_file(task.dir + "/" + module.path, module.source);
        }
      }
      if (status.ok()) {
        status = m_head->write_file(task.dir + "/run.sh",
                                    task_script(request, task.dir, files, bundle_dir));
      }
      if (!status.ok()) {
        remove_work(work);
        return fail_all(status.failure());
      }
    }
    if (auto written =
            m_head->write_file(work + "/job.sh", "#!/bin/sh\nexec sh \"" + work +
                                                     "/${SLURM_ARRAY_TASK_ID:-0}/run.sh\"\n");
        !written.ok()) {
      remove_work(work);
      return fail_all(written.failure());
    }
    steps.push_back({"stage", ms_since(start)});

    // submit
    start = std::chrono::steady_clock::now();
    auto submitted =
        slurm_command(submit_command(work, tasks.size(), requests, exclude), k_command_timeout, {});
    steps.push_back({"submit", ms_since(start)});
    std::string array_job;
    if (submitted.ok() && submitted->exit_status == 0) {
      std::istringstream lines(submitted->stdout_text);
      std::string line;
      while (std::getline(lines, line)) {
        std::string id = line.substr(0, line.find(';'));
        if (!id.empty() && id.find_first_not_of("0123456789") == std::string::npos) {
          array_job = id;
        }
      }
    }
    if (array_job.empty()) {
      remove_work(work);
      std::string why = submitted.ok() ? core::tail_text(submitted->stdout_text, 600)
                                       : submitted.failure().message;
      return fail_all(
          core::make_failure(core::FailureKind::unavailable, "submit",
                             "sbatch on " + m_head->label() + " did not accept the job: " + why));
    }
    auto submit_time = m_clock->now();
    for (auto& task : tasks) {
      task.submitted = submit_time;
    }

    // follow: scontrol for the states, the rc files for the results
    bool killed = false;
    int empty_polls = 0;
    auto interval = m_config.poll;
    const std::string poll = "scontrol -o show job " + array_job + " 2>/dev/null; echo @@rc; cd " +
                             shell_quote(work) +
                             " && for f in [0-9]*/rc; do [ -f \"$f\" ] && echo \"${f%/rc} "
                             "$(cat \"$f\")\"; done; true";
    auto remaining = [&] {
      return std::count_if(tasks.begin(), tasks.end(), [](const Task& t) { return !t.done; });
    };
    while (remaining() > 0) {
      if (cancel.cancelled()) {
        scancel(array_job);
        killed = true;
        for (auto& task : tasks) {
          if (!task.done) {
            task.done = true;
            results[task.request] = EvalResult{};
            results[task.request].failure = core::make_failure(
                core::FailureKind::cancelled, "run",
                "cancelled; Slurm job " + array_job + " was cancelled with scancel");
          }
        }
        break;
      }
      auto polled = slurm_command(poll, k_command_timeout, {});
      if (!polled.ok()) {
        if (polled.failure().kind == core::FailureKind::transport_error && ++empty_polls > 3) {
          scancel(array_job);
          killed = true;
          for (auto& task : tasks) {
            if (!task.done) {
              task.done = true;
              results[task.request] = EvalResult{};
              results[task.request].failure = polled.failure();
            }
          }
          break;
        }
        m_clock->sleep_for(interval);
        continue;
      }
      const std::string& text = polled->stdout_text;
      auto split = text.find("@@rc");
      auto records = parse_scontrol_jobs(text.substr(0, split));
      std::map<std::size_t, int> exit_codes;
      if (split != std::string::npos) {
        std::istringstream lines(text.substr(split + 4));
        std::size_t t = 0;
        int rc = 0;
        while (lines >> t >> rc) {
          exit_codes[t] = rc;
        }
      }
      bool any_pending_range = false;
      std::map<std::size_t, const SlurmJobRecord*> by_task;
      for (const auto& record : records) {
        if (!record.array_task_id.empty() &&
            record.array_task_id.find_first_not_of("0123456789") == std::string::npos) {
          by_task[std::stoul(record.array_task_id)] = &record;
        } else {
          any_pending_range = true;
        }
      }
      empty_polls = records.empty() ? empty_polls + 1 : 0;
      bool progressed = false;
      for (std::size_t t = 0; t < tasks.size(); ++t) {
        Task& task = tasks[t];
        if (task.done) {
          continue;
        }
        if (auto it = by_task.find(t); it != by_task.end()) {
          const SlurmJobRecord& record = *it->second;
          task.state = record.state;
          task.reason = record.reason;
          task.job = array_job + "_" + std::to_string(t);
          if (!record.node.empty()) {
            task.node = record.node;
          }
          if (record.state == "RUNNING" && !task.running) {
            task.running = true;
            task.started = m_clock->now();
          }
        }
        if (auto rc = exit_codes.find(t); rc != exit_codes.end()) {
          collect(task, rc->second, array_job, results);
          progressed = true;
          continue;
        }
        auto it = by_task.find(t);
        if (it != by_task.end() && slurm_state_is_final(it->second->state)) {
          bool retryable = false;
          auto failure = slurm_end_failure(it->second->state, it->second->reason, task.job,
                                           task.node, retryable);
          task.done = true;
          progressed = true;
          if (retryable && may_retry) {
            outcome.retry.push_back(task.request);
            if (!task.node.empty()) {
              outcome.bad_nodes.insert(task.node);
            }
            EvalResult& first = outcome.first_attempts[task.request];
            first.failure = failure;
            fill_where(first, task);
            continue;
          }
          results[task.request] = EvalResult{};
          results[task.request].failure = failure;
          fill_where(results[task.request], task);
          continue;
        }
        const EvalRequest& request = batch[task.request];
        if (task.running && m_clock->now() - task.started > request.timeout + k_run_grace) {
          scancel(task.job);
          killed = true;
          task.done = true;
          results[task.request] = EvalResult{};
          results[task.request].failure = core::make_failure(
              core::FailureKind::timeout, "run",
              "no result within " + std::to_string(request.timeout.count()) + " ms; Slurm job " +
                  task.job + " on " + task.node + " was cancelled with scancel");
          fill_where(results[task.request], task);
        } else if (!task.running && m_clock->now() - task.submitted > m_config.queue_timeout) {
          scancel(task.job);
          killed = true;
          task.done = true;
          results[task.request] = EvalResult{};
          results[task.request].failure = core::make_failure(
              core::FailureKind::unavailable, "queue",
              "Slurm job " + task.job + " was still pending after " +
                  std::to_string(
                      std::chrono::duration_cast<std::chrono::seconds>(m_config.queue_timeout)
                          .count()) +
                  " s (" + (task.reason.empty() ? "no reason given" : task.reason) +
                  "); it was cancelled");
        } else if (it == by_task.end() && !any_pending_range && empty_polls > k_missing_polls) {
          task.done = true;
          results[task.request] = EvalResult{};
          results[task.request].failure = core::make_failure(
              core::FailureKind::unavailable, "run",
              "Slurm job " + array_job + "_" + std::to_string(t) +
                  " left the queue without a result and without a record (scontrol knows "
                  "nothing of it)");
        }
      }
      if (remaining() == 0) {
        break;
      }
      if (progressed) {
        interval = m_config.poll;
      } else {
        interval = std::min<std::chrono::milliseconds>(interval * 3 / 2, 500ms);
      }
      m_clock->sleep_for(interval);
    }

    for (const auto& task : tasks) {
      const auto& failure = results[task.request].failure;
      killed = killed || (failure && failure->kind == core::FailureKind::timeout);
    }
    if (killed) {
      // A job killed at its timeout or cancelled leaves the queue before the results return.
      drain(array_job);
    }
    start = std::chrono::steady_clock::now();
    remove_work(work);
    double cleanup_ms = ms_since(start);
    for (auto& task : tasks) {
      if (std::find(outcome.retry.begin(), outcome.retry.end(), task.request) !=
          outcome.retry.end()) {
        continue;
      }
      EvalResult& result = results[task.request];
      std::vector<StepTiming> all = steps;
      if (task.running) {
        all.push_back(
            {"queue",
             std::chrono::duration<double, std::milli>(task.started - task.submitted).count()});
      }
      all.push_back({"cleanup", cleanup_ms});
      all.insert(all.end(), result.steps.begin(), result.steps.end());
      result.steps = std::move(all);
    }
    return outcome;
  }

  void fill_where(EvalResult& result, const Task& task) const {
    result.receipt.job = task.job;
    result.receipt.node = task.node;
    if (!task.node.empty()) {
      result.host = task.node;
    }
  }

  // Reads a finished task's result from its folder.
  void collect(Task& task, int rc, const std::string& array_job, std::vector<EvalResult>& results) {
    task.done = true;
    auto start = std::chrono::steady_clock::now();
    if (auto where = m_head->read_file(task.dir + "/where", 4096, false); where.ok()) {
      std::istringstream words(*where);
      std::string job;
      std::string node;
      words >> job >> node;
      if (!job.empty()) {
        task.job = job;
      }
      if (!node.empty()) {
        task.node = node;
      }
    }
    if (task.job.empty()) {
      task.job = array_job;
    }
    EvalResult result;
    if (stopped_by_timeout_command(rc)) {
      result.failure =
          core::make_failure(core::FailureKind::timeout, "run",
                             "the harness did not finish within its timeout in Slurm job " +
                                 task.job + " on " + task.node + "; its process group was killed");
    } else {
      auto out = m_head->read_file(task.dir + "/out.json", k_max_result_bytes, false);
      std::string out_text = out.ok() ? *out : std::string{};
      result = parse_harness_output(out_text, "", "");
      if (!result.ok() && result.failure->kind == core::FailureKind::harness_error) {
        auto err = m_head->read_file(task.dir + "/err.txt", k_stderr_tail_bytes, true);
        std::string err_text = err.ok() ? *err : std::string{};
        if (auto log = m_head->read_file(task.dir + "/slurm.out", 1024, true); log.ok()) {
          err_text += *log;
        }
        result = parse_harness_output(
            out_text, err_text,
            "exit status " + std::to_string(rc) + " in Slurm job " + task.job + " on " + task.node);
      }
    }
    std::vector<StepTiming> harness_steps = std::move(result.steps);
    double run_ms =
        task.running
            ? std::chrono::duration<double, std::milli>(m_clock->now() - task.started).count()
            : 0;
    result.steps = {{"run", run_ms}, {"fetch", ms_since(start)}};
    result.steps.insert(result.steps.end(), harness_steps.begin(), harness_steps.end());
    fill_where(result, task);
    results[task.request] = std::move(result);
  }

  void scancel(const std::string& job) {
    (void)slurm_command("scancel " + shell_quote(job), k_command_timeout, {});
  }

  // Waits until none of the array's tasks is pending, running or completing any more.
  void drain(const std::string& array_job) {
    auto deadline = m_clock->now() + k_drain_timeout;
    while (m_clock->now() < deadline) {
      auto listed =
          slurm_command("squeue -h -j " + array_job + " -o %i 2>/dev/null", k_command_timeout, {});
      if (listed.ok() && listed->stdout_text.find_first_not_of(" \n") == std::string::npos) {
        return;
      }
      m_clock->sleep_for(200ms);
      scancel(array_job);
    }
  }

  // Runs a Slurm command on the head, after sourcing the `setup` file when one is configured.
  core::Result<ExecOutput> slurm_command(const std::string& command,
                                         std::chrono::milliseconds timeout,
                                         const core::CancelToken& cancel) {
    if (m_config.setup.empty()) {
      return m_head->run(command, timeout, cancel);
    }
    return m_head->run(". " + shell_quote(m_config.setup) + " >/dev/null 2>&1; " + command, timeout,
                       cancel);
  }

  void remove_work(const std::string& work) {
    (void)m_head->run("rm -rf " + shell_quote(work), k_command_timeout, {});
  }

  SlurmConfig m_config;
  std::unique_ptr<SlurmHead> m_head;
  std::shared_ptr<const core::Clock> m_clock;
  std::mutex m_bundle_mutex;
  bool m_bundle_ready = false;
  std::string m_stage;
  std::atomic<int> m_bundle_uploads{0};
  mutable std::once_flag m_version_once;
  mutable std::string m_version;
};

std::string field(const std::string& line, const std::string& name) {
  std::string key = " " + name + "=";
  auto at = (" " + line).find(key);
  if (at == std::string::npos) {
    return {};
  }
  auto begin = at + key.size() - 1;
  auto end = line.find(' ', begin);
  return line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

}  // namespace

std::vector<SlurmJobRecord> parse_scontrol_jobs(const std::string& text) {
  std::vector<SlurmJobRecord> records;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("JobId=", 0) != 0) {
      continue;
    }
    SlurmJobRecord record;
    record.job_id = field(line, "JobId");
    record.array_job_id = field(line, "ArrayJobId");
    record.array_task_id = field(line, "ArrayTaskId");
    record.state = field(line, "JobState");
    record.reason = field(line, "Reason");
    record.node = field(line, "NodeList");
    if (record.node == "(null)") {
      record.node.clear();
    }
    if (record.reason == "None") {
      record.reason.clear();
    }
    records.push_back(std::move(record));
  }
  return records;
}

bool slurm_state_is_final(const std::string& state) {
  static const std::set<std::string> k_final{
      "COMPLETED", "FAILED",   "CANCELLED",     "TIMEOUT", "NODE_FAIL",   "PREEMPTED",
      "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"};
  return k_final.count(state) > 0;
}

core::Failure slurm_end_failure(const std::string& state, const std::string& reason,
                                const std::string& job, const std::string& node, bool& retryable) {
  retryable = state == "NODE_FAIL" || state == "BOOT_FAIL" || state == "PREEMPTED";
  std::string where = "Slurm job " + job + (node.empty() ? "" : " on " + node);
  std::string why = reason.empty() ? "" : " (" + reason + ")";
  core::FailureKind kind = core::FailureKind::unavailable;
  std::string what;
  if (state == "NODE_FAIL") {
    what = "node failure: the node stopped answering while the job ran";
    kind = core::FailureKind::transport_error;
  } else if (state == "BOOT_FAIL") {
    what = "the node failed to boot";
    kind = core::FailureKind::transport_error;
  } else if (state == "PREEMPTED") {
    what = "preempted by a higher-priority job";
  } else if (state == "TIMEOUT" || state == "DEADLINE") {
    what = "Slurm's time limit ended the job";
    kind = core::FailureKind::timeout;
  } else if (state == "CANCELLED") {
    what = "the job was cancelled outside this evaluation (scancel or an administrator)";
    kind = core::FailureKind::cancelled;
  } else if (state == "OUT_OF_MEMORY") {
    what = "the job ran out of memory";
    kind = core::FailureKind::runtime_error;
  } else {
    what = "the job ended (" + state + ") without leaving a result";
    kind = core::FailureKind::harness_error;
  }
  return core::make_failure(kind, "run", where + ": " + what + why);
}

core::Result<std::shared_ptr<Backend>> make_slurm_backend(const std::vector<BackendSpec>& specs,
                                                          const BackendOptions& options) {
  return make_slurm_backend(specs, options, nullptr);
}

core::Result<std::shared_ptr<Backend>> make_slurm_backend(const std::vector<BackendSpec>& specs,
                                                          const BackendOptions& options,
                                                          std::unique_ptr<SlurmHead> head) {
  if (specs.size() != 1) {
    return core::make_failure(core::FailureKind::invalid_argument, "backend",
                              "a Slurm backend cannot be pooled with other specs; one cluster "
                              "schedules its own nodes");
  }
  const BackendSpec& spec = specs.front();
  auto bad = [&](const std::string& why) {
    return core::make_failure(core::FailureKind::invalid_argument, "backend",
                              "invalid backend spec '" + spec.text + "': " + why);
  };
  bool remote = spec.scheme == "slurm+ssh";
  static const std::set<std::string> k_known{"partition",
                                             "device",
                                             "seed",
                                             "python",
                                             "stage",
                                             "account",
                                             "qos",
                                             "time",
                                             "gres",
                                             "target",
                                             "fake_ms",
                                             "slots",
                                             "cores_per_task",
                                             "max_parallel",
                                             "queue_timeout",
                                             "poll_ms",
                                             "key",
                                             "known_hosts",
                                             "accept_new_host_key",
                                             "connect_timeout",
                                             "setup"};
  for (const auto& [name, value] : spec.params) {
    if (k_known.count(name) == 0) {
      return bad("unknown option '" + name + "'");
    }
  }
  if (!remote && !spec.host.empty()) {
    return bad("a local Slurm spec has no host; use slurm+ssh://user@head?... for a remote one");
  }
  if (remote && spec.host.empty()) {
    return bad("slurm+ssh needs a head node: slurm+ssh://user@head?partition=P");
  }
  SlurmConfig config;
  config.remote = remote;
  auto device = device_choice(spec.text, spec.params,
                              options.default_device.empty() ? "neuron" : options.default_device);
  if (!device.ok()) {
    return device.failure();
  }
  config.device = device->device;
  config.device_seed = device->seed;
  for (const char* name : {"fake_ms", "slots", "cores_per_task", "max_parallel", "queue_timeout",
                           "poll_ms", "connect_timeout"}) {
    auto value = spec.int_param(name);
    if (!value.ok()) {
      return value.failure();
    }
    if (!value.value()) {
      continue;
    }
    int v = *value.value();
    std::string n = name;
    if (n == "fake_ms") {
      config.fake_ms = v;
    } else if (n == "slots") {
      config.slots = v;
    } else if (n == "cores_per_task") {
      config.cores_per_task = v;
    } else if (n == "max_parallel") {
      config.max_parallel = v;
    } else if (n == "queue_timeout") {
      config.queue_timeout = std::chrono::seconds(v);
    } else if (n == "poll_ms") {
      config.poll = std::chrono::milliseconds(v);
    } else {
      config.endpoint.timeout = std::chrono::seconds(v);
    }
  }
  if (config.max_parallel > 0 && !spec.param("slots")) {
    config.slots = config.max_parallel;
  }
  config.partition = spec.param("partition").value_or("");
  config.account = spec.param("account").value_or("");
  config.qos = spec.param("qos").value_or("");
  config.time = spec.param("time").value_or("");
  config.gres = spec.param("gres").value_or("");
  config.stage = spec.param("stage").value_or("");
  config.setup = spec.param("setup").value_or("");
  config.target = spec.param("target").value_or(options.default_target);
  config.local_python = resolve_python(options.python);
  config.clock = options.clock;
  config.python = spec.param("python").value_or(remote ? "python3" : config.local_python);

  std::string query = "partition=" + config.partition + "&" +
                      DeviceChoice{config.device, config.device_seed}.identity_query().substr(1);
  if (config.device == "fake" && config.fake_ms > 0) {
    query += "&fake_ms=" + std::to_string(config.fake_ms);
  }
  if (remote) {
    static std::once_flag init_once;
    std::call_once(init_once, [] { ssh_init(); });
    config.endpoint.host = spec.host;
    config.endpoint.port = spec.port > 0 ? spec.port : 22;
    config.endpoint.user = spec.user;
    if (auto key = spec.param("key")) {
      config.endpoint.key_files.push_back(expand_home(*key));
    }
    config.endpoint.known_hosts = expand_home(spec.param("known_hosts").value_or(""));
    config.endpoint.accept_new_host_key =
        spec.flag("accept_new_host_key") || options.accept_new_host_keys;
    config.identity = "slurm+ssh://" + config.endpoint.describe() + "?" + query;
    if (!head) {
      head = make_ssh_head(config.endpoint);
    }
  } else {
    config.identity = "slurm:?" + query;
    if (!head) {
      head = make_local_head();
    }
  }

  auto root = locate_harness_dir(options.harness_dir);
  if (!root.ok()) {
    return root.failure();
  }
  auto bundle = load_harness_bundle(*root);
  if (!bundle.ok()) {
    return bundle.failure();
  }
  config.bundle = std::move(bundle).value();
  return std::shared_ptr<Backend>(
      std::make_shared<SlurmBackend>(std::move(config), std::move(head)));
}

}  // namespace autocomp::backends
