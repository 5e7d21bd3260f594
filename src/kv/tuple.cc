// FoundationDB tuple-layer encoding. See kvq/tuple.h for the format and ordering contract.
#include "kvq/tuple.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace kvq {
namespace {

constexpr unsigned char kNull = 0x00;
constexpr unsigned char kBytes = 0x01;
constexpr unsigned char kString = 0x02;
constexpr unsigned char kNested = 0x05;
constexpr unsigned char kIntZero = 0x14;
constexpr unsigned char kFalse = 0x26;
constexpr unsigned char kTrue = 0x27;
constexpr unsigned char kEscape = 0xFF;

void put(std::string& out, unsigned char c) { out.push_back(static_cast<char>(c)); }

// The terminator must sort below every continuation byte, so embedded zeros become 0x00 0xFF.
// Copies the runs between NUL bytes whole: job rows carry kilobytes of JSON through here.
void encode_escaped(std::string& out, unsigned char code, std::string_view s) {
  put(out, code);
  for (;;) {
    const void* nul = std::memchr(s.data(), '\0', s.size());
    if (nul == nullptr) break;
    const size_t run = static_cast<size_t>(static_cast<const char*>(nul) - s.data()) + 1;
    out.append(s.data(), run);
    put(out, kEscape);
    s.remove_prefix(run);
  }
  out.append(s);
  put(out, kNull);
}

int magnitude_length(uint64_t magnitude) {
  int len = 0;
  for (; magnitude != 0; magnitude >>= 8) ++len;
  return len;
}

// Unsigned arithmetic throughout: the magnitude of INT64_MIN (2^63) does not fit in int64_t.
void encode_int(std::string& out, int64_t v) {
  if (v == 0) return put(out, kIntZero);
  uint64_t magnitude = v > 0 ? static_cast<uint64_t>(v) : 0 - static_cast<uint64_t>(v);
  int len = magnitude_length(magnitude);
  // One's complement keeps negatives ordered: a larger magnitude gives smaller bytes.
  uint64_t body = v > 0 ? magnitude : ~magnitude;
  put(out, static_cast<unsigned char>(v > 0 ? kIntZero + len : kIntZero - len));
  for (int i = len - 1; i >= 0; --i) put(out, static_cast<unsigned char>(body >> (8 * i)));
}

void encode_element(std::string& out, const Element& e, bool nested);

void encode_elements(std::string& out, const std::vector<Element>& elements, bool nested) {
  for (const Element& e : elements) encode_element(out, e, nested);
}

void encode_element(std::string& out, const Element& e, bool nested) {
  if (e.is_null()) {
    // Inside a nested tuple a bare 0x00 is the terminator, so null needs the escape byte.
    put(out, kNull);
    if (nested) put(out, kEscape);
  } else if (e.is_bytes()) {
    encode_escaped(out, kBytes, e.as_bytes());
  } else if (e.is_string()) {
    encode_escaped(out, kString, e.as_string());
  } else if (e.is_tuple()) {
    put(out, kNested);
    encode_elements(out, e.as_tuple().elements(), /*nested=*/true);
    put(out, kNull);
  } else if (e.is_int()) {
    encode_int(out, e.as_int());
  } else {
    put(out, e.as_bool() ? kTrue : kFalse);
  }
}

// A bounds-checked cursor over the input; every read goes through it. Elements are emplaced
// straight into their enclosing tuple's vector: no Result<Element> or Element temporaries, which
// also sidesteps GCC 12's false -Wmaybe-uninitialized on moved-from variants.
class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}

  Status decode_top(std::vector<Element>& out) {
    while (!at_end()) KVQ_RETURN_IF_ERROR(decode_element(out, /*depth=*/0));
    return Status::OK();
  }

 private:
  Status error(std::string_view what) const {
    return InvalidArgument("tuple: " + std::string(what) + " at offset " + std::to_string(pos_));
  }

  bool at_end() const { return pos_ >= in_.size(); }
  // REQUIRES: pos_ + ahead < in_.size()
  unsigned char peek(size_t ahead = 0) const {
    return static_cast<unsigned char>(in_[pos_ + ahead]);
  }

  Status decode_element(std::vector<Element>& out, int depth);
  Status decode_escaped(std::string& s);
  Status decode_int(std::vector<Element>& out, unsigned char code);
  Status decode_nested(std::vector<Element>& out, int depth);

  std::string_view in_;
  size_t pos_ = 0;
};

// REQUIRES: !at_end()
Status Decoder::decode_element(std::vector<Element>& out, int depth) {
  unsigned char code = peek();
  ++pos_;
  if (code == kNull) {
    out.emplace_back(nullptr);
  } else if (code == kBytes) {
    Bytes b;
    KVQ_RETURN_IF_ERROR(decode_escaped(b.data));
    out.emplace_back(std::move(b));
  } else if (code == kString) {
    std::string str;
    KVQ_RETURN_IF_ERROR(decode_escaped(str));
    out.emplace_back(std::move(str));
  } else if (code == kNested) {
    return decode_nested(out, depth + 1);
  } else if (code >= kIntZero - 8 && code <= kIntZero + 8) {
    return decode_int(out, code);
  } else if (code == kFalse || code == kTrue) {
    out.emplace_back(code == kTrue);
  } else {
    --pos_;
    return error("unknown type code " + std::to_string(code));
  }
  return Status::OK();
}

Status Decoder::decode_escaped(std::string& s) {
  while (!at_end()) {
    const void* nul = std::memchr(in_.data() + pos_, '\0', in_.size() - pos_);
    if (nul == nullptr) break;
    const size_t end = static_cast<size_t>(static_cast<const char*>(nul) - in_.data());
    s.append(in_.data() + pos_, end - pos_);
    pos_ = end + 1;
    if (at_end() || peek() != kEscape) return Status::OK();  // a lone 0x00 terminates
    ++pos_;
    s.push_back('\0');
  }
  return error("unterminated string");
}

// Rejects non-minimal lengths so that every accepted input re-packs to the same bytes.
Status Decoder::decode_int(std::vector<Element>& out, unsigned char code) {
  if (code == kIntZero) {
    out.emplace_back(int64_t{0});
    return Status::OK();
  }
  bool negative = code < kIntZero;
  size_t len = negative ? kIntZero - code : code - kIntZero;
  if (in_.size() - pos_ < len) return error("truncated integer");
  if (peek() == (negative ? kEscape : 0x00)) return error("non-minimal integer");
  uint64_t body = 0;
  for (size_t i = 0; i < len; ++i) body = (body << 8) | peek(i);
  pos_ += len;
  if (!negative) {
    if (body > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return error("integer overflows int64");
    }
    out.emplace_back(static_cast<int64_t>(body));
    return Status::OK();
  }
  uint64_t mask = len == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * len)) - 1;
  uint64_t magnitude = ~body & mask;
  if (magnitude > (uint64_t{1} << 63)) return error("integer underflows int64");
  // Modular conversion (well-defined since C++20) maps the magnitude 2^63 to INT64_MIN.
  out.emplace_back(static_cast<int64_t>(0 - magnitude));
  return Status::OK();
}

Status Decoder::decode_nested(std::vector<Element>& out, int depth) {
  // Decoding recurses once per level; the cap keeps hostile input from exhausting the stack.
  if (depth > kMaxTupleNesting) return error("tuple nested too deeply");
  std::vector<Element> t;
  while (!at_end()) {
    if (peek() != kNull) {
      KVQ_RETURN_IF_ERROR(decode_element(t, depth));
    } else if (pos_ + 1 < in_.size() && peek(1) == kEscape) {
      pos_ += 2;  // an escaped null element
      t.emplace_back(nullptr);
    } else {
      ++pos_;  // the terminator
      out.emplace_back(Tuple(std::move(t)));
      return Status::OK();
    }
  }
  return error("unterminated nested tuple");
}

void append_quoted(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u >= 0x20 && u < 0x7F) {
      out.push_back(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  out.push_back('"');
}

void append_debug(std::string& out, const Element& e) {
  if (e.is_null()) {
    out += "null";
  } else if (e.is_bytes()) {
    out.push_back('b');
    append_quoted(out, e.as_bytes());
  } else if (e.is_string()) {
    append_quoted(out, e.as_string());
  } else if (e.is_tuple()) {
    out += e.as_tuple().debug_string();
  } else if (e.is_int()) {
    out += std::to_string(e.as_int());
  } else {
    out += e.as_bool() ? "true" : "false";
  }
}

}  // namespace

Tuple::Tuple(std::initializer_list<Element> elements) : elements_(elements) {}
Tuple::Tuple(std::vector<Element> elements) : elements_(std::move(elements)) {}

Tuple& Tuple::append(Element element) {
  elements_.push_back(std::move(element));
  return *this;
}

size_t Tuple::size() const { return elements_.size(); }
bool Tuple::empty() const { return elements_.empty(); }

const Element& Tuple::operator[](size_t i) const {
  assert(i < elements_.size());
  return elements_[i];
}

const std::vector<Element>& Tuple::elements() const { return elements_; }

std::string Tuple::pack() const {
  std::string out;
  pack_to(out);
  return out;
}

void Tuple::pack_to(std::string& out) const { encode_elements(out, elements_, /*nested=*/false); }

Result<Tuple> Tuple::unpack(std::string_view bytes) {
  std::vector<Element> elements;
  KVQ_RETURN_IF_ERROR(Decoder(bytes).decode_top(elements));
  return Tuple(std::move(elements));
}

std::strong_ordering operator<=>(const Tuple& a, const Tuple& b) {
  return std::lexicographical_compare_three_way(a.elements_.begin(), a.elements_.end(),
                                                b.elements_.begin(), b.elements_.end());
}

bool operator==(const Tuple& a, const Tuple& b) { return a.elements_ == b.elements_; }

std::string Tuple::debug_string() const {
  std::string out = "(";
  for (size_t i = 0; i < elements_.size(); ++i) {
    if (i > 0) out += ", ";
    append_debug(out, elements_[i]);
  }
  out += ")";
  return out;
}

// The variant's alternatives are declared in kind order, so index() is the kind rank.
std::strong_ordering operator<=>(const Element& a, const Element& b) {
  if (a.value_.index() != b.value_.index()) return a.value_.index() <=> b.value_.index();
  return std::visit(
      [&b](const auto& x) -> std::strong_ordering {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b.value_);
        if constexpr (std::is_same_v<T, std::nullptr_t>) {
          return std::strong_ordering::equal;
        } else {
          // std::string compares via char_traits<char>, which orders as unsigned char (memcmp).
          return x <=> y;
        }
      },
      a.value_);
}

Result<Tuple> Subspace::unpack(std::string_view key) const {
  if (!contains(key)) return InvalidArgument("tuple: key is outside the subspace");
  return Tuple::unpack(key.substr(prefix_.size()));
}

std::pair<std::string, std::string> Subspace::range() const {
  return {prefix_ + '\x00', prefix_ + '\xFF'};
}

std::pair<std::string, std::string> Subspace::range(const Tuple& t) const {
  std::string p = pack(t);
  return {p + '\x00', p + '\xFF'};
}

std::string strinc(std::string_view prefix) {
  std::string s(prefix);
  while (!s.empty() && static_cast<unsigned char>(s.back()) == 0xFF) s.pop_back();
  if (s.empty()) return s;
  s.back() = static_cast<char>(static_cast<unsigned char>(s.back()) + 1);
  return s;
}

}  // namespace kvq
