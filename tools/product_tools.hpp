#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "server/tool.hpp"

namespace autocomp::tools {

// What the product tools need from the command line (`autocomp-mcp --db ... --backend ...`).
// A plain struct: add fields as tools need them, with defaults, and parse them in app/cli.cpp.
struct ProductToolsOptions {
  std::string db_path;  // --db PATH (empty: the tools' default location)
  std::vector<std::string>
      backend_specs;                   // --backend SPEC, repeatable (e.g. "sim", "ssh://user@host")
  std::string target;                  // --target ("trn1", "trn2", "trn3"; empty: default)
  std::vector<std::string> llm_specs;  // --llm SPEC, repeatable (e.g. "openai:gpt-4o")
  std::string harness_dir;             // --harness-dir (empty: the installed/source harness)
  // While an evaluation runs, a progress notification at least this often (clients time out
  // calls that stay silent).
  std::chrono::milliseconds progress_interval{5000};
};

// Registers the product's tools, resources and prompts (verify_kernel, benchmark_kernel, ...).
// Called once by the binary before serving; throws only for programmer/config errors.
void register_product_tools(server::Registries& registries, const ProductToolsOptions& options);

}  // namespace autocomp::tools
