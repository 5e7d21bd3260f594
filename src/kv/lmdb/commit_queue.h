// kv/lmdb/commit_queue.h — group commit for one LMDB environment in this process.
//
// Transactions that commit at the same time form a group: the first in line (the leader) opens
// one LMDB write transaction, validates and applies each member in arrival order, commits once
// (one fsync in sync mode) and wakes the others — LevelDB's writer queue. There is no committer
// thread, so a lone writer pays no hand-off. An asynchronous commit (commit_async) joins the
// queue the same way but never blocks its thread. Without fsync, its thread leads when it is
// first in line, and a leader that finds an asynchronous commit next leads that group too
// (nobody else waits to). With fsync, where an LMDB commit syncs its data pages, a committer
// thread (started on first use) leads instead, and leaves the wait for the meta page to the
// durability tracker, which settles the group from its syncer thread while the next commits.
// Without fsync, on an event loop's thread (kv::LoopBatching), an asynchronous commit first in
// line leads only at the loop's next turn, so that the commits of the handlers ready now join
// its group; a blocking commit that finds such a lead waiting takes it over. Each
// member is judged on its own: one that conflicts gets kAborted and the rest still commit; if
// applying one fails for lack of room in the transaction, the group is retried one member at a
// time.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "kv/lmdb/lmdb_env.h"
#include "kv/overlay.h"
#include "util/mutex.h"

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
  ~CommitQueue() { stop(); }
  // Ends the committer thread. REQUIRES: no commit in flight.
  void stop() KVQ_EXCLUDES(mu_);
  // Whether the calling thread is this queue's committer thread.
  bool on_own_thread() const KVQ_EXCLUDES(mu_);
  // Blocks until `request` is committed or rejected.
  CommitOutcome commit(const CommitRequest& request);
  // commit() without blocking: `done` gets the outcome, on this thread if it leads the group and
  // there is no fsync to wait for, else on the thread that settles the group (another
  // committer, or the durability tracker's syncer). `request` must stay alive until then.
  void commit_async(const CommitRequest& request, std::function<void(CommitOutcome)> done);

 private:
  // Shared by its committer and the leader, so the leader can wake it after letting go of the
  // queue's mutex: a woken committer then returns without contending for that mutex (waking
  // it under the mutex made it sleep a second time, a quarter of all context switches).
  struct Member {
    enum State : int { kWaiting, kDone, kLead };
    Member(const CommitRequest* r, std::function<void(CommitOutcome)> d)
        : request(r), done(std::move(d)) {}
    const CommitRequest* request;
    std::function<void(CommitOutcome)> done;  // set for an asynchronous commit
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
  // Why a group must be tried again: kAgain, as it is (the map grew); kOneByOne, one member at
  // a time (too big for one LMDB transaction).
  enum class Retry { kAgain, kOneByOne };

  // Queues `member`; true if it is first in line, and so leads (or, if `put_off`, will lead
  // when its loop runs lead_put_off). When it is not first and the front's lead was put off,
  // `take_put_off` (if given) takes that lead over.
  bool join(const std::shared_ptr<Member>& member, bool put_off,
            std::shared_ptr<Member>* take_put_off) KVQ_EXCLUDES(mu_);
  // Leads from `self`, unless a blocking commit has taken its lead over meanwhile.
  void lead_put_off(const std::shared_ptr<Member>& self) KVQ_EXCLUDES(mu_);
  // Commits groups from the front of the queue, starting with `self`'s (nullptr: the committer
  // thread), until the next in line has a thread of its own to lead.
  void lead(const std::shared_ptr<Member>& self) KVQ_EXCLUDES(mu_);
  // Makes the committer thread lead from the front of the queue.
  void hand_to_committer() KVQ_EXCLUDES(mu_);
  void run_committer() KVQ_EXCLUDES(mu_);
  // Tells a committed group's members their outcome once it is on disk: waiting for it here
  // when `may_block`, else through the durability tracker.
  void settle(Group group, GroupResult result, const Member* leader, bool may_block);
  void finish(const Group& group, const GroupResult& result, const Status& synced,
              const Member* leader);
  GroupResult apply_group(const Group& group);
  // Tries the whole group in one LMDB transaction. Returns the group's result when every member
  // has its outcome, else how the group must be retried.
  std::variant<GroupResult, Retry> try_group(const Group& group);
  Status validate(MDB_txn* txn, const CommitRequest& request);
  int apply(MDB_txn* txn, const CommitRequest& request, uint64_t version,
            std::vector<KeyChange>* changes);

  Env& env_;
  mutable util::Mutex mu_;
  std::deque<std::shared_ptr<Member>> queue_ KVQ_GUARDED_BY(mu_);
  std::thread committer_ KVQ_GUARDED_BY(mu_);
  util::CondVar committer_cv_;  // with mu_
  bool committer_wanted_ KVQ_GUARDED_BY(mu_) = false;
  bool stopping_ KVQ_GUARDED_BY(mu_) = false;
  // The member first in line whose lead waits for its loop's next turn (kv::LoopBatching).
  std::shared_ptr<Member> put_off_ KVQ_GUARDED_BY(mu_);
};

}  // namespace kvq::kv::lmdb
