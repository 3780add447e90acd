#include "search/engine/search_config.hpp"

#include <charconv>
#include <functional>
#include <map>
#include <sstream>

namespace autocomp::search::engine {

namespace {

core::Failure bad(const std::string& message) {
  return core::make_failure(core::FailureKind::invalid_argument, "config", message);
}

std::string escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string unescape(const std::string& value) {
  std::string out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (value[i] == '\\' && i + 1 < value.size()) {
      char next = value[++i];
      out += next == 'n' ? '\n' : next == 'r' ? '\r' : next;
    } else {
      out += value[i];
    }
  }
  return out;
}

template <class T>
std::string join(const std::vector<T>& values) {
  std::ostringstream out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    out << (i ? "," : "") << values[i];
  }
  return out.str();
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    if (!item.empty()) {
      out.push_back(item);
    }
  }
  return out;
}

std::string number(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

}  // namespace

core::Status validate(const SearchConfig& config) {
  if (config.kernel_source.empty()) {
    return bad("the kernel source is empty");
  }
  if (config.problem_source.empty()) {
    return bad("the problem source is empty");
  }
  if (config.beam < 1 || config.plans < 1 || config.impls < 1) {
    return bad("beam, plans and impls must each be at least 1");
  }
  if (config.iterations < 0) {
    return bad("iterations must not be negative");
  }
  if (config.dropout < 0 || config.dropout > 1) {
    return bad("dropout must lie between 0 and 1");
  }
  if (config.repair_tries < 0) {
    return bad("repair tries must not be negative");
  }
  if (config.early_slack < 1) {
    return bad("the early slack must be at least 1");
  }
  if (config.lesson_limit < 0 || config.reflexions < 0) {
    return bad("lesson_limit and reflexions must not be negative");
  }
  if (config.divergence != 0 && !(config.divergence > 1)) {
    return bad(
        "divergence must be 0 (off) or greater than 1 (1.5 drops members 50% slower than the "
        "best)");
  }
  if (config.target != "trn1" && config.target != "trn2") {
    return bad("target must be trn1 or trn2, not '" + config.target + "'");
  }
  if (config.proposers.empty()) {
    return bad("at least one proposer is needed");
  }
  if (config.warmup < 0 || config.iters < 1) {
    return bad("warmup must be >= 0 and iters >= 1");
  }
  return core::ok_status();
}

std::string config_to_text(const SearchConfig& c) {
  std::ostringstream out;
  auto line = [&out](const char* key, const std::string& value) {
    out << key << '=' << escape(value) << '\n';
  };
  line("format", "autocomp-search-config/1");
  line("kernel_filename", c.kernel_filename);
  line("problem_filename", c.problem_filename);
  line("kernel_name", c.kernel_name);
  line("target", c.target);
  line("beam", std::to_string(c.beam));
  line("plans", std::to_string(c.plans));
  line("impls", std::to_string(c.impls));
  line("iterations", std::to_string(c.iterations));
  line("dropout", number(c.dropout));
  line("seed", std::to_string(c.seed));
  line("repair_tries", std::to_string(c.repair_tries));
  line("early_slack", number(c.early_slack));
  line("slack_iterations", std::to_string(c.slack_iterations));
  line("proposers", join(c.proposers));
  line("recent_failures", std::to_string(c.recent_failures));
  line("memory", c.memory ? "1" : "0");
  line("lesson_limit", std::to_string(c.lesson_limit));
  line("reflexions", std::to_string(c.reflexions));
  line("divergence", number(c.divergence));
  line("eval_seeds", join(c.eval_seeds));
  line("warmup", std::to_string(c.warmup));
  line("iters", std::to_string(c.iters));
  line("eval_timeout_ms", std::to_string(c.eval_timeout.count()));
  if (c.budgets.max_llm_calls) {
    line("max_llm_calls", std::to_string(*c.budgets.max_llm_calls));
  }
  if (c.budgets.max_tokens) {
    line("max_tokens", std::to_string(*c.budgets.max_tokens));
  }
  if (c.budgets.max_cost_usd) {
    line("max_cost_usd", number(*c.budgets.max_cost_usd));
  }
  if (c.budgets.max_wall_s) {
    line("max_wall_s", number(*c.budgets.max_wall_s));
  }
  // Sources last: they are the longest values.
  line("problem_source", c.problem_source);
  line("kernel_source", c.kernel_source);
  return out.str();
}

core::Result<SearchConfig> config_from_text(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) {
      continue;
    }
    fields[line.substr(0, eq)] = unescape(line.substr(eq + 1));
  }
  if (fields["format"] != "autocomp-search-config/1") {
    return bad("the stored run config has an unknown format");
  }
  SearchConfig c;
  try {
    c.kernel_filename = fields["kernel_filename"];
    c.problem_filename = fields["problem_filename"];
    c.kernel_name = fields["kernel_name"];
    c.target = fields["target"];
    c.beam = std::stoi(fields["beam"]);
    c.plans = std::stoi(fields["plans"]);
    c.impls = std::stoi(fields["impls"]);
    c.iterations = std::stoi(fields["iterations"]);
    c.dropout = std::stod(fields["dropout"]);
    c.seed = std::stoull(fields["seed"]);
    c.repair_tries = std::stoi(fields["repair_tries"]);
    c.early_slack = std::stod(fields["early_slack"]);
    c.slack_iterations = std::stoi(fields["slack_iterations"]);
    c.proposers = split(fields["proposers"]);
    c.recent_failures = std::stoi(fields["recent_failures"]);
    // Configs stored before the learning loop existed resume without it: turning it on would
    // change their prompts (nothing would replay) and their beams.
    c.memory = fields["memory"] == "1";
    if (fields.count("lesson_limit")) {
      c.lesson_limit = std::stoi(fields["lesson_limit"]);
    }
    c.reflexions = fields.count("reflexions") ? std::stoi(fields["reflexions"]) : 0;
    c.divergence = fields.count("divergence") ? std::stod(fields["divergence"]) : 0;
    c.eval_seeds.clear();
    for (const auto& seed : split(fields["eval_seeds"])) {
      c.eval_seeds.push_back(std::stoi(seed));
    }
    c.warmup = std::stoi(fields["warmup"]);
    c.iters = std::stoi(fields["iters"]);
    c.eval_timeout = std::chrono::milliseconds(std::stoll(fields["eval_timeout_ms"]));
    if (fields.count("max_llm_calls")) {
      c.budgets.max_llm_calls = std::stol(fields["max_llm_calls"]);
    }
    if (fields.count("max_tokens")) {
      c.budgets.max_tokens = std::stol(fields["max_tokens"]);
    }
    if (fields.count("max_cost_usd")) {
      c.budgets.max_cost_usd = std::stod(fields["max_cost_usd"]);
    }
    if (fields.count("max_wall_s")) {
      c.budgets.max_wall_s = std::stod(fields["max_wall_s"]);
    }
  } catch (const std::exception& error) {
    return bad(std::string("the stored run config is damaged: ") + error.what());
  }
  c.problem_source = fields["problem_source"];
  c.kernel_source = fields["kernel_source"];
  return c;
}

}  // namespace autocomp::search::engine
