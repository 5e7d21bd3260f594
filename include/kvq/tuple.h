// kvq/tuple.h — order-preserving encoding of keys, after FoundationDB's tuple layer.
//
// A Tuple is a sequence of elements: null, byte strings, unicode (UTF-8) strings, signed 64-bit
// integers, booleans and nested tuples. pack() turns it into bytes such that comparing two
// packings byte by byte (memcmp, shorter-is-smaller) gives the same answer as comparing the
// tuples with operator<=>: element by element, elements of different kinds ordered by kind
// (null < bytes < string < nested tuple < integer < false < true), a tuple that is a prefix of
// another first. The byte format is FoundationDB's, so keys are readable by its tools:
//
//   null 0x00 · bytes 0x01 … 0x00 · string 0x02 … 0x00 (0x00 inside escaped as 0x00 0xFF)
//   nested 0x05 … 0x00 (a null inside is 0x00 0xFF) · integers 0x0C–0x1C (0x14 is zero;
//   0x14±n is an n-byte big-endian magnitude, one's complement when negative) · false 0x26,
//   true 0x27.
//
// unpack() accepts exactly what pack() produces; any other bytes give InvalidArgument, never a
// crash or an out-of-bounds read. A Subspace is a key prefix with pack/unpack/range helpers,
// used to give each kind of record its own contiguous key range.
//
// Thread-safety: values; no shared state.
#pragma once

#include <compare>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "kvq/status.h"

namespace kvq {

// A byte string element, ordered and encoded apart from unicode strings.
struct Bytes {
  std::string data;
  friend auto operator<=>(const Bytes&, const Bytes&) = default;
};

class Element;

// The deepest nesting of tuples unpack() accepts (a top-level tuple holding a tuple is depth 1).
// Decoding recurses per level, so the cap keeps hostile input from exhausting the stack; pack()
// does not check it, and a deeper tuple's packing will not unpack.
inline constexpr int kMaxTupleNesting = 64;

class Tuple {
 public:
  Tuple() = default;
  // Beware Tuple{t} with a single Tuple t: GCC nests it, Clang (CWG 1467) copies it. To nest a
  // lone tuple portably write Tuple{Element(t)}; to copy, write Tuple(t) or `= t`.
  Tuple(std::initializer_list<Element> elements);
  explicit Tuple(std::vector<Element> elements);

  Tuple& append(Element element);
  size_t size() const;
  bool empty() const;
  const Element& operator[](size_t i) const;
  const std::vector<Element>& elements() const;

  // The order-preserving encoding described above.
  std::string pack() const;
  void pack_to(std::string& out) const;
  // Decodes a whole packing; InvalidArgument for malformed or trailing bytes, for non-minimal
  // integers or integers outside int64_t, and for nesting deeper than kMaxTupleNesting.
  static Result<Tuple> unpack(std::string_view bytes);

  friend std::strong_ordering operator<=>(const Tuple& a, const Tuple& b);
  friend bool operator==(const Tuple& a, const Tuple& b);

  // A human-readable form for logs and test failures: ("job", 42, b"\x00", null, true).
  std::string debug_string() const;

 private:
  std::vector<Element> elements_;
};

class Element {
 public:
  using Value = std::variant<std::nullptr_t, Bytes, std::string, Tuple, int64_t, bool>;

  Element() : value_(nullptr) {}
  Element(std::nullptr_t) : value_(nullptr) {}             // NOLINT: implicit by design
  Element(Bytes b) : value_(std::move(b)) {}               // NOLINT
  Element(std::string s) : value_(std::move(s)) {}         // NOLINT
  Element(std::string_view s) : value_(std::string(s)) {}  // NOLINT
  Element(const char* s) : value_(std::string(s)) {}       // NOLINT
  Element(Tuple t) : value_(std::move(t)) {}               // NOLINT
  Element(bool b) : value_(b) {}                           // NOLINT
  template <std::integral I>
  requires(!std::same_as<I, bool>) Element(I i) : value_(static_cast<int64_t>(i)) {}  // NOLINT

  const Value& value() const { return value_; }
  bool is_null() const { return std::holds_alternative<std::nullptr_t>(value_); }
  bool is_int() const { return std::holds_alternative<int64_t>(value_); }
  bool is_string() const { return std::holds_alternative<std::string>(value_); }
  bool is_bytes() const { return std::holds_alternative<Bytes>(value_); }
  bool is_bool() const { return std::holds_alternative<bool>(value_); }
  bool is_tuple() const { return std::holds_alternative<Tuple>(value_); }
  // REQUIRES: the matching is_*() is true.
  int64_t as_int() const { return std::get<int64_t>(value_); }
  const std::string& as_string() const { return std::get<std::string>(value_); }
  const std::string& as_bytes() const { return std::get<Bytes>(value_).data; }
  bool as_bool() const { return std::get<bool>(value_); }
  const Tuple& as_tuple() const { return std::get<Tuple>(value_); }

  friend std::strong_ordering operator<=>(const Element& a, const Element& b);
  friend bool operator==(const Element& a, const Element& b) { return (a <=> b) == 0; }

 private:
  Value value_;
};

// A contiguous range of keys sharing a prefix.
class Subspace {
 public:
  Subspace() = default;
  explicit Subspace(std::string raw_prefix) : prefix_(std::move(raw_prefix)) {}
  Subspace(const Tuple& t, std::string raw_prefix = "") : prefix_(raw_prefix + t.pack()) {}

  const std::string& prefix() const { return prefix_; }
  // The child subspace prefix + pack(t).
  Subspace sub(const Tuple& t) const { return Subspace(prefix_ + t.pack()); }
  std::string pack(const Tuple& t) const { return prefix_ + t.pack(); }
  bool contains(std::string_view key) const { return key.substr(0, prefix_.size()) == prefix_; }
  // InvalidArgument if `key` is outside this subspace or its remainder is malformed.
  Result<Tuple> unpack(std::string_view key) const;

  // [prefix + 0x00, prefix + 0xFF): every key packed from a non-empty tuple in this subspace.
  std::pair<std::string, std::string> range() const;
  // Keys packed from tuples that start with `t`: [pack(t) + 0x00, pack(t) + 0xFF).
  std::pair<std::string, std::string> range(const Tuple& t) const;

 private:
  std::string prefix_;
};

// The first key greater than every key that starts with `prefix` ("" when there is none, i.e.
// the prefix is all 0xFF bytes). Useful as the end of a prefix range.
std::string strinc(std::string_view prefix);

}  // namespace kvq
