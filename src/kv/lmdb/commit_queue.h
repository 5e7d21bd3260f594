// kv/lmdb/commit_queue.h — group commit for one LMDB environment in this process.
//
// Transactions that commit at the same time form a group: the first in line (the leader) opens
// one LMDB write transaction, validates and applies each member in arrival order, commits once
// (one fsync in sync mode) and wakes the others — LevelDB's writer queue. There is no committer
// thread, so a lone writer pays no hand-off. Each member is judged on its own: one that
// conflicts gets kAborted and the rest still commit; if applying one fails for lack of room in
// the transaction, the group is retried one member at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kv/lmdb/lmdb_env.h"
#include "kv/overlay.h"

namespace kvq::kv::lmdb {

// What a transaction saw of a key range: order-independent, so it can be rebuilt by a forward
// scan whatever direction the read went.
struct Fingerprint {
  uint64_t count = 0;
  uint64_t sum = 0;
  void add(std::string_view key, uint64_t version);
  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
};

struct PointRead {
  std::string key;
  bool present = false;
  uint64_t version = 0;
};

struct RangeRead {
  std::string begin;
  std::string end;
  Fingerprint seen;
};

struct CommitRequest {
  uint64_t read_version = 0;
  std::vector<PointRead> point_reads;
  std::vector<RangeRead> range_reads;
  WriteBuffer buffer;
};

struct CommitOutcome {
  Status status;
  uint64_t version = 0;
};

// A change a commit made, for watches.
struct KeyChange {
  std::string key;
  std::optional<std::string> value;
};

class CommitQueue {
 public:
  explicit CommitQueue(Env& env) : env_(env) {}
  // Blocks until `request` is committed or rejected.
  CommitOutcome commit(const CommitRequest& request);

 private:
  // Shared by its committer and the leader, so the leader can wake it after letting go of the
  // queue's mutex: a woken committer then returns without contending for that mutex (waking
  // it under the mutex made it sleep a second time, a quarter of all context switches).
  struct Member {
    enum State : int { kWaiting, kDone, kLead };
    explicit Member(const CommitRequest* r) : request(r) {}
    const CommitRequest* request;
    CommitOutcome outcome;
    std::atomic<int> state{kWaiting};
  };
  using Group = std::vector<std::shared_ptr<Member>>;
  struct GroupResult {
    std::vector<KeyChange> changes;
    bool changes_complete = false;  // false: no watch was armed when the group began
    uint64_t base_version = 0;
    uint64_t new_version = 0;
  };

  GroupResult apply_group(const Group& group);
  // Tries the whole group in one LMDB transaction. Returns true when every member has its
  // outcome; false when the group must be retried (map grown, or members to go one by one).
  bool try_group(const Group& group, GroupResult& result, bool& split);
  Status validate(MDB_txn* txn, const CommitRequest& request);
  int apply(MDB_txn* txn, const CommitRequest& request, uint64_t version,
            std::vector<KeyChange>* changes);

  Env& env_;
  std::mutex mu_;
  std::deque<std::shared_ptr<Member>> queue_;
};

}  // namespace kvq::kv::lmdb
