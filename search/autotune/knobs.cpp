#include "search/autotune/knobs.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace autocomp::search::autotune {

namespace {

struct Line {
  std::size_t offset = 0;
  std::string_view text;  // without the line end ("\n" or "\r\n")
};

std::vector<Line> split_lines(std::string_view source) {
  std::vector<Line> lines;
  std::size_t start = 0;
  while (start <= source.size()) {
    std::size_t end = source.find('\n', start);
    bool last = end == std::string_view::npos;
    if (last) {
      end = source.size();
    }
    std::string_view text = source.substr(start, end - start);
    if (!text.empty() && text.back() == '\r') {
      text.remove_suffix(1);
    }
    if (!(last && text.empty() && start == source.size() && start != 0)) {
      lines.push_back({start, text});
    }
    if (last) {
      break;
    }
    start = end + 1;
  }
  return lines;
}

bool is_space(char c) {
  return c == ' ' || c == '\t';
}
bool is_ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool is_ident_char(char c) {
  return is_ident_start(c) || std::isdigit(static_cast<unsigned char>(c));
}

// A cursor over one line; every scan stops at the end of the line.
class Cursor {
 public:
  explicit Cursor(std::string_view text) : m_text(text) {}

  std::size_t pos() const { return m_pos; }
  bool at_end() const { return m_pos >= m_text.size(); }
  char peek() const { return at_end() ? '\0' : m_text[m_pos]; }

  std::size_t skip_spaces() {
    std::size_t start = m_pos;
    while (!at_end() && is_space(m_text[m_pos])) {
      ++m_pos;
    }
    return m_pos - start;
  }
  bool consume(std::string_view word) {
    if (m_text.substr(m_pos).starts_with(word)) {
      m_pos += word.size();
      return true;
    }
    return false;
  }
  std::string_view identifier() {
    if (at_end() || !is_ident_start(m_text[m_pos])) {
      return {};
    }
    std::size_t start = m_pos;
    while (!at_end() && is_ident_char(m_text[m_pos])) {
      ++m_pos;
    }
    return m_text.substr(start, m_pos - start);
  }
  // A literal token: a quoted string (backslash escapes honoured) or a run of characters up to a
  // space, a comma, a closing bracket or a comment. Empty when there is none.
  std::string_view literal_token() {
    std::size_t start = m_pos;
    if (at_end()) {
      return {};
    }
    char quote = m_text[m_pos];
    if (quote == '"' || quote == '\'') {
      ++m_pos;
      while (!at_end() && m_text[m_pos] != quote) {
        m_pos += m_text[m_pos] == '\\' ? 2 : 1;
      }
      if (at_end()) {
        m_pos = m_text.size();
        return {};  // unterminated
      }
      ++m_pos;
      return m_text.substr(start, m_pos - start);
    }
    while (!at_end()) {
      char c = m_text[m_pos];
      if (is_space(c) || c == ',' || c == ']' || c == '#') {
        break;
      }
      ++m_pos;
    }
    return m_text.substr(start, m_pos - start);
  }
  // True when only spaces and possibly a comment remain.
  bool only_comment_left() {
    skip_spaces();
    return at_end() || peek() == '#';
  }

 private:
  std::string_view m_text;
  std::size_t m_pos = 0;
};

struct Declaration {
  std::string name;
  std::vector<std::string> values;
};

std::optional<Declaration> parse_declaration(std::string_view text) {
  Cursor cursor(text);
  cursor.skip_spaces();
  if (!cursor.consume("#")) {
    return std::nullopt;
  }
  cursor.skip_spaces();
  if (!cursor.consume("autocomp:")) {
    return std::nullopt;
  }
  cursor.skip_spaces();
  if (!cursor.consume("knob") || cursor.skip_spaces() == 0) {
    return std::nullopt;
  }
  Declaration declaration;
  declaration.name = std::string(cursor.identifier());
  if (declaration.name.empty()) {
    return std::nullopt;
  }
  cursor.skip_spaces();
  if (!cursor.consume("=")) {
    return std::nullopt;
  }
  cursor.skip_spaces();
  if (!cursor.consume("[")) {
    return std::nullopt;
  }
  std::vector<std::string> canonical;
  while (true) {
    cursor.skip_spaces();
    if (cursor.consume("]")) {
      break;  // also accepts a trailing comma before the bracket
    }
    std::string_view token = cursor.literal_token();
    auto key = canonical_literal(token);
    if (!key) {
      return std::nullopt;
    }
    bool seen = false;
    for (const auto& earlier : canonical) {
      seen = seen || earlier == *key;
    }
    if (!seen) {
      canonical.push_back(*key);
      declaration.values.emplace_back(token);
    }
    cursor.skip_spaces();
    if (cursor.consume(",")) {
      continue;
    }
    if (cursor.consume("]")) {
      break;
    }
    return std::nullopt;
  }
  if (declaration.values.empty() || !cursor.only_comment_left()) {
    return std::nullopt;
  }
  return declaration;
}

struct Assignment {
  std::size_t value_pos = 0;  // within the line
  std::string value;
};

// `NAME = literal` or `NAME: annotation = literal`, optionally followed by a comment.
std::optional<Assignment> parse_assignment(std::string_view text, std::string_view name) {
  Cursor cursor(text);
  cursor.skip_spaces();
  if (cursor.identifier() != name) {
    return std::nullopt;
  }
  cursor.skip_spaces();
  if (cursor.consume(":")) {
    cursor.skip_spaces();
    if (cursor.identifier().empty()) {
      return std::nullopt;
    }
    while (cursor.consume(".")) {
      if (cursor.identifier().empty()) {
        return std::nullopt;
      }
    }
    cursor.skip_spaces();
  }
  if (!cursor.consume("=") || cursor.peek() == '=') {
    return std::nullopt;
  }
  cursor.skip_spaces();
  Assignment assignment;
  assignment.value_pos = cursor.pos();
  std::string_view token = cursor.literal_token();
  if (!canonical_literal(token) || !cursor.only_comment_left()) {
    return std::nullopt;
  }
  assignment.value = std::string(token);
  return assignment;
}

std::optional<std::string> canonical_number(std::string_view text) {
  std::string digits;
  bool negative = false;
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    negative = text[i] == '-';
    ++i;
  }
  bool is_float = false;
  bool any_digit = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
      any_digit = true;
      digits += c;
    } else if (c == '_') {
      // digit separator
    } else if (c == '.' || c == 'e' || c == 'E') {
      is_float = true;
      digits += c;
    } else if ((c == '+' || c == '-') && !digits.empty() &&
               (digits.back() == 'e' || digits.back() == 'E')) {
      digits += c;
    } else {
      return std::nullopt;
    }
  }
  if (!any_digit) {
    return std::nullopt;
  }
  if (is_float) {
    char* end = nullptr;
    double value = std::strtod(digits.c_str(), &end);
    if (end != digits.c_str() + digits.size()) {
      return std::nullopt;
    }
    if (negative) {
      value = -value;
    }
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
    return "f:" + std::string(buffer);
  }
  std::size_t first = digits.find_first_not_of('0');
  digits = first == std::string::npos ? "0" : digits.substr(first);
  return "i:" + std::string(negative && digits != "0" ? "-" : "") + digits;
}

}  // namespace

std::optional<std::string> canonical_literal(std::string_view text) {
  if (text == "True" || text == "False" || text == "None") {
    return std::string(text == "None" ? "n:" : "b:") + std::string(text);
  }
  if (text.size() >= 2 && (text.front() == '"' || text.front() == '\'')) {
    char quote = text.front();
    if (text.back() != quote) {
      return std::nullopt;
    }
    std::string_view body = text.substr(1, text.size() - 2);
    for (std::size_t i = 0; i < body.size(); ++i) {
      if (body[i] == '\\') {
        ++i;
        if (i == body.size()) {
          return std::nullopt;  // the closing quote is escaped
        }
      } else if (body[i] == quote) {
        return std::nullopt;
      }
    }
    return "s:" + std::string(body);
  }
  return canonical_number(text);
}

std::vector<Knob> parse_knobs(std::string_view source) {
  std::vector<Knob> knobs;
  std::vector<Line> lines = split_lines(source);
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    if (lines[i].text.find("autocomp:") == std::string_view::npos) {
      continue;
    }
    auto declaration = parse_declaration(lines[i].text);
    if (!declaration) {
      continue;
    }
    auto assignment = parse_assignment(lines[i + 1].text, declaration->name);
    if (!assignment) {
      continue;
    }
    Knob knob;
    knob.name = declaration->name;
    knob.values = declaration->values;
    knob.current = assignment->value;
    knob.line = i + 1;
    knob.value_offset = lines[i + 1].offset + assignment->value_pos;
    auto current = canonical_literal(knob.current);
    for (std::size_t v = 0; v < knob.values.size(); ++v) {
      if (canonical_literal(knob.values[v]) == current) {
        knob.current_index = v;
        break;
      }
    }
    knobs.push_back(std::move(knob));
    ++i;  // the assignment line cannot declare another knob
  }
  return knobs;
}

core::Result<std::string> set_knob(std::string_view source, const Knob& knob,
                                   std::string_view value) {
  if (knob.value_offset > source.size() ||
      source.substr(knob.value_offset, knob.current.size()) != knob.current) {
    return core::make_failure(core::FailureKind::invalid_argument, "autotune",
                              "knob " + knob.name + " is not at its recorded place in the source");
  }
  if (!canonical_literal(value)) {
    return core::make_failure(
        core::FailureKind::invalid_argument, "autotune",
        "'" + std::string(value) + "' is not a literal for knob " + knob.name);
  }
  std::string result;
  result.reserve(source.size() + value.size());
  result.append(source.substr(0, knob.value_offset));
  result.append(value);
  result.append(source.substr(knob.value_offset + knob.current.size()));
  return result;
}

}  // namespace autocomp::search::autotune
