#pragma once

// A hosts file: the SSH hosts of one pool kept in one place, selected with the backend spec
// "hosts:PATH". One ssh:// spec per line; '#' starts a comment (at the start of a line or after a
// space or tab); blank lines are ignored. See docs/backends.md ("Hosts files").

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "backends/spec.hpp"
#include "core/result.hpp"

namespace autocomp::backends {

// The prefix of the backend spec that names a hosts file: "hosts:PATH".
inline constexpr std::string_view k_hosts_file_prefix = "hosts:";

// Parses the text of a hosts file. `origin` names the file in messages ("fleet.txt:3: ...") and
// each spec's `origin` is "ORIGIN:LINE". Fails (invalid_argument) on a malformed or non-ssh line
// and when no line names a host.
core::Result<std::vector<BackendSpec>> parse_hosts_file(std::string_view text,
                                                        const std::string& origin);

// The largest hosts file read_hosts_file accepts.
inline constexpr std::size_t k_max_hosts_file_bytes = std::size_t{1} << 20;

// Reads and parses the hosts file at `path` ("~/..." is under $HOME). Only a regular file of at
// most k_max_hosts_file_bytes is read (never a device, FIFO or socket, and opening never blocks);
// anything else, or a file that is missing or cannot be read, is an io_error naming the path.
// Errors quote a line of the file only when it starts with "ssh://", so pointing the path at
// some other file reveals nothing of its contents.
core::Result<std::vector<BackendSpec>> read_hosts_file(const std::string& path);

}  // namespace autocomp::backends
