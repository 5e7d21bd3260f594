#include "beanstalk/tubes.h"

#include <chrono>

#include "beanstalk/protocol.h"

namespace kvq::beanstalk {
namespace {

constexpr std::string_view kEscaped = "+/;$()";
constexpr char kHex[] = "0123456789ABCDEF";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> type_of_tube(std::string_view tube) {
  std::string type;
  for (char c : tube) {
    if (kEscaped.find(c) == std::string_view::npos) {
      type += c;
    } else {
      const auto byte = static_cast<unsigned char>(c);
      type += ':';
      type += kHex[byte >> 4];
      type += kHex[byte & 0xF];
    }
  }
  if (type.size() > jobs::kMaxTypeBytes) return std::nullopt;
  return type;
}

std::optional<std::string> tube_of_type(std::string_view type) {
  std::string tube;
  for (size_t i = 0; i < type.size(); ++i) {
    if (type[i] != ':') {
      tube += type[i];
      continue;
    }
    if (i + 2 >= type.size()) return std::nullopt;
    const int high = hex_value(type[i + 1]);
    const int low = hex_value(type[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    const char c = static_cast<char>(high * 16 + low);
    if (kEscaped.find(c) == std::string_view::npos) return std::nullopt;
    tube += c;
    i += 2;
  }
  if (!is_valid_name(tube)) return std::nullopt;
  return tube;
}

jobs::TypeSettings tube_type_settings() {
  jobs::TypeSettings settings;
  settings.timeout = std::chrono::seconds(120);
  settings.retry.max_attempts = jobs::kMaxAttemptsLimit;
  return settings;
}

}  // namespace kvq::beanstalk
