// Tests for kvq/tuple.h: FoundationDB byte compatibility, order preservation, and robustness of
// unpack() against arbitrary bytes.
#include "kvq/tuple.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace kvq {
// Lets gtest show tuples readably in failure messages. Internal linkage so it cannot clash with
// another test file in the same binary.
[[maybe_unused]] static void PrintTo(const Tuple& t, std::ostream* os) { *os << t.debug_string(); }
}  // namespace kvq

namespace kvq {
namespace {

using namespace std::literals;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// memcmp order, shorter-is-smaller: the order a KV store sorts keys in.
int key_order(std::string_view a, std::string_view b) {
  int c = std::memcmp(a.data(), b.data(), std::min(a.size(), b.size()));
  if (c != 0) return c < 0 ? -1 : 1;
  if (a.size() == b.size()) return 0;
  return a.size() < b.size() ? -1 : 1;
}

int sign(std::strong_ordering o) { return o < 0 ? -1 : (o > 0 ? 1 : 0); }

std::string hex(std::string_view s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    out += digits[u >> 4];
    out += digits[u & 0xF];
    out += ' ';
  }
  return out;
}

Tuple must_unpack(std::string_view bytes) {
  Result<Tuple> r = Tuple::unpack(bytes);
  EXPECT_TRUE(r.ok()) << hex(bytes) << ": " << r.status().message();
  return r.ok() ? *r : Tuple();
}

// Decodes from an exactly-sized heap copy so that ASan flags a read even one byte past the end,
// which a std::string's NUL terminator or a substring's parent would otherwise absorb.
Result<Tuple> unpack_exact(std::string_view bytes) {
  auto copy = std::make_unique<char[]>(bytes.size());
  std::copy(bytes.begin(), bytes.end(), copy.get());
  return Tuple::unpack(std::string_view(copy.get(), bytes.size()));
}

void expect_rejected(std::string_view bytes) {
  Result<Tuple> r = unpack_exact(bytes);
  ASSERT_FALSE(r.ok()) << hex(bytes) << " unpacked to " << r->debug_string();
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << hex(bytes);
}

// Any accepted input must be the canonical packing of what it decoded to.
void expect_rejected_or_canonical(std::string_view bytes) {
  Result<Tuple> r = unpack_exact(bytes);
  if (r.ok()) {
    ASSERT_EQ(r->pack(), bytes) << hex(bytes) << " unpacked to " << r->debug_string();
  } else {
    ASSERT_EQ(r.status().code(), Code::kInvalidArgument) << hex(bytes);
  }
}

// A one-element tuple holding `inner`. Tuple{inner} would copy on Clang (see kvq/tuple.h).
Tuple wrap(Tuple inner) { return Tuple{Element(std::move(inner))}; }

Tuple nest(int depth) {
  Tuple t{1};
  for (int i = 0; i < depth; ++i) t = wrap(std::move(t));
  return t;
}

// Random tuples biased towards the cases that break tuple encoders: embedded 0x00 and 0xFF,
// shared prefixes (a tiny alphabet and short lengths), and integers at length boundaries.
class TupleGen {
 public:
  explicit TupleGen(uint64_t seed) : rng_(seed) {}

  Tuple tuple(int depth_left) {
    Tuple t;
    int n = static_cast<int>(below(5));
    for (int i = 0; i < n; ++i) t.append(element(depth_left));
    return t;
  }

  int64_t interesting_int() {
    switch (below(4)) {
      case 0: {  // around a power of two (byte-length boundaries sit at 2^(8k))
        int k = static_cast<int>(below(64));
        uint64_t p = uint64_t{1} << k;
        uint64_t v = p + below(3) - 1;  // p-1, p, p+1 (unsigned wrap is fine)
        auto s = static_cast<int64_t>(v & static_cast<uint64_t>(kMax));
        return below(2) ? s : -s;
      }
      case 1: {
        static const int64_t kEdges[] = {
            0,    1,   -1,   2,     -2,    127,    128,    -127, -128, 255,      256,     -255,
            -256, 257, -257, 65535, 65536, -65535, -65536, kMax, kMin, kMax - 1, kMin + 1};
        return kEdges[below(std::size(kEdges))];
      }
      case 2:  // small values collide often, exercising equality
        return static_cast<int64_t>(below(7)) - 3;
      default: {  // random width
        int bits = static_cast<int>(below(64));
        auto v = static_cast<int64_t>(rng_() >> (63 - bits) >> 1);
        return below(2) ? v : -v;
      }
    }
  }

  std::string blob() {
    static const char kAlphabet[] = {'\x00', '\x00', '\xff', '\xff', '\x01',
                                     'a',    'b',    '\x7f', '\x80', '\xfe'};
    std::string s;
    size_t n = below(6);
    for (size_t i = 0; i < n; ++i) s += kAlphabet[below(sizeof kAlphabet)];
    return s;
  }

  uint64_t below(uint64_t n) { return rng_() % n; }
  std::mt19937_64& rng() { return rng_; }

 private:
  Element element(int depth_left) {
    switch (below(depth_left > 0 ? 7 : 6)) {
      case 0: return nullptr;
      case 1: return Bytes{blob()};
      case 2: return blob();
      case 3: return interesting_int();
      case 4: return interesting_int();
      case 5: return below(2) == 1;
      default: return tuple(depth_left - 1);
    }
  }

  std::mt19937_64 rng_;
};

std::vector<Tuple> random_tuples(uint64_t seed, size_t count) {
  TupleGen gen(seed);
  std::vector<Tuple> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) out.push_back(gen.tuple(3));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Byte format

TEST(TupleTest, EmptyTuplePacksToNothing) {
  EXPECT_EQ(Tuple().pack(), "");
  EXPECT_EQ(must_unpack(""), Tuple());
}

TEST(TupleTest, StringsEncodeLikeFoundationDB) {
  EXPECT_EQ(Tuple{"hello"}.pack(), "\x02hello\x00"s);
  EXPECT_EQ(Tuple{""}.pack(), "\x02\x00"s);
  EXPECT_EQ(Tuple{"a\0b"s}.pack(),
            "\x02"
            "a\x00\xff"
            "b\x00"s);
  EXPECT_EQ(Tuple{"\xff"s}.pack(), "\x02\xff\x00"s);
  // UTF-8 passes through untouched.
  EXPECT_EQ(Tuple{"\xc3\xa9"}.pack(), "\x02\xc3\xa9\x00"s);
}

TEST(TupleTest, BytesEncodeWithEscapedZeros) {
  EXPECT_EQ(Tuple{Bytes{"\x00"
                        "ab"s}}
                .pack(),
            "\x01\x00\xff"
            "ab\x00"s);
  EXPECT_EQ(Tuple{Bytes{""}}.pack(), "\x01\x00"s);
  EXPECT_EQ(Tuple{Bytes{"\x00\x00"s}}.pack(), "\x01\x00\xff\x00\xff\x00"s);
  EXPECT_EQ(Tuple{Bytes{"\xff\x00"s}}.pack(), "\x01\xff\x00\xff\x00"s);
}

TEST(TupleTest, IntegersEncodeLikeFoundationDB) {
  struct Case {
    int64_t value;
    std::string packed;
  };
  const Case cases[] = {
      {0, "\x14"s},
      {1, "\x15\x01"s},
      {-1, "\x13\xfe"s},
      {255, "\x15\xff"s},
      {-255, "\x13\x00"s},
      {256, "\x16\x01\x00"s},
      {-256, "\x12\xfe\xff"s},
      {65535, "\x16\xff\xff"s},
      {65536, "\x17\x01\x00\x00"s},
      {-65536, "\x11\xfe\xff\xff"s},
      {kMax, "\x1c\x7f\xff\xff\xff\xff\xff\xff\xff"s},
      {kMin, "\x0c\x7f\xff\xff\xff\xff\xff\xff\xff"s},
      {kMin + 1, "\x0c\x80\x00\x00\x00\x00\x00\x00\x00"s},
      {int64_t{1} << 56, "\x1c\x01\x00\x00\x00\x00\x00\x00\x00"s},
      {(int64_t{1} << 56) - 1, "\x1b\xff\xff\xff\xff\xff\xff\xff"s},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value);
    EXPECT_EQ(hex(Tuple{c.value}.pack()), hex(c.packed));
    Tuple back = must_unpack(c.packed);
    ASSERT_EQ(back.size(), 1u);
    ASSERT_TRUE(back[0].is_int());
    EXPECT_EQ(back[0].as_int(), c.value);
  }
}

TEST(TupleTest, NarrowIntegerTypesConvertToInt64) {
  EXPECT_EQ(Tuple{uint8_t{255}}.pack(), "\x15\xff"s);
  EXPECT_EQ(Tuple{int16_t{-256}}.pack(), "\x12\xfe\xff"s);
  EXPECT_EQ(Tuple{42u}, Tuple{int64_t{42}});
}

TEST(TupleTest, NullAndBooleansEncodeLikeFoundationDB) {
  EXPECT_EQ(Tuple{nullptr}.pack(), "\x00"s);
  EXPECT_EQ(Tuple{false}.pack(), "\x26");
  EXPECT_EQ(Tuple{true}.pack(), "\x27");
  EXPECT_EQ(Tuple({nullptr, nullptr}).pack(), "\x00\x00"s);
}

TEST(TupleTest, NestedTuplesEscapeTheirNulls) {
  EXPECT_EQ(wrap(Tuple()).pack(), "\x05\x00"s);
  EXPECT_EQ(wrap(Tuple{nullptr}).pack(), "\x05\x00\xff\x00"s);
  EXPECT_EQ((Tuple{Tuple{"n", nullptr}, nullptr}.pack()), "\x05\x02n\x00\x00\xff\x00\x00"s);
  EXPECT_EQ((Tuple{1, Tuple{Bytes{"\x00"s}, Tuple{}}, "x"}.pack()),
            "\x15\x01\x05\x01\x00\xff\x00\x05\x00\x00\x02x\x00"s);
}

TEST(TupleTest, ElementWrappingNestsALoneTupleOnEveryCompiler) {
  Tuple inner{"n"};
  Tuple outer{Element(inner)};
  ASSERT_EQ(outer.size(), 1u);
  ASSERT_TRUE(outer[0].is_tuple());
  EXPECT_EQ(outer[0].as_tuple(), inner);
  EXPECT_EQ(outer.pack(), "\x05\x02n\x00\x00"s);
  Tuple copy = inner;  // copy-initialisation never nests
  EXPECT_EQ(copy, inner);
}

TEST(TupleTest, ElementsConcatenateInOrder) {
  Tuple t{"job", 42,
          Bytes{"\x00"
                "ab"s},
          nullptr, true};
  EXPECT_EQ(t.pack(),
            "\x02job\x00\x15\x2a\x01\x00\xff"
            "ab\x00\x00\x27"s);
  std::string out = "prefix";
  t.pack_to(out);
  EXPECT_EQ(out, "prefix" + t.pack());
}

TEST(TupleTest, AccessorsExposeElements) {
  Tuple t{"s", Bytes{"b"}, 7, false, nullptr, Tuple{1}};
  ASSERT_EQ(t.size(), 6u);
  EXPECT_FALSE(t.empty());
  EXPECT_EQ(t[0].as_string(), "s");
  EXPECT_EQ(t[1].as_bytes(), "b");
  EXPECT_EQ(t[2].as_int(), 7);
  EXPECT_FALSE(t[3].as_bool());
  EXPECT_TRUE(t[4].is_null());
  EXPECT_EQ(t[5].as_tuple(), Tuple{1});
  EXPECT_TRUE(Tuple().empty());
  Tuple u;
  u.append("s").append(Bytes{"b"});
  EXPECT_EQ(u, (Tuple{"s", Bytes{"b"}}));
}

TEST(TupleTest, StringsAndBytesAreDistinctElements) {
  EXPECT_NE(Tuple{"a"}, Tuple{Bytes{"a"}});
  EXPECT_LT(Tuple{Bytes{"z"}}, Tuple{"a"});
  EXPECT_EQ(must_unpack("\x01"
                        "a\x00"s)[0]
                .as_bytes(),
            "a");
  EXPECT_EQ(must_unpack("\x02"
                        "a\x00"s)[0]
                .as_string(),
            "a");
}

// ---------------------------------------------------------------------------------------------
// Ordering

TEST(TupleTest, KindsOrderNullBytesStringTupleIntFalseTrue) {
  const std::vector<Tuple> ascending = {
      Tuple{nullptr}, Tuple{Bytes{"\xff\xff"s}},
      Tuple{""},      Tuple{"\xff"s},
      wrap(Tuple()),  wrap(Tuple{true}),
      Tuple{kMin},    Tuple{0},
      Tuple{kMax},    Tuple{false},
      Tuple{true},
  };
  for (size_t i = 0; i + 1 < ascending.size(); ++i) {
    SCOPED_TRACE(ascending[i].debug_string() + " < " + ascending[i + 1].debug_string());
    EXPECT_LT(ascending[i], ascending[i + 1]);
    EXPECT_LT(key_order(ascending[i].pack(), ascending[i + 1].pack()), 0);
  }
}

TEST(TupleTest, IntegersOrderNumericallyAcrossLengthBoundaries) {
  std::vector<int64_t> values = {kMin, kMin + 1, kMax, kMax - 1, 0};
  for (int k = 0; k < 63; ++k) {
    int64_t p = int64_t{1} << k;
    for (int64_t v : {p - 1, p, p + 1}) {
      values.push_back(v);
      values.push_back(-v);
    }
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    SCOPED_TRACE(std::to_string(values[i]) + " vs " + std::to_string(values[i + 1]));
    EXPECT_LT(Tuple{values[i]}, Tuple{values[i + 1]});
    EXPECT_LT(key_order(Tuple{values[i]}.pack(), Tuple{values[i + 1]}.pack()), 0);
    EXPECT_EQ(must_unpack(Tuple{values[i]}.pack())[0].as_int(), values[i]);
  }
}

TEST(TupleTest, StringsCompareAsUnsignedBytes) {
  // std::string's ordering goes through char_traits<char>, which compares as unsigned char even
  // where char is signed; the tuple order depends on that.
  EXPECT_LT(std::string("\x7f"), std::string("\x80"));
  EXPECT_LT(Tuple{"\x7f"}, Tuple{"\x80"});
  EXPECT_LT(Tuple{Bytes{"\x01"}}, Tuple{Bytes{"\xff"}});
  EXPECT_LT(Tuple{"a"}, Tuple{"a\0"s});
  EXPECT_LT(Tuple{"a\0"s}, Tuple{"a\x01"});
  EXPECT_LT(key_order(Tuple{"a\0"s}.pack(), Tuple{"a\x01"}.pack()), 0);
}

TEST(TupleTest, PrefixTupleSortsFirst) {
  EXPECT_LT(Tuple(), Tuple{nullptr});
  EXPECT_LT(Tuple{"a"}, (Tuple{"a", nullptr}));
  EXPECT_LT((Tuple{"a", true}), Tuple{"a\0"s});
  EXPECT_LT(wrap(Tuple()), wrap(Tuple{nullptr}));
  EXPECT_LT(wrap(Tuple{nullptr}), wrap(Tuple{Bytes{""}}));
  EXPECT_LT(key_order(wrap(Tuple()).pack(), wrap(Tuple{nullptr}).pack()), 0);
  EXPECT_LT(key_order(wrap(Tuple{nullptr}).pack(), wrap(Tuple{Bytes{""}}).pack()), 0);
}

TEST(TupleTest, EqualityMatchesThreeWayComparison) {
  Tuple a{"x", 1, Tuple{nullptr, Bytes{"\0"s}}};
  Tuple b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a <=> b, std::strong_ordering::equal);
  b.append(false);
  EXPECT_NE(a, b);
  EXPECT_EQ(Element(1), Element(int64_t{1}));
  EXPECT_NE(Element(1), Element(true));
  EXPECT_NE(Element(0), Element(false));
  EXPECT_EQ(Element(), Element(nullptr));
}

// ---------------------------------------------------------------------------------------------
// Properties over random tuples

TEST(TupleTest, RandomTuplesRoundTrip) {
  for (const Tuple& t : random_tuples(1, 20000)) {
    std::string packed = t.pack();
    Result<Tuple> back = Tuple::unpack(packed);
    ASSERT_TRUE(back.ok()) << t.debug_string() << ": " << back.status().message();
    ASSERT_EQ(*back, t) << hex(packed);
    ASSERT_EQ(back->pack(), packed);
  }
}

TEST(TupleTest, PackedOrderMatchesTupleOrderForRandomPairs) {
  std::vector<Tuple> pool = random_tuples(2, 20000);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const Tuple& a = pool[rng() % pool.size()];
    // Half the time compare against a neighbour-ish tuple: an extension or a tweak of `a`, so
    // comparisons run deep rather than ending at the first element.
    Tuple b = pool[rng() % pool.size()];
    if (rng() % 2) {
      std::vector<Element> e = a.elements();
      size_t keep = e.empty() ? 0 : rng() % (e.size() + 1);
      e.resize(keep);
      for (const Element& x : b.elements()) e.push_back(x);
      b = Tuple(std::move(e));
    }
    int by_tuple = sign(a <=> b);
    int by_key = key_order(a.pack(), b.pack());
    ASSERT_EQ(by_tuple, by_key) << a.debug_string() << " vs " << b.debug_string();
    ASSERT_EQ(a == b, by_tuple == 0);
    ASSERT_EQ(sign(b <=> a), -by_tuple);
  }
}

TEST(TupleTest, SortingTuplesSortsTheirPackings) {
  std::vector<Tuple> tuples = random_tuples(4, 20000);
  std::sort(tuples.begin(), tuples.end());
  size_t equal_neighbours = 0;
  for (size_t i = 0; i + 1 < tuples.size(); ++i) {
    std::string a = tuples[i].pack(), b = tuples[i + 1].pack();
    if (tuples[i] == tuples[i + 1]) {
      ASSERT_EQ(a, b);
      ++equal_neighbours;
    } else {
      ASSERT_LT(key_order(a, b), 0)
          << tuples[i].debug_string() << " vs " << tuples[i + 1].debug_string();
    }
  }
  // The generator is meant to produce duplicates; make sure the equal branch was exercised.
  EXPECT_GT(equal_neighbours, 0u);
}

// ---------------------------------------------------------------------------------------------
// Malformed input

TEST(TupleTest, UnpackRejectsTruncatedInput) {
  for (std::string_view bad : {"\x02"sv,
                               "\x02"
                               "abc"sv,
                               "\x01\x00\xff"sv,
                               "\x02"
                               "a\x00\xff"sv,
                               "\x05"sv, "\x05\x00\xff"sv,
                               "\x05\x02"
                               "a\x00"sv,
                               "\x15"sv, "\x16\x01"sv, "\x1c\x7f\xff\xff\xff\xff\xff\xff"sv,
                               "\x13"sv, "\x0c\x80\x00\x00\x00"sv}) {
    expect_rejected(bad);
  }
}

TEST(TupleTest, UnpackRejectsUnknownTypeCodes) {
  for (int code = 0; code < 256; ++code) {
    bool known = code == 0x00 || code == 0x01 || code == 0x02 || code == 0x05 ||
                 (code >= 0x0c && code <= 0x1c) || code == 0x26 || code == 0x27;
    if (known) continue;
    SCOPED_TRACE(code);
    expect_rejected(std::string(1, static_cast<char>(code)));
    // ...also after a valid element, i.e. as trailing garbage.
    expect_rejected("\x15\x01"s + static_cast<char>(code));
  }
}

TEST(TupleTest, UnpackRejectsNonMinimalIntegers) {
  expect_rejected("\x15\x00"s);
  expect_rejected("\x16\x00\xff"s);
  expect_rejected("\x1c\x00\x7f\xff\xff\xff\xff\xff\xff"s);
  expect_rejected("\x13\xff"s);      // would be -0
  expect_rejected("\x12\xff\x00"s);  // -255 in two bytes
  expect_rejected("\x0c\xff\x00\x00\x00\x00\x00\x00\x00"s);
}

TEST(TupleTest, UnpackRejectsIntegersOutsideInt64) {
  expect_rejected("\x1c\x80\x00\x00\x00\x00\x00\x00\x00"s);  // 2^63
  expect_rejected("\x1c\xff\xff\xff\xff\xff\xff\xff\xff"s);  // 2^64 - 1
  expect_rejected("\x0c\x7f\xff\xff\xff\xff\xff\xff\xfe"s);  // -(2^63 + 1)
  expect_rejected("\x0c\x00\x00\x00\x00\x00\x00\x00\x00"s);  // -(2^64 - 1)
  // FoundationDB's arbitrary-precision codes are not supported.
  expect_rejected("\x1d\x09\x01\x00\x00\x00\x00\x00\x00\x00\x00"s);
  expect_rejected("\x0b\xf6\xfe\xff\xff\xff\xff\xff\xff\xff\xff"s);
}

TEST(TupleTest, NestingUpToTheLimitRoundTripsAndDeeperIsRejected) {
  Tuple deepest = nest(kMaxTupleNesting);
  EXPECT_EQ(must_unpack(deepest.pack()), deepest);
  expect_rejected(nest(kMaxTupleNesting + 1).pack());
  // Hostile input: far more openers than the stack could recurse through.
  expect_rejected(std::string(1'000'000, '\x05'));
  expect_rejected(std::string(100'000, '\x05') + std::string(100'000, '\x00'));
}

TEST(TupleTest, AllShortByteStringsAreRejectedOrCanonical) {
  expect_rejected_or_canonical("");
  for (int a = 0; a < 256; ++a) {
    expect_rejected_or_canonical(std::string(1, static_cast<char>(a)));
    for (int b = 0; b < 256; ++b) {
      expect_rejected_or_canonical(std::string{static_cast<char>(a), static_cast<char>(b)});
    }
  }
}

TEST(TupleTest, RandomByteStringsAreRejectedOrCanonical) {
  // Mostly bytes that mean something to the decoder, so inputs get past the first byte.
  static const unsigned char kAlphabet[] = {0x00, 0x00, 0x01, 0x02, 0x05, 0x05, 0x0c,
                                            0x13, 0x14, 0x15, 0x16, 0x1c, 0x26, 0x27,
                                            0xff, 0xff, 0x80, 0x7f, 'a',  0x1d};
  std::mt19937_64 rng(5);
  std::string s;
  for (int i = 0; i < 300000; ++i) {
    s.clear();
    size_t n = rng() % 24;
    for (size_t j = 0; j < n; ++j) {
      uint64_t r = rng();
      s += static_cast<char>(r % 8 == 0 ? (r >> 8) & 0xFF : kAlphabet[(r >> 8) % sizeof kAlphabet]);
    }
    expect_rejected_or_canonical(s);
  }
}

TEST(TupleTest, MutatedEncodingsAreRejectedOrCanonical) {
  std::vector<Tuple> tuples = random_tuples(6, 5000);
  std::mt19937_64 rng(7);
  for (const Tuple& t : tuples) {
    const std::string packed = t.pack();
    for (size_t cut = 0; cut < packed.size(); ++cut) {
      expect_rejected_or_canonical(std::string_view(packed).substr(0, cut));
    }
    if (packed.empty()) continue;
    for (int m = 0; m < 20; ++m) {
      std::string s = packed;
      size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[at] = static_cast<char>(rng()); break;
        case 1: s.erase(at, 1); break;
        case 2: s.insert(at, 1, static_cast<char>(rng() % 2 ? 0x00 : 0xff)); break;
        default: s[at] = static_cast<char>(s[at] ^ (1 << (rng() % 8))); break;
      }
      expect_rejected_or_canonical(s);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Debug strings

TEST(TupleTest, DebugStringIsReadable) {
  Tuple t{"job",
          42,
          Bytes{"\x00"
                "ab"s},
          nullptr,
          true,
          Tuple{"n"}};
  EXPECT_EQ(t.debug_string(), R"(("job", 42, b"\x00ab", null, true, ("n")))");
  EXPECT_EQ(Tuple().debug_string(), "()");
  EXPECT_EQ((Tuple{false, -7, kMin}.debug_string()), "(false, -7, -9223372036854775808)");
  EXPECT_EQ(Tuple{"q\"\\\n\xff"}.debug_string(), R"(("q\"\\\x0a\xff"))");
}

// ---------------------------------------------------------------------------------------------
// Subspace and strinc

TEST(SubspaceTest, PacksAndUnpacksUnderItsPrefix) {
  Subspace jobs(Tuple{"jobs"});
  EXPECT_EQ(jobs.prefix(), "\x02jobs\x00"s);
  std::string key = jobs.pack(Tuple{"email", 7});
  EXPECT_EQ(key,
            "\x02jobs\x00\x02"
            "email\x00\x15\x07"s);
  EXPECT_TRUE(jobs.contains(key));
  Result<Tuple> back = jobs.unpack(key);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, (Tuple{"email", 7}));
  EXPECT_EQ(must_unpack(key), (Tuple{"jobs", "email", 7}));
}

TEST(SubspaceTest, RawPrefixAndChildSubspacesCompose) {
  Subspace root("\xfe"s);
  EXPECT_EQ(root.pack(Tuple{1}), "\xfe\x15\x01"s);
  Subspace with_raw(Tuple{"x"}, "\xfe"s);
  EXPECT_EQ(with_raw.prefix(), "\xfe\x02x\x00"s);
  EXPECT_EQ(root.sub(Tuple{"x"}).prefix(), with_raw.prefix());
  EXPECT_EQ(with_raw.sub(Tuple{"a"}).pack(Tuple{1}), with_raw.pack(Tuple{"a", 1}));
  EXPECT_EQ(Subspace().pack(Tuple{1}), Tuple{1}.pack());
}

TEST(SubspaceTest, UnpackRejectsKeysOutsideOrMalformed) {
  Subspace s(Tuple{"a"});
  for (std::string_view bad : {""sv, "\x02"sv,
                               "\x02"
                               "b\x00\x15\x01"sv,
                               "\x02"
                               "a"sv}) {
    Result<Tuple> r = s.unpack(bad);
    EXPECT_FALSE(s.contains(bad));
    ASSERT_FALSE(r.ok()) << hex(bad);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  }
  Result<Tuple> garbage = s.unpack(
      "\x02"
      "a\x00\x03"s);
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), Code::kInvalidArgument);
  Result<Tuple> bare = s.unpack(s.prefix());
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->empty());
}

TEST(SubspaceTest, RangeHoldsExactlyTheKeysOfNonEmptyChildTuples) {
  Subspace s(Tuple{"q", 3});
  // Named copies, not structured bindings: clang 14 cannot capture bindings in lambdas.
  const std::string begin = s.range().first, end = s.range().second;
  EXPECT_EQ(begin, s.prefix() + '\x00');
  EXPECT_EQ(end, s.prefix() + '\xff');
  auto in_range = [&](std::string_view k) { return begin <= k && k < end; };
  Subspace parent(Tuple{"q"});
  for (const Tuple& t : random_tuples(8, 2000)) {
    if (t.empty()) continue;
    EXPECT_TRUE(in_range(s.pack(t))) << t.debug_string();
    EXPECT_FALSE(in_range(Subspace(Tuple{"q", 4}).pack(t)));
    EXPECT_FALSE(in_range(Subspace(Tuple{"q\0"s, 3}).pack(t)));
    // A parent-subspace key lands in range exactly when it is (3, more...), i.e. a child key.
    EXPECT_EQ(in_range(parent.pack(t)), t[0] == Element(3) && t.size() > 1) << t.debug_string();
  }
  EXPECT_FALSE(in_range(s.prefix()));
}

TEST(SubspaceTest, RangeOfTupleHoldsItsExtensions) {
  Subspace s(Tuple{"jobs"});
  Tuple t{"email", 7};
  const std::string begin = s.range(t).first, end = s.range(t).second;
  EXPECT_EQ(begin, s.pack(t) + '\x00');
  EXPECT_EQ(end, s.pack(t) + '\xff');
  auto in_range = [&](const Tuple& x) {
    std::string k = s.pack(x);
    return begin <= k && k < end;
  };
  EXPECT_TRUE(in_range(Tuple{"email", 7, nullptr}));
  EXPECT_TRUE(in_range(Tuple{"email", 7, true}));
  EXPECT_TRUE(in_range(Tuple{"email", 7, Tuple{kMax}, "z"}));
  EXPECT_FALSE(in_range(t));
  EXPECT_FALSE(in_range(Tuple{"email", 8}));
  EXPECT_FALSE(in_range(Tuple{"email", 6, true}));
  EXPECT_FALSE(in_range(Tuple{"email", 256}));
}

TEST(StrincTest, IncrementsTheLastByteThatCanBe) {
  EXPECT_EQ(strinc("a"), "b");
  EXPECT_EQ(strinc("a\xff"s), "b");
  EXPECT_EQ(strinc("ab\xfe"s), "ab\xff"s);
  EXPECT_EQ(strinc("\x00"s), "\x01"s);
  EXPECT_EQ(strinc("a\x7f\xff\xff"s), "a\x80"s);
}

TEST(StrincTest, AllFfOrEmptyHasNoSuccessor) {
  EXPECT_EQ(strinc("\xff\xff"s), "");
  EXPECT_EQ(strinc("\xff"s), "");
  EXPECT_EQ(strinc(""), "");
}

TEST(StrincTest, ResultBoundsEveryKeyWithThePrefix) {
  TupleGen gen(9);
  for (int i = 0; i < 5000; ++i) {
    std::string prefix = gen.blob();
    std::string end = strinc(prefix);
    if (end.empty()) continue;
    std::string key = prefix + gen.blob() + std::string(gen.below(3), '\xff');
    EXPECT_LT(key_order(key, end), 0) << hex(key) << " vs " << hex(end);
    EXPECT_LT(key_order(prefix, end), 0);
    EXPECT_FALSE(end.starts_with(prefix));
  }
}

}  // namespace
}  // namespace kvq
