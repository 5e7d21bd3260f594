#include "app/config_file.h"

namespace kvq::app {
namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

// Whether what follows a quoted value is blanks, then nothing or a comment.
bool only_a_comment(std::string_view rest) {
  rest = trimmed(rest);
  return rest.empty() || rest.front() == '#';
}

// The value of a `name = value` line, from just after its '=', or what is wrong with it.
struct Value {
  std::string text;
  std::string error;  // "" when the value is well-formed
};

Value quoted_value(std::string_view text) {
  const char quote = text.front();
  std::string value;
  for (size_t i = 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == quote) {
      if (!only_a_comment(text.substr(i + 1))) return {"", "unexpected text after a quoted value"};
      return {value, ""};
    }
    if (quote == '"' && c == '\\') {
      if (i + 1 == text.size() || (text[i + 1] != '"' && text[i + 1] != '\\'))
        return {"", "in a double-quoted value a \\ is written \\\\ (and a \" \\\")"};
      ++i;
    }
    value += text[i];
  }
  return {"", std::string("a value opened with ") + quote + " is not closed on its line"};
}

Value read_value(std::string_view text) {
  text = trimmed(text);
  if (text.empty()) return {};
  if (text.front() == '"' || text.front() == '\'') return quoted_value(text);
  // A comment starts at a '#' after a blank; a '#' inside the value is part of it.
  for (size_t i = 1; i < text.size(); ++i) {
    if (text[i] == '#' && blank(text[i - 1])) return {std::string(trimmed(text.substr(0, i))), ""};
  }
  return {std::string(text), ""};
}

}  // namespace

ConfigLine parse_config_line(std::string_view line) {
  line = trimmed(line);
  if (line.empty() || line.front() == '#') return std::nullopt;
  const auto eq = line.find('=');
  if (eq == std::string_view::npos) return std::string("expected 'name = value'");
  const std::string_view name = trimmed(line.substr(0, eq));
  if (name.empty()) return std::string("expected 'name = value'");
  Value value = read_value(line.substr(eq + 1));
  if (!value.error.empty()) return value.error;
  return std::optional(std::pair{std::string(name), std::move(value.text)});
}

}  // namespace kvq::app
