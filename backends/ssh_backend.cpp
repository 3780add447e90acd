#include "backends/ssh_backend.hpp"

#include <libssh/libssh.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "backends/harness_bundle.hpp"
#include "backends/harness_output.hpp"
#include "backends/ssh_connection.hpp"
#include "core/environment.hpp"
#include "core/process.hpp"

namespace autocomp::backends {
namespace {

using namespace std::chrono_literals;

// Rotation policy (docs/backends.md): a host whose session cannot be opened leaves rotation at
// once; a host with this many timeouts or transport errors in a row leaves too. It is tried again
// (on probation) after a back-off that starts small and doubles with each outage in a row, up to
// the maximum; a healthy evaluation resets it.
constexpr int k_max_consecutive_failures = 3;
constexpr auto k_first_backoff = std::chrono::seconds(2);
constexpr auto k_max_backoff = std::chrono::minutes(2);
// Remote side: the harness gets the request's timeout; `timeout` then SIGKILLs the group after
// this grace; the client waits this much longer before it gives up on the channel.
constexpr int k_remote_kill_after_s = 2;
constexpr auto k_client_grace = std::chrono::seconds(10);
constexpr auto k_cleanup_timeout = std::chrono::seconds(30);
constexpr auto k_discovery_timeout = std::chrono::seconds(30);
constexpr std::size_t k_max_result_bytes = std::size_t{16} << 20;
// Runs the harness as the child of PID 1 of fresh user and PID namespaces (util-linux unshare):
// when it ends, or `unshare` is killed, the kernel kills everything it started.
constexpr std::string_view k_unshare_prefix =
    "unshare --user --map-current-user --pid --fork --kill-child -- ";
constexpr const char* k_unshare_probe =
    "unshare --user --map-current-user --pid --fork --kill-child -- true </dev/null >/dev/null "
    "2>&1";

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

struct HostConfig {
  std::string spec_text;
  std::string label;  // user@host:port
  SshEndpoint endpoint;
  std::string device;
  std::optional<int> slots;  // configured; otherwise from neuron-ls (device neuron) or 1
  std::string target;
  std::string python;
  std::string remote_dir;  // absolute, or relative to the remote home
  int fake_ms = 0;
  int device_seed = -1;  // device sim-perturbed only
};

struct Host {
  explicit Host(HostConfig c) : config(std::move(c)) {}
  HostConfig config;

  // Guarded by the pool's mutex.
  bool discovered = false;
  bool in_rotation = true;
  std::string reason;
  std::chrono::steady_clock::time_point retry_at{};
  int outages = 0;  // times taken out since the last healthy evaluation
  int consecutive_failures = 0;
  int evaluations = 0;
  int errors = 0;
  int timeouts = 0;
  std::atomic<int> attempts{0};  // for the attempt hook

  // Guarded by bundle_mutex: the remote base folder, whether the bundle is in place, and whether
  // `unshare` can confine runs to their own user and PID namespaces there.
  std::mutex bundle_mutex;
  std::string base_dir;
  bool bundle_ready = false;
  bool can_unshare = false;
  std::atomic<int> bundle_uploads{0};
};

struct Slot {
  Host* host = nullptr;
  int index = 0;
  bool busy = false;                          // guarded by the pool's mutex
  bool background = false;                    // the holder's lane (pool's mutex)
  std::unique_ptr<SshConnection> connection;  // used only by the holder of the slot
};

// What happened to one attempt, for the pool's bookkeeping.
enum class HostEvent { healthy, timeout, transport, unreachable };

struct Attempt {
  EvalResult result;
  HostEvent event = HostEvent::healthy;
  bool retry = false;  // the request never ran to a result on this host; try another
};

class SshPool final : public Backend {
 public:
  SshPool(std::vector<HostConfig> hosts, HarnessBundle bundle, std::string local_python,
          std::shared_ptr<const core::Clock> clock)
      : m_bundle(std::move(bundle)),
        m_local_python(std::move(local_python)),
        m_clock(core::clock_or_steady(std::move(clock))) {
    for (auto& config : hosts) {
      m_hosts.push_back(std::make_unique<Host>(std::move(config)));
    }
    for (auto& host : m_hosts) {
      const auto& config = host->config;
      if (config.slots || config.device != "neuron") {
        host->discovered = true;
        add_slots(*host, config.slots.value_or(1));
      }
      m_identity += (m_identity.empty() ? "" : ",") + std::string("ssh://") + config.label +
                    DeviceChoice{config.device, config.device_seed}.identity_query();
      if (config.device == "fake" && config.fake_ms > 0) {
        m_identity += "&fake_ms=" + std::to_string(config.fake_ms);
      }
    }
  }

  std::string identity() const override { return m_identity; }
  std::string device() const override { return m_hosts.front()->config.device; }

  int slots() const override {
    std::lock_guard lock(m_mutex);
    int total = 0;
    for (const auto& host : m_hosts) {
      total += host->discovered ? count_slots(*host) : 1;
    }
    return total;
  }

  std::string harness_version() const override {
    std::call_once(m_version_once, [this] {
      m_version = probe_harness_version(m_local_python, m_bundle, device());
    });
    return m_version;
  }

  void set_attempt_hook(SshAttemptHook hook) { m_attempt_hook = std::move(hook); }

  std::vector<SshHostStatus> status() const {
    std::lock_guard lock(m_mutex);
    std::vector<SshHostStatus> out;
    for (const auto& host : m_hosts) {
      SshHostStatus s;
      s.host = host->config.label;
      s.in_rotation = host->in_rotation;
      s.reason = host->reason;
      s.slots = count_slots(*host);
      s.evaluations = host->evaluations;
      s.errors = host->errors;
      s.timeouts = host->timeouts;
      s.bundle_uploads = host->bundle_uploads.load();
      if (!host->in_rotation) {
        s.retry_in = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::max(std::chrono::steady_clock::duration::zero(), host->retry_at - m_clock->now()));
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  std::vector<EvalResult> evaluate(const std::vector<EvalRequest>& batch,
                                   const core::CancelToken& cancel,
                                   const ProgressFn& progress) override {
    std::vector<EvalResult> results(batch.size());
    if (batch.empty()) {
      return results;
    }
    discover_slots();
    const std::string version = harness_version();

    std::mutex batch_mutex;
    std::condition_variable batch_changed;
    std::deque<std::size_t> pending;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      pending.push_back(i);
    }
    std::vector<int> attempts(batch.size(), 0);
    std::size_t in_flight = 0;
    std::size_t done = 0;
    const int max_attempts = static_cast<int>(m_hosts.size()) + 1;

    auto finish = [&](std::size_t index, EvalResult result) {
      result.backend_identity = m_identity;
      result.harness_version = version;
      result.receipt.backend = m_identity;
      result.receipt.host = result.host;
      results[index] = std::move(result);
      std::size_t finished = 0;
      {
        std::lock_guard lock(batch_mutex);
        --in_flight;
        finished = ++done;
      }
      batch_changed.notify_all();
      if (progress) {
        const auto& r = results[index];
        progress(finished, batch.size(),
                 (r.host.empty() ? "" : r.host + ": ") +
                     (r.ok() ? std::string("evaluated") : std::string(to_string(r.failure->kind))));
      }
    };

    auto worker = [&] {
      while (true) {
        std::size_t index = 0;
        {
          std::unique_lock lock(batch_mutex);
          batch_changed.wait(lock, [&] { return !pending.empty() || in_flight == 0; });
          if (pending.empty()) {
            return;
          }
          index = pending.front();
          pending.pop_front();
          ++in_flight;
        }
        if (cancel.cancelled()) {
          EvalResult result;
          result.failure = core::make_failure(core::FailureKind::cancelled, "run",
                                              "cancelled before it started");
          finish(index, std::move(result));
          continue;
        }
        auto on_wait = [&](const std::string& message) {
          if (progress) {
            std::size_t finished = 0;
            {
              std::lock_guard lock(batch_mutex);
              finished = done;
            }
            progress(finished, batch.size(), message);
          }
        };
        auto slot = acquire_slot(cancel, batch[index].lane == Lane::interactive, on_wait);
        if (!slot.ok()) {
          EvalResult result;
          result.failure = slot.failure();
          finish(index, std::move(result));
          continue;
        }
        Attempt attempt = run_on_slot(*slot.value(), batch[index], cancel);
        release_slot(*slot.value(), attempt.event, attempt.result);
        ++attempts[index];
        if (attempt.retry && attempts[index] < max_attempts && !cancel.cancelled()) {
          {
            std::lock_guard lock(batch_mutex);
            pending.push_back(index);
            --in_flight;
          }
          batch_changed.notify_all();
          continue;
        }
        finish(index, std::move(attempt.result));
      }
    };

    std::size_t workers =
        std::min<std::size_t>(batch.size(), static_cast<std::size_t>(std::max(1, slots())));
    std::vector<std::thread> threads;
    for (std::size_t i = 1; i < workers; ++i) {
      threads.emplace_back(worker);
    }
    worker();
    for (auto& thread : threads) {
      thread.join();
    }
    return results;
  }

 private:
  // Callers hold m_mutex (or are the constructor).
  void add_slots(Host& host, int count) {
    for (int i = 0; i < count; ++i) {
      auto slot = std::make_unique<Slot>();
      slot->host = &host;
      slot->index = i;
      m_slots.push_back(std::move(slot));
    }
  }
  int count_slots(const Host& host) const {
    int n = 0;
    for (const auto& slot : m_slots) {
      n += slot->host == &host ? 1 : 0;
    }
    return n;
  }

  // Hosts with device=neuron and no configured slot count get one slot per NeuronCore, counted by
  // `neuron-ls -j` over a first connection (kept as slot 0's).
  void discover_slots() {
    std::lock_guard discovery(m_discovery_mutex);
    std::vector<Host*> todo;
    {
      std::lock_guard lock(m_mutex);
      for (auto& host : m_hosts) {
        if (!host->discovered) {
          todo.push_back(host.get());
        }
      }
    }
    std::vector<std::thread> threads;
    for (Host* host : todo) {
      threads.emplace_back([this, host] {
        auto connection = SshConnection::open(host->config.endpoint);
        std::optional<core::Failure> failure;
        int cores = 0;
        if (!connection.ok()) {
          failure = connection.failure();
        } else {
          auto listing = connection.value()->exec("neuron-ls -j", k_discovery_timeout, {});
          if (!listing.ok()) {
            failure = listing.failure();
          } else if (auto count = count_neuron_cores(listing->stdout_text); !count.ok()) {
            failure = core::make_failure(
                core::FailureKind::unavailable, "connect",
                host->config.label + ": cannot count NeuronCores with neuron-ls -j (" +
                    count.failure().message + "; stderr: " +
                    core::tail_text(listing->stderr_text, 300) + "); set slots=N in the spec");
          } else {
            cores = count.value();
          }
        }
        std::lock_guard lock(m_mutex);
        host->discovered = true;
        if (failure) {
          add_slots(*host, 1);
          take_out_locked(*host, failure->message);
          ++host->errors;
        } else {
          add_slots(*host, cores);
          for (auto& slot : m_slots) {
            if (slot->host == host && slot->index == 0) {
              slot->connection = std::move(connection).value();
              break;
            }
          }
        }
      });
    }
    for (auto& thread : threads) {
      thread.join();
    }
  }

  void take_out_locked(Host& host, const std::string& reason) {
    host.in_rotation = false;
    host.reason = reason;
    ++host.outages;
    auto backoff = std::chrono::duration_cast<std::chrono::steady_clock::duration>(k_first_backoff);
    for (int i = 1; i < host.outages && backoff < k_max_backoff; ++i) {
      backoff *= 2;
    }
    host.retry_at =
        m_clock->now() +
        std::min(backoff,
                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(k_max_backoff));
  }

  std::string all_out_message_locked() const {
    std::string message = "all " + std::to_string(m_hosts.size()) + " host" +
                          (m_hosts.size() == 1 ? "" : "s") + " out of rotation: ";
    bool first = true;
    for (const auto& host : m_hosts) {
      message += (first ? "" : "; ") + std::string("host ") + host->config.label + ": " +
                 (host->reason.empty() ? "unavailable" : host->reason);
      first = false;
    }
    return message;
  }

  // A free slot on a host in rotation, preferring the host with the most free slots; waits while
  // all are busy (interactive requests take a freed slot before background ones, and `on_wait`
  // hears once what a request waits for). Fails when no host is left in rotation or the token is
  // cancelled.
  core::Result<Slot*> acquire_slot(const core::CancelToken& cancel, bool interactive,
                                   const std::function<void(const std::string&)>& on_wait) {
    std::unique_lock lock(m_mutex);
    if (interactive) {
      ++m_interactive_waiting;
    }
    struct Leave {
      SshPool& pool;
      bool interactive;
      ~Leave() {
        if (interactive) {
          --pool.m_interactive_waiting;  // m_mutex is held whenever this runs
        }
      }
    } leave{*this, interactive};
    bool told = false;
    while (true) {
      auto now = m_clock->now();
      bool any_in_rotation = false;
      for (auto& host : m_hosts) {
        if (!host->in_rotation && now >= host->retry_at) {
          host->in_rotation = true;  // probation: the next failure takes it out again
          host->consecutive_failures = k_max_consecutive_failures - 1;
        }
        any_in_rotation = any_in_rotation || host->in_rotation;
      }
      if (!any_in_rotation) {
        return core::make_failure(core::FailureKind::unavailable, "connect",
                                  all_out_message_locked());
      }
      if (cancel.cancelled()) {
        return core::make_failure(core::FailureKind::cancelled, "connect",
                                  "cancelled while waiting for a free slot");
      }
      Slot* best = nullptr;
      int best_free = 0;
      for (auto& slot : m_slots) {
        if (slot->busy || !slot->host->in_rotation) {
          continue;
        }
        int free_on_host = 0;
        for (auto& other : m_slots) {
          free_on_host += other->host == slot->host && !other->busy ? 1 : 0;
        }
        if (best == nullptr || free_on_host > best_free) {
          best = slot.get();
          best_free = free_on_host;
        }
      }
      if (best != nullptr && (interactive || m_interactive_waiting == 0)) {
        best->busy = true;
        best->background = !interactive;
        return best;
      }
      if (!told && on_wait) {
        told = true;
        bool background_holds = std::any_of(m_slots.begin(), m_slots.end(), [](const auto& slot) {
          return slot->busy && slot->background;
        });
        std::string message = std::string("waiting for an evaluation slot held by ") +
                              (background_holds ? "a background search" : "other evaluations");
        lock.unlock();
        on_wait(message);
        lock.lock();
        continue;
      }
      m_slot_freed.wait_for(lock, 50ms);
    }
  }

  void release_slot(Slot& slot, HostEvent event, const EvalResult& result) {
    {
      std::lock_guard lock(m_mutex);
      slot.busy = false;
      Host& host = *slot.host;
      switch (event) {
        case HostEvent::healthy:
          host.consecutive_failures = 0;
          host.outages = 0;
          ++host.evaluations;
          break;
        case HostEvent::timeout:
          ++host.timeouts;
          ++host.evaluations;
          if (++host.consecutive_failures >= k_max_consecutive_failures) {
            take_out_locked(host, std::to_string(host.consecutive_failures) +
                                      " timeouts or errors in a row (last: " +
                                      (result.failure ? result.failure->message : "") + ")");
          }
          break;
        case HostEvent::transport:
          ++host.errors;
          if (++host.consecutive_failures >= k_max_consecutive_failures) {
            take_out_locked(host, std::to_string(host.consecutive_failures) +
                                      " timeouts or errors in a row (last: " +
                                      (result.failure ? result.failure->message : "") + ")");
          }
          break;
        case HostEvent::unreachable:
          ++host.errors;
          take_out_locked(host, result.failure ? result.failure->message : "unreachable");
          break;
      }
    }
    m_slot_freed.notify_all();
  }

  // Makes sure the remote base folder and the harness bundle exist on the slot's host. The
  // bundle goes to a temporary name first and is renamed into place, so a half upload is never
  // used; a host that already has it (from an earlier process) is not uploaded to again.
  core::Status ensure_bundle(Slot& slot, std::vector<StepTiming>& steps) {
    Host& host = *slot.host;
    std::lock_guard lock(host.bundle_mutex);
    if (host.bundle_ready) {
      return core::ok_status();
    }
    SshConnection& connection = *slot.connection;
    if (host.base_dir.empty()) {
      std::string dir = host.config.remote_dir;
      if (dir.empty() || dir.front() != '/') {
        auto home = connection.home();
        if (!home.ok()) {
          return home.failure();
        }
        dir = home.value() + "/" + (dir.empty() ? ".cache/autocomp-mcp" : dir);
      }
      host.base_dir = dir;
    }
    // Whether runs can get their own user and PID namespaces there (then nothing a kernel starts
    // outlives its run); otherwise cleanup sweeps the run's processes by an environment mark.
    if (auto probe = connection.exec(k_unshare_probe, k_discovery_timeout, {}); probe.ok()) {
      host.can_unshare = probe->exit_status == 0;
    }
    const std::string bundle_dir = host.base_dir + "/harness-" + m_bundle.hash;
    auto present = connection.exists(bundle_dir + "/harness/autocomp_harness.py");
    if (!present.ok()) {
      return present.failure();
    }
    if (!present.value()) {
      auto start = std::chrono::steady_clock::now();
      const std::string staging = host.base_dir + "/.upload-" + random_name();
      for (std::size_t i = 0; i < m_bundle.files.size(); ++i) {
        std::string remote = staging + "/" + m_bundle.files[i];
        if (auto made = connection.make_dirs(remote.substr(0, remote.rfind('/'))); !made.ok()) {
          return made;
        }
        if (auto written = connection.write_file(remote, m_bundle.contents[i]); !written.ok()) {
          return written;
        }
      }
      if (auto renamed = connection.rename(staging, bundle_dir); !renamed.ok()) {
        // Another process may have put the same bundle in place meanwhile; that one is as good.
        auto now_present = connection.exists(bundle_dir + "/harness/autocomp_harness.py");
        static_cast<void>(connection.exec("rm -rf " + shell_quote(staging), k_cleanup_timeout, {}));
        if (!now_present.ok() || !now_present.value()) {
          return renamed;
        }
      } else {
        host.bundle_uploads.fetch_add(1);
      }
      steps.push_back({"upload_bundle", ms_since(start)});
    }
    host.bundle_ready = true;
    return core::ok_status();
  }

  std::string run_command(const Slot& slot, const EvalRequest& request, const std::string& work,
                          const WorkFileNames& files, const std::string& mark) const {
    const HostConfig& config = slot.host->config;
    const std::string bundle_dir = slot.host->base_dir + "/harness-" + m_bundle.hash;
    // The environment is cut down to the allow-list first (core/environment.hpp). setsid gives
    // the run its own process group (its id is written to `pgid` so that cleanup can kill it);
    // `timeout` signals that whole group when the wall time is up. Where unshare works, the run
    // is PID 1's child in a namespace of its own, so everything it starts dies with it; the
    // AUTOCOMP_EVAL_MARK lets cleanup find escaped processes where it does not.
    std::string command =
        "cd " + shell_quote(work) + " || exit 1; " + core::harness_environment_shell_filter() +
        "exec setsid -w sh -c 'echo $$ > pgid; exec \"$@\" < /dev/null "
        "> out.json 2> err.txt' autocomp-eval " +
        (slot.host->can_unshare ? std::string(k_unshare_prefix) : "") + "timeout -k " +
        std::to_string(k_remote_kill_after_s) + " " + timeout_command_seconds(request.timeout) +
        " env AUTOCOMP_EVAL_MARK=" + mark +
        " NEURON_RT_VISIBLE_CORES=" + std::to_string(slot.index) + " " +
        shell_quote(config.python) + " -I -B " +
        shell_quote(bundle_dir + "/harness/autocomp_harness.py");
    for (const auto& arg : evaluation_arguments(request, work, files, config.device, config.fake_ms,
                                                config.target, config.device_seed)) {
      command += " " + shell_quote(arg);
    }
    return command;
  }

  static HostEvent event_for(const core::Failure& failure) {
    return failure.kind == core::FailureKind::transport_error ? HostEvent::transport
                                                              : HostEvent::healthy;
  }

  // One request on one slot, as the named steps connect, upload, run, fetch and cleanup.
  Attempt run_on_slot(Slot& slot, const EvalRequest& request, const core::CancelToken& cancel) {
    Attempt attempt;
    EvalResult& result = attempt.result;
    result.host = slot.host->config.label;
    result.device = slot.host->config.device;
    std::vector<StepTiming> steps;
    if (m_attempt_hook) {
      m_attempt_hook(slot.host->config.label, slot.host->attempts.fetch_add(1) + 1);
    }

    // connect
    auto start = std::chrono::steady_clock::now();
    if (!slot.connection || !slot.connection->alive()) {
      slot.connection.reset();
      auto opened = SshConnection::open(slot.host->config.endpoint);
      steps.push_back({"connect", ms_since(start)});
      if (!opened.ok()) {
        result.failure = opened.failure();
        result.steps = std::move(steps);
        attempt.event = HostEvent::unreachable;
        attempt.retry = true;
        return attempt;
      }
      slot.connection = std::move(opened).value();
    } else {
      steps.push_back({"connect", ms_since(start)});
    }
    SshConnection& connection = *slot.connection;

    auto fail_transport = [&](const core::Failure& failure) {
      result.failure = failure;
      attempt.event = event_for(failure);
      if (failure.kind == core::FailureKind::transport_error) {
        attempt.retry = true;
        slot.connection.reset();
      }
    };

    // upload: the bundle (once per host) and this request's sources into a fresh folder
    start = std::chrono::steady_clock::now();
    std::string work;
    bool uploaded = false;
    if (auto bundle = ensure_bundle(slot, steps); !bundle.ok()) {
      fail_transport(bundle.failure());
      if (bundle.failure().kind != core::FailureKind::transport_error) {
        attempt.event = HostEvent::transport;  // a host that cannot take the bundle is unusable
        attempt.retry = true;
      }
    } else {
      work = slot.host->base_dir + "/work/" + random_name();
      const WorkFileNames files = work_file_names(request);
      core::Status status = connection.make_dir(work);
      if (!status.ok() && status.failure().kind == core::FailureKind::io_error) {
        status = connection.make_dirs(work);  // first use: the parents are missing
      }
      if (status.ok() && files.kernel.find('/') != std::string::npos) {
        status = connection.make_dirs(work + "/" + files.kernel.substr(0, files.kernel.rfind('/')));
      }
      if (status.ok()) {
        status = connection.write_file(work + "/" + files.kernel, request.kernel_source);
      }
      if (status.ok()) {
        status = connection.write_file(work + "/" + files.problem, request.problem_source);
      }
      if (status.ok() && !cost_table_file_name(request).empty()) {
        status = connection.write_file(work + "/" + cost_table_file_name(request),
                                       request.cost_table_json);
      }
      if (status.ok()) {
        status = check_kernel_modules(request, files);
      }
      for (std::size_t i = 0; status.ok() && i < request.kernel_modules.size(); ++i) {
        const auto& module = request.kernel_modules[i];
        if (const auto slash = module.path.rfind('/'); slash != std::string::npos) {
          status = connection.make_dirs(work + "/" + module.path.substr(0, slash));
        }
        if (status.ok()) {
          status = connection.write_file(work + "/" + module.path, module.source);
        }
      }
      steps.push_back({"upload", ms_since(start)});
      if (!status.ok()) {
        fail_transport(status.failure());
      } else {
        uploaded = true;

        // run
        start = std::chrono::steady_clock::now();
        const std::string mark = random_name();
        auto command = run_command(slot, request, work, files, mark);
        auto run = connection.run_in_shell(command, request.timeout + k_client_grace, cancel);
        steps.push_back({"run", ms_since(start)});
        bool run_finished = run.ok();
        if (!run.ok()) {
          if (run.failure().kind == core::FailureKind::timeout) {
            result.failure = core::make_failure(
                core::FailureKind::timeout, "run",
                result.host + ": no result within " + std::to_string(request.timeout.count()) +
                    " ms (plus " + std::to_string(std::chrono::seconds(k_client_grace).count()) +
                    " s grace); the remote process group was killed");
            attempt.event = HostEvent::timeout;
            slot.connection.reset();  // the session may be wedged
          } else if (run.failure().kind == core::FailureKind::cancelled) {
            result.failure = core::make_failure(core::FailureKind::cancelled, "run",
                                                "cancelled while running on " + result.host);
          } else {
            fail_transport(run.failure());
          }
        } else if (stopped_by_timeout_command(run->exit_status) ||
                   (run->exit_status != 0 &&
                    std::chrono::steady_clock::now() - start >= request.timeout)) {
          result.failure = core::make_failure(
              core::FailureKind::timeout, "run",
              "the harness did not finish within " + std::to_string(request.timeout.count()) +
                  " ms on " + result.host + "; its process group was killed");
          attempt.event = HostEvent::timeout;
        } else {
          // fetch
          start = std::chrono::steady_clock::now();
          auto out = connection.read_file(work + "/out.json", k_max_result_bytes);
          std::string out_text = out.ok() ? out.value() : std::string{};
          EvalResult parsed = parse_harness_output(out_text, "", "");
          if (!parsed.ok() && parsed.failure->kind == core::FailureKind::harness_error) {
            // Only a broken run needs the stderr tail, to quote the traceback.
            auto err = connection.read_file(work + "/err.txt", k_stderr_tail_bytes, true);
            std::string end = "exit status " + std::to_string(run->exit_status);
            if (run->exit_status == 127) {
              end += " (command not found: " + core::tail_text(run->stdout_text, 300) + ")";
            }
            parsed = parse_harness_output(out_text, err.ok() ? err.value() : run->stdout_text, end);
          }
          steps.push_back({"fetch", ms_since(start)});
          if (!out.ok() && out.failure().kind == core::FailureKind::transport_error) {
            fail_transport(out.failure());
          } else {
            std::vector<StepTiming> harness_steps = std::move(parsed.steps);
            result = std::move(parsed);
            result.host = slot.host->config.label;
            if (result.device.empty()) {
              result.device = slot.host->config.device;
            }
            result.steps = std::move(harness_steps);
            attempt.event = result.failure && result.failure->kind == core::FailureKind::timeout
                                ? HostEvent::timeout
                                : HostEvent::healthy;
          }
        }

        // cleanup: always. A run that did not end by itself gets its process group killed
        // first; otherwise the folder is removed over SFTP, with rm -rf as the fallback.
        start = std::chrono::steady_clock::now();
        if (!slot.host->can_unshare) {
          cleanup_remote(slot, sweep_command(mark));
        }
        bool removed = false;
        if (run_finished && slot.connection) {
          removed = slot.connection->remove_tree(work).ok();
        }
        if (!removed) {
          std::string kill = run_finished ? "" : "kill -KILL -- -$(cat pgid) 2>/dev/null; ";
          cleanup_remote(slot, "(cd " + shell_quote(work) + " 2>/dev/null && " + kill +
                                   "true); rm -rf " + shell_quote(work));
        }
        steps.push_back({"cleanup", ms_since(start)});
      }
    }
    if (!uploaded && !work.empty()) {
      cleanup_remote(slot, "rm -rf " + shell_quote(work));
    }

    // Backend steps first, then the harness's own.
    steps.insert(steps.end(), result.steps.begin(), result.steps.end());
    result.steps = std::move(steps);
    return attempt;
  }

  // Kills every process of the remote user whose environment carries the run's mark.
  static std::string sweep_command(const std::string& mark) {
    return "for p in /proc/[0-9]*; do grep -qsxF AUTOCOMP_EVAL_MARK=" + mark +
           " -z \"$p/environ\" && kill -KILL \"${p#/proc/}\" 2>/dev/null; done; true";
  }

  // Runs a cleanup command on the slot's session, reconnecting once when it was dropped.
  void cleanup_remote(Slot& slot, const std::string& command) {
    for (int round = 0; round < 2; ++round) {
      if (!slot.connection) {
        auto opened = SshConnection::open(slot.host->config.endpoint);
        if (!opened.ok()) {
          return;
        }
        slot.connection = std::move(opened).value();
      }
      auto done = slot.connection->exec(command, k_cleanup_timeout, {});
      if (done.ok()) {
        return;
      }
      slot.connection.reset();
    }
  }

  HarnessBundle m_bundle;
  std::string m_local_python;
  std::string m_identity;
  std::vector<std::unique_ptr<Host>> m_hosts;

  std::shared_ptr<const core::Clock> m_clock;
  SshAttemptHook m_attempt_hook;  // test seam (set_ssh_attempt_hook); set before use
  mutable std::mutex m_mutex;     // rotation state, slot lists and busy flags
  int m_interactive_waiting = 0;  // interactive requests waiting for a slot (m_mutex)
  std::condition_variable m_slot_freed;
  std::vector<std::unique_ptr<Slot>> m_slots;
  std::mutex m_discovery_mutex;

  mutable std::once_flag m_version_once;
  mutable std::string m_version;
};

core::Result<HostConfig> host_config(const BackendSpec& spec, const BackendOptions& options) {
  auto bad = [&](const std::string& why) {
    return core::make_failure(core::FailureKind::invalid_argument, "backend",
                              (spec.origin.empty() ? "" : spec.origin + ": ") +
                                  "invalid backend spec '" + spec.text + "': " + why);
  };
  static const std::vector<std::string> k_known{
      "device",     "seed",        "slots",          "target",
      "key",        "known_hosts", "python",         "accept_new_host_key",
      "remote_dir", "fake_ms",     "connect_timeout"};
  for (const auto& [name, value] : spec.params) {
    if (std::find(k_known.begin(), k_known.end(), name) == k_known.end()) {
      return bad("unknown option '" + name + "'");
    }
  }
  HostConfig config;
  config.spec_text = spec.text;
  config.endpoint.host = spec.host;
  config.endpoint.port = spec.port > 0 ? spec.port : 22;
  config.endpoint.user = spec.user;
  if (auto key = spec.param("key")) {
    config.endpoint.key_files.push_back(expand_home(*key));
  }
  config.endpoint.known_hosts = expand_home(spec.param("known_hosts").value_or(""));
  config.endpoint.accept_new_host_key =
      spec.flag("accept_new_host_key") || options.accept_new_host_keys;
  auto device = device_choice(spec.text, spec.params,
                              options.default_device.empty() ? "neuron" : options.default_device);
  if (!device.ok()) {
    auto failure = device.failure();
    if (!spec.origin.empty()) {
      failure.message = spec.origin + ": " + failure.message;
    }
    return failure;
  }
  config.device = device->device;
  config.device_seed = device->seed;
  for (const char* name : {"slots", "fake_ms", "connect_timeout"}) {
    auto value = spec.int_param(name);
    if (!value.ok()) {
      return value.failure();
    }
    if (std::string(name) == "slots") {
      config.slots = value.value();
    } else if (std::string(name) == "fake_ms") {
      config.fake_ms = value->value_or(0);
    } else if (value.value()) {
      config.endpoint.timeout = std::chrono::seconds(*value.value());
    }
  }
  config.target = spec.param("target").value_or(options.default_target);
  config.python = spec.param("python").value_or("python3");
  config.remote_dir = spec.param("remote_dir").value_or("");
  config.label = config.endpoint.describe();
  return config;
}

}  // namespace

core::Result<std::shared_ptr<Backend>> make_ssh_backend(const std::vector<BackendSpec>& specs,
                                                        const BackendOptions& options) {
  static std::once_flag init_once;
  std::call_once(init_once, [] { ssh_init(); });
  if (specs.empty()) {
    return core::make_failure(core::FailureKind::invalid_argument, "backend", "no ssh hosts");
  }
  std::vector<HostConfig> hosts;
  for (const auto& spec : specs) {
    auto config = host_config(spec, options);
    if (!config.ok()) {
      return config.failure();
    }
    for (const auto& other : hosts) {
      if (other.label == config->label) {
        return core::make_failure(core::FailureKind::invalid_argument, "backend",
                                  (spec.origin.empty() ? "" : spec.origin + ": ") + "host " +
                                      other.label + " is listed twice; use slots=N instead");
      }
    }
    hosts.push_back(std::move(config).value());
  }
  auto root = locate_harness_dir(options.harness_dir);
  if (!root.ok()) {
    return root.failure();
  }
  auto bundle = load_harness_bundle(*root);
  if (!bundle.ok()) {
    return bundle.failure();
  }
  return std::shared_ptr<Backend>(std::make_shared<SshPool>(
      std::move(hosts), std::move(bundle).value(), resolve_python(options.python), options.clock));
}

bool set_ssh_attempt_hook(Backend& backend, SshAttemptHook hook) {
  auto* pool = dynamic_cast<SshPool*>(&backend);
  if (pool == nullptr) {
    return false;
  }
  pool->set_attempt_hook(std::move(hook));
  return true;
}

std::vector<SshHostStatus> ssh_pool_status(const Backend& backend) {
  if (const auto* pool = dynamic_cast<const SshPool*>(&backend)) {
    return pool->status();
  }
  return {};
}

}  // namespace autocomp::backends
