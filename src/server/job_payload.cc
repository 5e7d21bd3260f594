#include "server/job_payload.h"

#include <array>

#include "util/text.h"

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

bool valid_utf8(std::string_view text) { return util::valid_utf8(text); }

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
