#include "search/prompts/menu.hpp"

#include <set>

namespace autocomp::search::prompts {

namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\r')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

bool valid_id(std::string_view id) {
  if (id.empty()) {
    return false;
  }
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) {
      return false;
    }
  }
  return true;
}

}  // namespace

core::Result<Menu> parse_menu(std::string_view text, std::string_view origin) {
  Menu menu;
  std::set<std::string> seen;
  int line_number = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const auto line = trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') {
      if (end == text.size()) {
        break;
      }
      continue;
    }
    auto fail = [&](const std::string& why) {
      return core::make_failure(core::FailureKind::invalid_argument, "prompts",
                                std::string(origin) + ":" + std::to_string(line_number) + ": " +
                                    why + " (expected '- id: text')");
    };
    if (line.size() < 2 || line[0] != '-' || line[1] != ' ') {
      return fail("not a menu item");
    }
    const auto body = line.substr(2);
    const auto colon = body.find(':');
    if (colon == std::string_view::npos) {
      return fail("missing ':' after the id");
    }
    const auto id = trim(body.substr(0, colon));
    const auto item_text = trim(body.substr(colon + 1));
    if (!valid_id(id)) {
      return fail("id '" + std::string(id) + "' must be letters, digits, '_', '-' or '.'");
    }
    if (item_text.empty()) {
      return fail("item '" + std::string(id) + "' has no text");
    }
    if (!seen.insert(std::string(id)).second) {
      return fail("duplicate id '" + std::string(id) + "'");
    }
    menu.items.push_back({std::string(id), std::string(item_text)});
    if (end == text.size()) {
      break;
    }
  }
  return menu;
}

core::Result<Menu> load_menu(const PromptLibrary& library, const std::string& target) {
  const std::string relative = "menus/" + target + ".md";
  auto text = library.read(relative);
  if (!text.ok()) {
    return core::make_failure(
        core::FailureKind::invalid_argument, "prompts",
        "no optimization menu for target '" + target + "': " + text.failure().message);
  }
  auto menu = parse_menu(text.value(), library.dir() + "/" + relative);
  if (menu.ok()) {
    menu->target = target;
  }
  return menu;
}

std::uint64_t SeededRng::next() {
  std::uint64_t z = (m_state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double SeededRng::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

std::size_t SeededRng::below(std::size_t bound) {
  return static_cast<std::size_t>(uniform() * static_cast<double>(bound)) % bound;
}

std::vector<MenuItem> apply_dropout(const std::vector<MenuItem>& items, double drop_probability,
                                    SeededRng& rng) {
  if (drop_probability <= 0) {
    return items;
  }
  if (drop_probability >= 1) {
    return {};
  }
  std::vector<MenuItem> kept;
  for (const auto& item : items) {
    if (rng.uniform() >= drop_probability) {
      kept.push_back(item);
    }
  }
  if (kept.empty() && !items.empty()) {
    kept.push_back(items[rng.below(items.size())]);
  }
  return kept;
}

}  // namespace autocomp::search::prompts
