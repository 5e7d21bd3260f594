#include "jobs/accept/index_levels.h"

#include <algorithm>
#include <limits>

#include "util/random.h"

namespace kvq::jobs {

DueLevels::DueLevels(kv::Transaction& txn, OrderedIndex index, int64_t max_time,
                     std::optional<int64_t> max_priority, size_t batch, int max_reads,
                     int64_t head_window, IndexHeads* heads)
    : txn_(txn),
      index_(std::move(index)),
      max_time_(max_time),
      max_priority_(max_priority),
      batch_(batch),
      reads_left_(max_reads),
      head_window_(head_window),
      heads_(heads),
      all_(index_.all()),
      from_(all_.first) {}

Result<const OrderedIndex::Entry*> DueLevels::head() {
  while (due_.empty() && !done_) {
    if (reads_left_-- <= 0) {
      done_ = true;
      break;
    }
    // One read per level: its due entries are the first ones read, up to its due bound (on
    // etcd each read is a round trip).
    const bool from_start = from_ == all_.first;
    KVQ_ASSIGN_OR_RETURN(auto read, read_from());
    if (read.empty()) {
      done_ = true;
      break;
    }
    KVQ_ASSIGN_OR_RETURN(auto first, index_.parse(read[0].key));
    if (from_start && heads_) heads_->set(all_.first, first.priority, first.time);
    if (max_priority_ && first.priority > *max_priority_) {
      done_ = true;
      break;
    }
    from_ = index_.from_priority(first.priority);
    const std::string due_end = index_.due(first.priority, max_time_).second;
    for (auto& kv : read) {
      if (kv.key >= due_end) break;
      due_.push_back({std::move(kv.key), std::nullopt});
    }
    if (!due_.empty()) {
      due_.front().entry = std::move(first);
      break;
    }
    if (!earliest_not_due_ || first.time < *earliest_not_due_) earliest_not_due_ = first.time;
    if (first.priority == std::numeric_limits<int64_t>::max()) {
      done_ = true;
      break;
    }
    from_ = index_.from_priority(first.priority + 1);
  }
  if (due_.empty()) return nullptr;
  KVQ_ASSIGN_OR_RETURN(const OrderedIndex::Entry* front, entry_at(0));
  return front;
}

Result<OrderedIndex::Entry*> DueLevels::entry_at(size_t i) {
  Due& due = due_[i];
  if (!due.entry) {
    KVQ_ASSIGN_OR_RETURN(auto entry, index_.parse(due.key));
    due.entry = std::move(entry);
  }
  return &*due.entry;
}

kv::RangeRead DueLevels::next_read() {
  if (!planned_) planned_ = plan_read();
  return *planned_;
}

kv::RangeRead DueLevels::plan_read() const {
  const std::string& end = all_.second;
  const kv::RangeOptions options{.limit = batch_, .snapshot = true};
  std::string prefix_end;
  if (from_ == all_.first && heads_) {
    if (auto head = heads_->get(from_)) {
      const int64_t time = head->second > std::numeric_limits<int64_t>::max() - head_window_
                               ? std::numeric_limits<int64_t>::max()
                               : head->second + head_window_;
      prefix_end = index_.due(head->first, time).second;
    }
  }
  if (prefix_end.empty() || prefix_end <= from_ || prefix_end >= end) return {from_, end, options};
  return {from_, std::move(prefix_end), options};
}

Result<std::vector<kv::KeyValue>> DueLevels::read_from() {
  const kv::RangeRead first = planned_ ? std::move(*planned_) : plan_read();
  planned_.reset();
  KVQ_ASSIGN_OR_RETURN(auto read, txn_.get_range(first.begin, first.end, first.options));
  if (!read.empty() || first.end == all_.second) return read;
  // Nothing before the prefix's end (at this transaction's version): the rest begins after it.
  return txn_.get_range(first.end, all_.second, first.options);
}

Result<OrderedIndex::Entry> DueLevels::take(bool at_random) {
  return take_at(at_random ? util::random_below(due_.size()) : 0);
}

Result<std::optional<OrderedIndex::Entry>> DueLevels::take(
    bool at_random, const std::function<bool(const std::string&)>& claim) {
  const size_t n = due_.size();
  const size_t start = at_random ? util::random_below(n) : 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (start + k) % n;
    KVQ_ASSIGN_OR_RETURN(const OrderedIndex::Entry* entry, entry_at(i));
    if (!claim(entry->name)) continue;
    KVQ_ASSIGN_OR_RETURN(auto taken, take_at(i));
    return std::optional<OrderedIndex::Entry>(std::move(taken));
  }
  return std::optional<OrderedIndex::Entry>();
}

Result<OrderedIndex::Entry> DueLevels::take_at(size_t i) {
  KVQ_ASSIGN_OR_RETURN(OrderedIndex::Entry * parsed, entry_at(i));
  OrderedIndex::Entry entry = std::move(*parsed);
  due_.erase(due_.begin() + static_cast<std::ptrdiff_t>(i));
  return entry;
}

Result<std::vector<std::string>> DueLevels::first_names(size_t n) {
  std::vector<std::string> names;
  for (size_t i = 0; i < std::min(n, due_.size()); ++i) {
    KVQ_ASSIGN_OR_RETURN(const OrderedIndex::Entry* entry, entry_at(i));
    names.push_back(entry->name);
  }
  return names;
}

Result<uint64_t> count_keys(kv::Transaction& txn, std::pair<std::string, std::string> range,
                            uint64_t limit) {
  constexpr size_t kPage = 1000;
  uint64_t n = 0;
  while (n < limit) {
    const size_t want = std::min<uint64_t>(kPage, limit - n);
    KVQ_ASSIGN_OR_RETURN(
        auto page, txn.get_range(range.first, range.second, {.limit = want, .snapshot = true}));
    n += page.size();
    if (page.size() < want) break;
    range.first = page.back().key + '\0';
  }
  return n;
}

Status for_each_priority(kv::Transaction& txn, const OrderedIndex& index,
                         const std::function<Result<bool>(int64_t)>& level) {
  const auto end = index.all().second;
  std::string from = index.all().first;
  for (;;) {
    KVQ_ASSIGN_OR_RETURN(auto first, txn.get_range(from, end, {.limit = 1, .snapshot = true}));
    if (first.empty()) return Status::OK();
    KVQ_ASSIGN_OR_RETURN(auto entry, index.parse(first[0].key));
    KVQ_ASSIGN_OR_RETURN(bool more, level(entry.priority));
    if (!more || entry.priority == std::numeric_limits<int64_t>::max()) return Status::OK();
    from = index.from_priority(entry.priority + 1);
  }
}

Result<uint64_t> count_by_time(kv::Transaction& txn, const OrderedIndex& index, int64_t max_time,
                               bool due, uint64_t limit) {
  uint64_t count = 0;
  if (limit == 0) return count;
  KVQ_RETURN_IF_ERROR(for_each_priority(txn, index, [&](int64_t priority) -> Result<bool> {
    const auto level = index.due(priority, std::numeric_limits<int64_t>::max());
    const auto due_part = index.due(priority, max_time);
    const auto range = due ? due_part : std::pair{due_part.second, level.second};
    KVQ_ASSIGN_OR_RETURN(uint64_t n, count_keys(txn, range, limit - count));
    count += n;
    return count < limit;
  }));
  return count;
}

}  // namespace kvq::jobs
