#include "search/llm/pricing.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace autocomp::search::llm {

PriceTable PriceTable::builtin() {
  // USD per million tokens (input, output), list prices of the providers' standard tiers.
  PriceTable table;
  const std::pair<const char*, Price> k_entries[] = {
      {"gpt-4o", {2.5, 10}},
      {"gpt-4o-mini", {0.15, 0.6}},
      {"gpt-4.1", {2, 8}},
      {"gpt-4.1-mini", {0.4, 1.6}},
      {"gpt-4.1-nano", {0.1, 0.4}},
      {"gpt-5", {1.25, 10}},
      {"gpt-5-mini", {0.25, 2}},
      {"gpt-5-nano", {0.05, 0.4}},
      {"o1", {15, 60}},
      {"o3", {2, 8}},
      {"o3-mini", {1.1, 4.4}},
      {"o4-mini", {1.1, 4.4}},
      {"claude-opus-4", {15, 75}},
      {"claude-opus-4-1", {15, 75}},
      {"claude-opus-4-5", {5, 25}},
      {"claude-sonnet-4", {3, 15}},
      {"claude-sonnet-4-5", {3, 15}},
      {"claude-3-7-sonnet", {3, 15}},
      {"claude-3-5-sonnet", {3, 15}},
      {"claude-haiku-4-5", {1, 5}},
      {"claude-3-5-haiku", {0.8, 4}},
  };
  for (const auto& [model, price] : k_entries) {
    table.set(model, price);
  }
  return table;
}

std::optional<Price> PriceTable::find(const std::string& model) const {
  if (const auto it = m_prices.find(model); it != m_prices.end()) {
    return it->second;
  }
  const Price* best = nullptr;
  std::size_t best_length = 0;
  for (const auto& [name, price] : m_prices) {
    if (name.size() > best_length && model.size() > name.size() &&
        model.compare(0, name.size(), name) == 0 &&
        (model[name.size()] == '-' || model[name.size()] == ':' || model[name.size()] == '@')) {
      best = &price;
      best_length = name.size();
    }
  }
  if (best != nullptr) {
    return *best;
  }
  return std::nullopt;
}

core::Status parse_price_file(const std::string& text, const std::string& origin,
                              PriceTable& table) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (const auto hash = line.find('#'); hash != std::string::npos) {
      line.erase(hash);
    }
    std::istringstream fields(line);
    std::string model;
    if (!(fields >> model)) {
      continue;
    }
    double input = 0;
    double output = 0;
    std::string extra;
    if (!(fields >> input >> output) || (fields >> extra) || input < 0 || output < 0) {
      return core::make_failure(core::FailureKind::invalid_argument, "llm",
                                origin + ":" + std::to_string(number) +
                                    ": expected 'MODEL INPUT_USD_PER_MTOK OUTPUT_USD_PER_MTOK'");
    }
    table.set(model, {input, output});
  }
  return core::ok_status();
}

core::Result<PriceTable> PriceTable::with_overrides(
    const std::map<std::string, std::pair<double, double>>& overrides) {
  auto table = builtin();
  if (const char* path = std::getenv("AUTOCOMP_LLM_PRICES"); path != nullptr && *path != '\0') {
    std::ifstream in(path);
    if (!in) {
      return core::make_failure(core::FailureKind::io_error, "llm",
                                std::string("cannot read price file AUTOCOMP_LLM_PRICES=") + path);
    }
    std::ostringstream text;
    text << in.rdbuf();
    auto status = parse_price_file(text.str(), path, table);
    if (!status.ok()) {
      return status.failure();
    }
  }
  for (const auto& [model, price] : overrides) {
    table.set(model, {price.first, price.second});
  }
  return table;
}

std::optional<double> estimate_cost(const PriceTable& table, const std::string& model,
                                    long input_tokens, long output_tokens) {
  const auto price = table.find(model);
  if (!price) {
    return std::nullopt;
  }
  return (static_cast<double>(input_tokens) * price->input_per_mtok +
          static_cast<double>(output_tokens) * price->output_per_mtok) /
         1e6;
}

}  // namespace autocomp::search::llm
