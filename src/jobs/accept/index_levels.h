// jobs/accept/index_levels.h — reading an OrderedIndex (schema.h) one priority level at a time: for
// an accept, the due entries of the best level that has any; for the counts, how many entries a
// level holds before or after a time. An index sorts by (priority, time), so within one level
// the entries due by a time are a prefix of it and the rest follow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "jobs/accept/local_accepts.h"
#include "jobs/schema.h"
#include "kvq/kv.h"

namespace kvq::jobs {

// How far past the last head found the first read of the pending index reaches (its times are
// milliseconds; DueLevels below): at a queue's usual rates a few hundred entries at most.
constexpr int64_t kPendingHeadWindow = 250;

// The due entries of an index for one accept, best level first. Snapshot reads: only what the
// accept finally takes adds conflicts. Entries it takes leave the transaction's view, so when
// those read run out, reading the level again from its start finds what is left of it.
//
// A read from the start of the index first asks only for a prefix of it: up to `head_window`
// (in the index's unit of time) past the head an earlier read of this Jobs found (`heads`) (the
// head moves forward as jobs are taken). Being a prefix, it answers with the very entries a read to
// the end would give first; only if it is empty is the rest read. On LMDB that costs nothing;
// etcd 3.4 collects every key of a range before applying a limit, so a read to the end of a
// queue with a backlog cost it time in proportion to the backlog.
class DueLevels {
 public:
  // Due: time <= max_time. Levels above `max_priority` are never looked at. `batch` entries
  // are read at a time, and at most `max_reads` reads are made (beyond, nothing is due).
  // `heads`: where the heads found are kept (null: none kept, every read goes to the end).
  DueLevels(kv::Transaction& txn, OrderedIndex index, int64_t max_time,
            std::optional<int64_t> max_priority, size_t batch, int max_reads, int64_t head_window,
            IndexHeads* heads);

  // The first due entry of the best level that has one (nullptr: none), reading as needed.
  Result<const OrderedIndex::Entry*> head();
  // Removes and returns a due entry of head()'s level: the first, or one at random among those
  // read. REQUIRES: head() returned an entry since the last take().
  Result<OrderedIndex::Entry> take(bool at_random);
  // take() of the first entry, or of one at random, for which `claim` returns true (it is
  // asked of the entries read in order, or in order from a random one); nullopt, taking none,
  // when it refuses them all.
  Result<std::optional<OrderedIndex::Entry>> take(
      bool at_random, const std::function<bool(const std::string&)>& claim);
  // The get_range the next read of head() starts with (for kv::Transaction::prefetch).
  kv::RangeRead next_read();
  // The names of the first `n` due entries of head()'s level read so far, in order: what the
  // next n take(false) calls return while the level lasts (no read).
  Result<std::vector<std::string>> first_names(size_t n);
  // Entries due by a later time count from now on (a bound that follows the clock).
  void extend_due(int64_t max_time) { max_time_ = std::max(max_time_, max_time); }
  // The earliest time of an entry seen not yet due, on a level better than any due one.
  std::optional<int64_t> earliest_not_due() const { return earliest_not_due_; }

 private:
  // A due entry read: its key, parsed when first asked for. A look reads up to a spread's worth
  // of entries (64) and mostly takes the first one or few: parsing every entry read was 6% of
  // an in-process job's instructions at 16 workers.
  struct Due {
    std::string key;
    std::optional<OrderedIndex::Entry> entry;
  };
  // due_[i], parsed. kInvalidArgument for a key of another shape.
  Result<OrderedIndex::Entry*> entry_at(size_t i);
  // Removes and returns due_[i].
  Result<OrderedIndex::Entry> take_at(size_t i);
  // get_range(from_, the index's end) of at most batch_ entries, a prefix first where a head
  // is known.
  Result<std::vector<kv::KeyValue>> read_from();
  // The first get_range of read_from: from_ to the end, or the prefix up to a window past the
  // last head found here.
  kv::RangeRead plan_read() const;

  kv::Transaction& txn_;
  OrderedIndex index_;
  int64_t max_time_;
  std::optional<int64_t> max_priority_;
  size_t batch_;
  int reads_left_;
  int64_t head_window_;
  IndexHeads* heads_;
  const std::pair<std::string, std::string> all_;  // the index's whole range
  std::string from_;                               // where the level being read starts
  std::optional<kv::RangeRead> planned_;           // next_read()'s, for read_from to make
  std::vector<Due> due_;                           // its due entries read and not taken, in order
  bool done_ = false;
  std::optional<int64_t> earliest_not_due_;
};

// How many keys `range` holds, counting at most `limit` (snapshot reads, a page at a time).
Result<uint64_t> count_keys(kv::Transaction& txn, std::pair<std::string, std::string> range,
                            uint64_t limit);

// Calls `level` with each priority that has entries in `index`, best first, while it returns
// true (snapshot reads).
Status for_each_priority(kv::Transaction& txn, const OrderedIndex& index,
                         const std::function<Result<bool>(int64_t)>& level);

// Entries of `index` with time at most `max_time` (due: true) or after it (due: false),
// counting at most `limit`.
Result<uint64_t> count_by_time(kv::Transaction& txn, const OrderedIndex& index, int64_t max_time,
                               bool due, uint64_t limit);

}  // namespace kvq::jobs
