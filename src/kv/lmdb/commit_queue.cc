#include "kv/lmdb/commit_queue.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <functional>
#include <thread>

#include "kv/lmdb/durability.h"
#include "kv/lmdb/watch_registry.h"

namespace kvq::kv::lmdb {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: spreads every input bit.
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

Result<Fingerprint> fingerprint_range(MDB_txn* txn, MDB_dbi dbi, std::string_view begin,
                                      std::string_view end) {
  MDB_cursor* cursor = nullptr;
  if (int rc = mdb_cursor_open(txn, dbi, &cursor); rc)
    return status_from_lmdb(rc, "mdb_cursor_open");
  Fingerprint fp;
  MDB_val key = as_val(begin), value;
  int rc = mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE);
  while (rc == MDB_SUCCESS && as_view(key) < end) {
    auto stored = decode_stored(value);
    if (!stored.ok()) {
      mdb_cursor_close(cursor);
      return stored.status();
    }
    fp.add(as_view(key), stored->first);
    rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT);
  }
  mdb_cursor_close(cursor);
  if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) return status_from_lmdb(rc, "scanning a read range");
  return fp;
}

// Deletes [begin, end), recording each deleted key when `changes` is given.
int clear_range(MDB_txn* txn, MDB_dbi dbi, std::string_view begin, std::string_view end,
                std::vector<KeyChange>* changes) {
  MDB_cursor* cursor = nullptr;
  if (int rc = mdb_cursor_open(txn, dbi, &cursor); rc) return rc;
  MDB_val key = as_val(begin), value;
  int rc = mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE);
  std::string deleted;
  while (rc == MDB_SUCCESS && as_view(key) < end) {
    deleted.assign(as_view(key));
    if (changes) changes->push_back({deleted, std::nullopt});
    if (rc = mdb_cursor_del(cursor, 0); rc) break;
    // Re-seek rather than rely on where a delete leaves the cursor.
    key = as_val(deleted);
    rc = mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE);
  }
  mdb_cursor_close(cursor);
  return rc == MDB_NOTFOUND ? MDB_SUCCESS : rc;
}

// How a member waits for its turn or its outcome, and how it is woken. Without fsync the leader
// is done within microseconds, and std::atomic::wait's brief spin saves a sleep. With fsync a
// wait lasts a disk flush, and that spin yields the CPU a dozen times to threads with nothing to
// do (a third of kvq serve's context switches): members sleep on the futex at once. Waker and
// waiter must agree, since notify_one skips the wake when libstdc++ counts no waiter.
void wait_while(std::atomic<int>& state, int value, bool sleep_at_once) {
  if (!sleep_at_once) return state.wait(value, std::memory_order_acquire);
  static_assert(sizeof(std::atomic<int>) == sizeof(int));
  syscall(SYS_futex, reinterpret_cast<int*>(&state), FUTEX_WAIT_PRIVATE, value, nullptr, nullptr,
          0);
}

void wake(std::atomic<int>& state, bool sleep_at_once) {
  if (!sleep_at_once) return state.notify_one();
  syscall(SYS_futex, reinterpret_cast<int*>(&state), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// Set while this thread runs an asynchronous commit's callback: the thread may be holding the
// queue's leadership, or be the syncer that settles groups, so a blocking commit from there
// could wait for itself.
thread_local int running_callbacks = 0;

}  // namespace

void Fingerprint::add(std::string_view key, uint64_t version) {
  ++count;
  sum += mix(std::hash<std::string_view>{}(key) ^ mix(version));
}

CommitOutcome CommitQueue::commit(const CommitRequest& request) {
  if (running_callbacks > 0) {
    return {FailedPrecondition(
                "a blocking commit inside an asynchronous commit's callback could wait for itself; "
                "commit asynchronously there, or hand the work to another thread"),
            0};
  }
  auto self = std::make_shared<Member>(&request, nullptr);
  const bool sleep_at_once = env_.durability() != nullptr;
  std::shared_ptr<Member> put_off;
  bool leads = join(self, /*put_off=*/false, &put_off);
  // A group whose lead was put off to a loop's next turn goes with this one, from here.
  if (put_off) lead(put_off);
  if (!leads) {
    int state;
    while ((state = self->state.load(std::memory_order_acquire)) == Member::kWaiting) {
      wait_while(self->state, Member::kWaiting, sleep_at_once);
    }
    leads = state == Member::kLead;
  }
  if (leads) {
    lead(self);
    // Settled by now unless this thread went on to lead asynchronous commits and left its own
    // group to the durability tracker.
    int state;
    while ((state = self->state.load(std::memory_order_acquire)) != Member::kDone) {
      wait_while(self->state, state, sleep_at_once);
    }
  }
  return self->outcome;
}

void CommitQueue::commit_async(const CommitRequest& request,
                               std::function<void(CommitOutcome)> done) {
  auto self = std::make_shared<Member>(&request, std::move(done));
  // On an event loop's thread (kv::LoopBatching), a commit that would go alone waits for the
  // loop's ready handlers, so that the commits they make go in its group.
  const bool put_off = !env_.durability() && LoopBatching::on_this_thread();
  if (!join(self, put_off, nullptr)) return;
  // With fsync an LMDB commit syncs its data pages, so the caller's thread must not lead.
  if (env_.durability()) return hand_to_committer();
  if (put_off) return LoopBatching::defer([this, self] { lead_put_off(self); });
  lead(self);
}

bool CommitQueue::join(const std::shared_ptr<Member>& member, bool put_off,
                       std::shared_ptr<Member>* take_put_off) {
  util::MutexLock lock(mu_);
  queue_.push_back(member);
  if (queue_.size() > 1) {
    if (take_put_off && put_off_) *take_put_off = std::exchange(put_off_, nullptr);
    return false;
  }
  member->state.store(Member::kLead, std::memory_order_relaxed);
  if (put_off) put_off_ = member;
  return true;
}

void CommitQueue::lead_put_off(const std::shared_ptr<Member>& self) {
  {
    util::MutexLock lock(mu_);
    if (put_off_ != self) return;  // a blocking commit has led its group
    put_off_ = nullptr;
  }
  lead(self);
}

void CommitQueue::lead(const std::shared_ptr<Member>& self) {
  const bool sleep_at_once = env_.durability() != nullptr;
  for (;;) {
    // Take everyone waiting (up to the group limit) and commit them together.
    Group group;
    {
      util::MutexLock lock(mu_);
      for (const auto& m : queue_) {
        if (group.size() >= env_.options().max_group_size) break;
        group.push_back(m);
      }
    }
    GroupResult result = apply_group(group);
    std::shared_ptr<Member> next;
    {
      util::MutexLock lock(mu_);
      for (size_t i = 0; i < group.size(); ++i) queue_.pop_front();
      if (!queue_.empty()) next = queue_.front();
    }
    // The next group commits while this one waits for its meta page to reach the disk. An
    // asynchronous commit has no thread of its own to lead it: without fsync this thread leads
    // it too; with fsync the committer thread does (this one, if it is the committer).
    bool lead_next = false;
    if (next && !next->done) {
      next->state.store(Member::kLead, std::memory_order_release);
      wake(next->state, sleep_at_once);
    } else if (next && env_.durability() && self) {
      hand_to_committer();
    } else if (next) {
      lead_next = true;
    }
    // Only a blocked committer that leads nothing more waits for the disk here; the committer
    // thread never does, so that the next group commits meanwhile.
    const bool may_block = self && !self->done && !lead_next;
    settle(std::move(group), std::move(result), self.get(), may_block);
    if (!lead_next) return;
  }
}

void CommitQueue::hand_to_committer() {
  {
    util::MutexLock lock(mu_);
    committer_wanted_ = true;
    if (!committer_.joinable()) committer_ = std::thread([this] { run_committer(); });
  }
  committer_cv_.notify_one();
}

void CommitQueue::run_committer() {
  util::MutexLock lock(mu_);
  for (;;) {
    while (!committer_wanted_ && !stopping_) committer_cv_.wait(mu_);
    if (!committer_wanted_) return;
    committer_wanted_ = false;
    lock.unlock();
    lead(nullptr);
    lock.lock();
  }
}

bool CommitQueue::on_own_thread() const {
  util::MutexLock lock(mu_);
  return committer_.get_id() == std::this_thread::get_id();
}

void CommitQueue::stop() {
  std::thread committer;
  {
    util::MutexLock lock(mu_);
    stopping_ = true;
    committer = std::move(committer_);
  }
  committer_cv_.notify_one();
  if (committer.joinable()) committer.join();
}

void CommitQueue::settle(Group group, GroupResult result, const Member* leader, bool may_block) {
  DurabilityTracker* durability = env_.durability();
  if (!durability || result.new_version == 0) return finish(group, result, Status::OK(), leader);
  if (may_block) return finish(group, result, durability->wait(result.new_version), leader);
  const uint64_t version = result.new_version;
  durability->on_durable(version, [this, group = std::move(group), result = std::move(result)](
                                      Status synced) { finish(group, result, synced, nullptr); });
}

void CommitQueue::finish(const Group& group, const GroupResult& result, const Status& synced,
                         const Member* leader) {
  const bool sleep_at_once = env_.durability() != nullptr;
  for (const auto& m : group) {
    if (!synced.ok() && m->outcome.status.ok()) m->outcome = {synced, 0};
  }
  for (const auto& m : group) {
    if (m->done) {
      ++running_callbacks;
      m->done(m->outcome);
      --running_callbacks;
      continue;
    }
    m->state.store(Member::kDone, std::memory_order_release);
    if (m.get() != leader) wake(m->state, sleep_at_once);  // the leader is not asleep: it is here
  }
  if (result.new_version != 0) {
    env_.watches().on_commit(result.changes, result.changes_complete, result.base_version,
                             result.new_version);
  }
}

CommitQueue::GroupResult CommitQueue::apply_group(const Group& group) {
  for (int attempt = 0;; ++attempt) {
    auto tried = try_group(group);
    if (auto* result = std::get_if<GroupResult>(&tried)) return std::move(*result);
    if (std::get<Retry>(tried) == Retry::kAgain) continue;  // the map grew
    // Too big together: commit members one at a time; watches hear every change.
    GroupResult merged;
    for (const auto& m : group) {
      GroupResult one = apply_group({m});
      if (one.new_version == 0) continue;
      if (merged.new_version == 0) {
        merged.base_version = one.base_version;
        merged.changes_complete = true;
      }
      merged.changes_complete = merged.changes_complete && one.changes_complete;
      merged.new_version = one.new_version;
      merged.changes.insert(merged.changes.end(), one.changes.begin(), one.changes.end());
    }
    return merged;
  }
}

std::variant<CommitQueue::GroupResult, CommitQueue::Retry> CommitQueue::try_group(
    const Group& group) {
  GroupResult result;
  auto fail_all = [&](const Status& status) {
    for (const auto& m : group) m->outcome = {status, 0};
    return result;
  };
  DurabilityTracker* durability = env_.durability();
  if (Status failed = env_.write_failure(); !failed.ok()) return fail_all(failed);
  if (Status lag = env_.wait_while_sync_lags(); !lag.ok()) return fail_all(lag);
  auto txn_or = env_.begin_write();
  if (!txn_or.ok()) return fail_all(txn_or.status());
  MDB_txn* txn = *txn_or;
  auto base = env_.version_in(txn);
  if (!base.ok()) {
    env_.end_write(txn, false);
    return fail_all(base.status());
  }
  result.base_version = *base;
  const uint64_t version = *base + 1;
  result.changes_complete = env_.watches().armed();
  std::vector<KeyChange>* changes = result.changes_complete ? &result.changes : nullptr;
  bool wrote = false;
  for (const auto& m : group) {
    const CommitRequest& req = *m->request;
    // Nothing can have changed under a member that read at the base version, unless an
    // earlier member of this group wrote.
    if (wrote || req.read_version != *base) {
      if (Status s = validate(txn, req); !s.ok()) {
        m->outcome = {s, 0};
        continue;
      }
    }
    if (int rc = apply(txn, req, version, changes); rc != MDB_SUCCESS) {
      env_.end_write(txn, false);
      if (rc == MDB_MAP_FULL) {
        if (Status s = env_.grow_map(); !s.ok()) return fail_all(s);
        return Retry::kAgain;
      }
      if (rc == MDB_TXN_FULL && group.size() > 1) {
        return Retry::kOneByOne;
      }
      return fail_all(env_.write_error(rc, "applying a transaction"));
    }
    m->outcome = {Status::OK(), version};
    wrote = true;
  }
  if (!wrote) {
    env_.end_write(txn, false);
    return result;
  }
  std::string counter = encode_version(version);
  MDB_val key = as_val("version"), value = as_val(counter);
  if (int rc = mdb_put(txn, env_.meta(), &key, &value, 0); rc) {
    env_.end_write(txn, false);
    if (rc == MDB_MAP_FULL) {
      if (Status s = env_.grow_map(); !s.ok()) return fail_all(s);
      return Retry::kAgain;
    }
    return fail_all(status_from_lmdb(rc, "advancing the commit counter"));
  }
  const int rc = env_.end_write(txn, true);
  // The commit itself allocates pages too (for LMDB's free list), so the map can fill there as
  // well; LMDB has then aborted the transaction, and the group is tried again in a bigger map.
  if (rc == MDB_MAP_FULL) {
    if (Status s = env_.grow_map(); !s.ok()) return fail_all(s);
    return Retry::kAgain;
  }
  const Status committed =
      rc == MDB_SUCCESS ? Status::OK() : env_.write_error(rc, "committing to LMDB");
  if (committed.ok()) env_.write_succeeded();
  if (durability && committed.ok()) durability->commit_done(version);
  if (!committed.ok()) {
    for (const auto& m : group) {
      if (m->outcome.status.ok()) m->outcome = {committed, 0};
    }
    result.changes.clear();
    return result;
  }
  result.new_version = version;
  return result;
}

Status CommitQueue::validate(MDB_txn* txn, const CommitRequest& request) {
  for (const PointRead& read : request.point_reads) {
    MDB_val key = as_val(read.key), value;
    int rc = mdb_get(txn, env_.data(), &key, &value);
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) return status_from_lmdb(rc, "validating a read");
    const bool present = rc == MDB_SUCCESS;
    uint64_t version = 0;
    if (present) {
      auto stored = decode_stored(value);
      if (!stored.ok()) return stored.status();
      version = stored->first;
    }
    if (present != read.present || version != read.version) {
      return Aborted("a key this transaction read was changed by a later commit");
    }
  }
  for (const RangeRead& read : request.range_reads) {
    auto now = fingerprint_range(txn, env_.data(), read.begin, read.end);
    if (!now.ok()) return now.status();
    if (!(*now == read.seen)) {
      return Aborted("a key range this transaction read was changed by a later commit");
    }
  }
  return Status::OK();
}

int CommitQueue::apply(MDB_txn* txn, const CommitRequest& request, uint64_t version,
                       std::vector<KeyChange>* changes) {
  for (const auto& [begin, end] : request.buffer.cleared) {
    if (int rc = clear_range(txn, env_.data(), begin, end, changes); rc) return rc;
  }
  std::string stored;
  for (const auto& [k, v] : request.buffer.writes) {
    MDB_val key = as_val(k);
    int rc;
    if (v) {
      stored = encode_stored(version, *v);
      MDB_val value = as_val(stored);
      rc = mdb_put(txn, env_.data(), &key, &value, 0);
    } else {
      rc = mdb_del(txn, env_.data(), &key, nullptr);
      if (rc == MDB_NOTFOUND) rc = MDB_SUCCESS;
    }
    if (rc) return rc;
    if (changes) changes->push_back({k, v});
  }
  return MDB_SUCCESS;
}

}  // namespace kvq::kv::lmdb
