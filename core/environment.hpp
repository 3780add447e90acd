#pragma once

// What a harness process (and so the kernel it runs) may see of the server's environment.
//
// Kernels are arbitrary code. The server's environment holds secrets (LLM API keys, the HTTP
// bearer token) that a kernel has no use for, so harness processes start from an allow-list, not
// from a copy of the server's environment. One list serves every backend: the local backend
// filters this process's environment with harness_environment(); remote backends (SSH, Slurm)
// filter the remote shell's environment with harness_environment_shell_filter().
//
// Allowed (exact names): PATH HOME USER LOGNAME SHELL LANG LANGUAGE TZ TMPDIR TMP TEMP
//   LD_LIBRARY_PATH VIRTUAL_ENV CONDA_PREFIX CONDA_DEFAULT_ENV XDG_CACHE_HOME
//   OMP_NUM_THREADS OPENBLAS_NUM_THREADS MKL_NUM_THREADS AUTOCOMP_SMALL AUTOCOMP_REF_CACHE
// Allowed (prefixes): LC_ PYTHON NEURON_ NKI_ XLA_
// Extra names: AUTOCOMP_HARNESS_ENV="NAME1,NAME2" (in the server's environment) adds exact names.
// Never passed, even when listed: names containing API_KEY, TOKEN, SECRET or PASSWORD, and names
// starting with ANTHROPIC_, OPENAI_, AWS_ or AUTOCOMP_AUTH.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace autocomp::core {

using EnvironmentList = std::vector<std::pair<std::string, std::string>>;

// Whether a variable of this name may reach a harness process (see the list above). `extra` are
// the operator's additional names (from AUTOCOMP_HARNESS_ENV); the deny rules still apply to them.
bool harness_may_inherit(std::string_view name, const std::vector<std::string>& extra = {});

// The allowed subset of this process's environment, in its order.
EnvironmentList harness_environment();

// A POSIX sh fragment that unsets, in the shell that runs it, every exported variable the list
// does not allow (for a remote shell whose environment the server cannot see). It ends with "; "
// so a command can follow it directly. `keep` names variables the command that follows needs
// itself (e.g. SLURM_CONF for sbatch); the deny rules still apply to them.
std::string harness_environment_shell_filter(const std::vector<std::string>& keep = {});

}  // namespace autocomp::core
