#include "util/trace_context.h"

namespace kvq::util {
namespace {

constexpr size_t kVersion00Bytes = 55;  // 2 + 1 + 32 + 1 + 16 + 1 + 2

bool lower_hex(std::string_view text) {
  for (const char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool all_zero(std::string_view text) {
  return text.find_first_not_of('0') == std::string_view::npos;
}

}  // namespace

bool is_valid_traceparent(std::string_view text) {
  if (text.size() < kVersion00Bytes || text.size() > kMaxTraceparentBytes) return false;
  const std::string_view version = text.substr(0, 2);
  const std::string_view trace_id = text.substr(3, 32);
  const std::string_view parent_id = text.substr(36, 16);
  const std::string_view flags = text.substr(53, 2);
  if (text[2] != '-' || text[35] != '-' || text[52] != '-') return false;
  if (!lower_hex(version) || version == "ff") return false;
  if (!lower_hex(trace_id) || all_zero(trace_id)) return false;
  if (!lower_hex(parent_id) || all_zero(parent_id)) return false;
  if (!lower_hex(flags)) return false;
  if (text.size() == kVersion00Bytes) return true;
  // Only a later version may carry more, after a '-'.
  if (version == "00" || text[kVersion00Bytes] != '-') return false;
  for (const char c : text.substr(kVersion00Bytes)) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

std::optional<std::string_view> trace_id_of(std::string_view traceparent) {
  if (!is_valid_traceparent(traceparent)) return std::nullopt;
  return traceparent.substr(3, 32);
}

}  // namespace kvq::util
