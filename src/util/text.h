// util/text.h — small checks on text that several layers apply to their input.
#pragma once

#include <cstddef>
#include <string_view>

namespace kvq::util {

// Characters allowed in type names (job types, worker types): they appear in URLs and metric
// labels, so A-Z a-z 0-9 _ . : - only.
bool is_name_char(char c);

// True when no object or array in the JSON `text` nests deeper than `max_depth` (checked before
// parsing, so a hostile document cannot make a recursive parser overflow the stack).
bool json_depth_within(std::string_view text, int max_depth);

// The length (1..4) of the well-formed UTF-8 sequence that starts at text[i], or 0 when none
// does there (RFC 3629: no overlongs, no surrogates, at most U+10FFFF). REQUIRES: i < size.
size_t utf8_sequence_length(std::string_view text, size_t i);
// Whether `text` is well-formed UTF-8 throughout.
bool valid_utf8(std::string_view text);

}  // namespace kvq::util
