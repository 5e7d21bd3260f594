// app/config_file.h — one line of a `kvq serve --config` file.
//
// A line is blank, a comment (its first non-blank character is '#'), or `name = value`. The
// value is, after the blanks around it are dropped:
//   "text"  a double-quoted string: \" and \\ stand for " and \, and every other character,
//           '#' and '=' included, for itself;
//   'text'  a single-quoted string, every character for itself;
//   text    anything else, up to a '#' that follows a blank (a comment): so a token or a
//           password such as `s3cr#t=x` needs no quotes.
// After a quoted value only blanks and a comment may follow.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kvq::app {

// The (name, value) of `line`; nullopt for a blank or comment line; a message saying what is
// wrong otherwise.
using ConfigLine = std::variant<std::optional<std::pair<std::string, std::string>>, std::string>;
ConfigLine parse_config_line(std::string_view line);

}  // namespace kvq::app
