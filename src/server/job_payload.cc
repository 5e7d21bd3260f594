#include "server/job_payload.h"

#include <array>

namespace kvq::server {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Each byte's value in the alphabet, or -1.
constexpr std::array<int, 256> decoding_table() {
  std::array<int, 256> table{};
  for (auto& v : table) v = -1;
  for (int i = 0; i < 64; ++i) table[static_cast<unsigned char>(kAlphabet[i])] = i;
  return table;
}
constexpr auto kDecoding = decoding_table();

// The length of the UTF-8 sequence starting at text[i] if well-formed, else 0.
size_t utf8_sequence(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  const auto at = [&](size_t k) {
    return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k]));
  };
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(v >> shift) & 63];
  }
  const size_t left = bytes.size() - i;
  if (left > 0) {
    const uint32_t v = at(i) << 16 | (left == 2 ? at(i + 1) << 8 : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const size_t pad = !last ? 0 : text[i + 3] != '=' ? 0 : text[i + 2] != '=' ? 1 : 2;
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int d = k < 4 - pad ? kDecoding[static_cast<unsigned char>(text[i + k])] : 0;
      if (d < 0) return std::nullopt;
      v = v << 6 | static_cast<uint32_t>(d);
    }
    out += static_cast<char>(v >> 16);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(v & 0xFF);
  }
  return out;
}

bool valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void put_data_fields(nlohmann::json& out, const std::string& data, jobs::DataFormat format) {
  out["data_format"] = std::string(jobs::data_format_name(format));
  if (format == jobs::DataFormat::kJson) {
    auto parsed = nlohmann::json::parse(data, nullptr, false);
    out["data"] = parsed.is_discarded() ? nlohmann::json::object() : std::move(parsed);
    return;
  }
  out["data"] = nullptr;
  if (valid_utf8(data)) {
    out["body"] = data;
  } else {
    out["body_base64"] = base64_encode(data);
  }
}

Field<Payload> read_payload(const JsonBody& body) {
  auto data = body.object_text("data");
  auto text = body.string("body");
  auto base64 = body.string("body_base64");
  if (auto error = first_error(data, text, base64)) return *error;
  const int given = (data.value() ? 1 : 0) + (text.value() ? 1 : 0) + (base64.value() ? 1 : 0);
  if (given > 1)
    return invalid_argument("give one of fields 'data', 'body' and 'body_base64', not several");
  if (data.value()) return Payload{*data.value(), jobs::DataFormat::kJson};
  if (text.value()) return Payload{*text.value(), jobs::DataFormat::kBytes};
  if (base64.value()) {
    auto bytes = base64_decode(*base64.value());
    if (!bytes)
      return invalid_argument(
          "field 'body_base64' must be standard base64 (A-Z a-z 0-9 + /, padded with =)");
    return Payload{std::move(*bytes), jobs::DataFormat::kBytes};
  }
  return std::nullopt;
}

}  // namespace kvq::server
