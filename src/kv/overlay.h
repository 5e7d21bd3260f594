// kv/overlay.h — a transaction's buffered writes, and reading through them: what every
// backend needs for read-your-writes, written once.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/kv.h"

namespace kvq::kv {

// Buffered writes. `cleared` ranges apply first, then `writes` (nullopt = clear): a set made
// after a clear_range removed the older entries it covered, so this order replays the
// transaction faithfully.
struct WriteBuffer {
  std::map<std::string, std::optional<std::string>, std::less<>> writes;
  std::vector<std::pair<std::string, std::string>> cleared;

  bool empty() const { return writes.empty() && cleared.empty(); }
  void set(std::string_view key, std::string_view value);
  void clear(std::string_view key);
  void clear_range(std::string_view begin, std::string_view end);
  bool in_cleared_range(std::string_view key) const;
  // What this buffer says about `key`: a value, a deletion (nullopt inside), or nothing
  // (nullopt outside: read the store).
  std::optional<std::optional<std::string>> lookup(std::string_view key) const;
};

// The stored keys of a range, in the direction of the read, as a backend's snapshot sees them.
class RangeSource {
 public:
  virtual ~RangeSource() = default;
  virtual bool valid() const = 0;
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  virtual Status next() = 0;
};

struct MergedRange {
  std::vector<KeyValue> rows;
  // The part of [begin, end) the read covered (all of it unless the limit cut it short):
  // a non-snapshot read conflicts with changes inside it only.
  std::string covered_begin, covered_end;
};

// Merges `stored` with `buffer` over [begin, end) in the direction and limit of `options`.
// `consumed` is called for every stored key the merge passed (inside the covered part), so a
// backend can record what the read depended on.
Result<MergedRange> merge_range(RangeSource& stored, const WriteBuffer& buffer,
                                std::string_view begin, std::string_view end,
                                const RangeOptions& options, const std::function<void()>& consumed);

}  // namespace kvq::kv
