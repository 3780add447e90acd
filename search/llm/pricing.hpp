#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "core/result.hpp"

namespace autocomp::search::llm {

// USD per million tokens.
struct Price {
  double input_per_mtok = 0;
  double output_per_mtok = 0;
};

// Model prices used for cost estimates. Lookup is by exact model name, then by the longest table
// entry that the model name starts with ("claude-sonnet-4-5-20250929" -> "claude-sonnet-4-5"),
// so dated snapshots inherit their family's price.
class PriceTable {
 public:
  // The built-in table of well-known hosted models (estimates; providers change prices).
  static PriceTable builtin();
  // builtin(), then the file named by $AUTOCOMP_LLM_PRICES (if set), then `overrides`: later
  // sources win. A malformed file is an invalid_argument failure naming the line.
  static core::Result<PriceTable> with_overrides(
      const std::map<std::string, std::pair<double, double>>& overrides);

  void set(const std::string& model, Price price) { m_prices[model] = price; }
  std::optional<Price> find(const std::string& model) const;
  std::size_t size() const { return m_prices.size(); }

 private:
  std::map<std::string, Price> m_prices;
};

// Price file format: one model per line, "MODEL INPUT_USD_PER_MTOK OUTPUT_USD_PER_MTOK";
// '#' starts a comment. Entries are added to (and replace entries of) `table`.
core::Status parse_price_file(const std::string& text, const std::string& origin,
                              PriceTable& table);

// Estimated cost in USD of a call, or nullopt when the model has no price.
std::optional<double> estimate_cost(const PriceTable& table, const std::string& model,
                                    long input_tokens, long output_tokens);

}  // namespace autocomp::search::llm
