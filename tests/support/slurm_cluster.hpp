#pragma once

// A real single-node Slurm cluster on loopback for tests and benchmarks: munged, slurmctld and
// slurmd run as children of this process with their keys, state, spool and logs in a private
// folder, and SLURM_CONF (set in this process's environment) points at the generated slurm.conf.
// No cgroups: proctrack/linuxproc and task/none; select/cons_tres with an OverSubscribe partition.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/sshd_fixture.hpp"

namespace autocomp::testing {

class SlurmCluster {
 public:
  static constexpr const char* k_partition = "eval";
  static constexpr const char* k_node = "node1";

  // The daemons and client commands the cluster needs; empty when all are installed.
  static std::string missing_binaries() {
    std::string missing;
    for (const char* tool :
         {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch",
          "/usr/bin/scontrol", "/usr/bin/squeue", "/usr/bin/scancel", "/usr/bin/sinfo"}) {
      if (::access(tool, X_OK) != 0) {
        missing += std::string(missing.empty() ? "" : ", ") + tool;
      }
    }
    return missing;
  }

  // Starts the cluster in `dir` (created) with one node of `cpus` CPUs; waits until it is idle.
  explicit SlurmCluster(const std::filesystem::path& dir, int cpus = 8) : m_dir(dir) {
    namespace fs = std::filesystem;
    for (const char* sub : {"munge", "state", "spool", "log"}) {
      fs::create_directories(m_dir / sub);
    }
    {
      std::ofstream key(m_dir / "munge" / "key", std::ios::binary);
      std::random_device random;
      for (int i = 0; i < 1024; ++i) {
        key.put(static_cast<char>(random() & 0xff));
      }
    }
    fs::permissions(m_dir / "munge" / "key", fs::perms::owner_read, fs::perm_options::replace);
    fs::permissions(m_dir / "munge", fs::perms::owner_all, fs::perm_options::replace);
    int ctld_port = free_loopback_port();
    int slurmd_port = free_loopback_port();
    while (slurmd_port == ctld_port) {
      slurmd_port = free_loopback_port();
    }
    std::string d = m_dir.string();
    std::ofstream conf(m_dir / "slurm.conf");
    conf << "ClusterName=autocomp\n"
         << "SlurmctldHost=localhost(127.0.0.1)\n"
         << "SlurmctldPort=" << ctld_port << "\nSlurmdPort=" << slurmd_port << "\n"
         << "AuthType=auth/munge\nCredType=cred/munge\n"
         << "AuthInfo=socket=" << d << "/munge/sock\n"
         << "SlurmUser=root\nSlurmdUser=root\n"
         << "StateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d << "/spool\n"
         << "SlurmctldPidFile=" << d << "/slurmctld.pid\nSlurmdPidFile=" << d << "/slurmd.pid\n"
         << "SlurmctldLogFile=" << d << "/log/slurmctld.log\n"
         << "SlurmdLogFile=" << d << "/log/slurmd.log\n"
         << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
         << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
         << "MpiDefault=none\nJobAcctGatherType=jobacct_gather/none\n"
         << "AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\n"
         << "SchedulerType=sched/builtin\nReturnToService=2\n"
         << "SlurmdTimeout=5\nSlurmctldTimeout=5\nMinJobAge=600\nKillWait=2\nInactiveLimit=0\n"
         << "SlurmdParameters=config_overrides\n"
         << "NodeName=" << k_node << " NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=" << cpus
         << " RealMemory=1000 State=UNKNOWN\n"
         << "PartitionName=" << k_partition << " Nodes=" << k_node
         << " Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:" << cpus << "\n";
    conf.close();
    ::setenv("SLURM_CONF", (m_dir / "slurm.conf").c_str(), 1);

    m_munged = spawn(
        {"/usr/sbin/munged", "--key-file=" + d + "/munge/key", "--socket=" + d + "/munge/sock",
         "--pid-file=" + d + "/munge/pid", "--log-file=" + d + "/munge/log",
         "--seed-file=" + d + "/munge/seed", "--force", "-F"},
        "munged.out");
    wait_for([&] { return std::filesystem::exists(m_dir / "munge" / "sock"); }, "munged");
    m_slurmctld = spawn({"/usr/sbin/slurmctld", "-D", "-i", "-f", conf_path()}, "slurmctld.out");
    wait_for([&] { return port_accepts(ctld_port); }, "slurmctld");
    start_node();
  }

  ~SlurmCluster() {
    kill_node();
    stop(m_slurmctld);
    stop(m_munged);
  }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  std::string conf_path() const { return (m_dir / "slurm.conf").string(); }
  std::string log(const std::string& name) const { return read_text(m_dir / "log" / name); }

  // Starts slurmd and waits until the node takes jobs.
  void start_node() {
    m_slurmd = spawn({"/usr/sbin/slurmd", "-D", "-N", k_node, "-f", conf_path()}, "slurmd.out");
    wait_for(
        [&] {
          auto state = run_tool({"sinfo", "-h", "-n", k_node, "-o", "%T"});
          return state.stdout_text.rfind("idle", 0) == 0 ||
                 state.stdout_text.rfind("mixed", 0) == 0;
        },
        "slurmd");
  }

  // Like a node losing power: slurmd, every slurmstepd and every job process are killed.
  void kill_node() {
    std::vector<pid_t> victims;
    if (m_slurmd > 0) {
      victims = descendants_of(m_slurmd);
      victims.push_back(m_slurmd);
    }
    for (pid_t pid : processes_of_this_cluster()) {
      victims.push_back(pid);
      for (pid_t child : descendants_of(pid)) {
        victims.push_back(child);
      }
    }
    for (pid_t pid : victims) {
      ::kill(pid, SIGKILL);
    }
    if (m_slurmd > 0) {
      int status = 0;
      ::waitpid(m_slurmd, &status, 0);
      m_slurmd = -1;
    }
  }

  // Job ids Slurm still lists (pending, running or completing).
  std::vector<std::string> queued_jobs() const {
    auto listed = run_tool({"squeue", "-h", "-o", "%i"});
    std::vector<std::string> jobs;
    std::istringstream lines(listed.stdout_text);
    std::string line;
    while (std::getline(lines, line)) {
      if (!line.empty()) {
        jobs.push_back(line);
      }
    }
    return jobs;
  }

 private:
  // Processes other than this one and the controller whose environment names this cluster's
  // slurm.conf: slurmstepd and the jobs it started.
  std::vector<pid_t> processes_of_this_cluster() const {
    std::vector<pid_t> found;
    std::string needle = "SLURM_CONF=" + conf_path();
    if (DIR* dir = ::opendir("/proc")) {
      while (dirent* entry = ::readdir(dir)) {
        std::string name = entry->d_name;
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
          continue;
        }
        pid_t pid = static_cast<pid_t>(std::stoi(name));
        if (pid == ::getpid() || pid == m_slurmctld || pid == m_munged) {
          continue;
        }
        std::string comm = read_text("/proc/" + name + "/comm");
        if (comm.rfind("slurmstepd", 0) != 0) {
          continue;
        }
        std::string environ_text = read_text("/proc/" + name + "/environ");
        if (environ_text.find(needle) != std::string::npos) {
          found.push_back(pid);
        }
      }
      ::closedir(dir);
    }
    return found;
  }

  pid_t spawn(const std::vector<std::string>& argv, const std::string& log_name) {
    std::string log = (m_dir / "log" / log_name).string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& arg : argv) {
      args.push_back(const_cast<char*>(arg.c_str()));
    }
    args.push_back(nullptr);
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      throw std::runtime_error("cannot start " + argv[0]);
    }
    return pid;
  }

  static void stop(pid_t& pid) {
    if (pid <= 0) {
      return;
    }
    for (pid_t child : descendants_of(pid)) {
      ::kill(child, SIGKILL);
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
  }

  template <typename Ready>
  void wait_for(Ready ready, const std::string& what) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      if (ready()) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error(what + " did not come up; logs in " + m_dir.string());
  }

  std::filesystem::path m_dir;
  pid_t m_munged = -1;
  pid_t m_slurmctld = -1;
  pid_t m_slurmd = -1;
};

}  // namespace autocomp::testing
