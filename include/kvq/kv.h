// kvq/kv.h — the transactional ordered key-value interface every kvq layer is written against.
//
// Shaped like a FoundationDB transaction. A Store hands out Transactions; a Transaction reads a
// consistent snapshot, buffers its writes, and commits them atomically:
//
//   * Serializable and optimistic. commit() fails with kAborted if any key the transaction read
//     without `snapshot` (or named with add_read_conflict_key, or saw in a non-snapshot range
//     read — including keys added to or removed from that range) was changed by a transaction
//     that committed after this one's read version. Snapshot reads add no conflict.
//   * Reads see the transaction's own writes.
//   * set/clear/clear_range are buffered; their errors (a key or value over the size limits)
//     surface at commit(), and a failed commit changes nothing.
//   * A transaction that wrote nothing commits trivially and never conflicts.
//   * read_version() is a commit-order number: it never decreases across transactions of one
//     store, and a transaction that begins after another committed sees a read version at least
//     that commit's version. Layers use it where FoundationDB would use versionstamps.
//   * watch(key) returns a Watch that fires once the key's committed value differs from the
//     value this transaction read (at its read version), so no change after the read is missed.
//     Watches may fire spuriously (a write of an equal value never fires, but a backend may
//     over-report); callers re-read after a watch fires.
//
// Error codes and their retry meaning are in kvq/status.h. Use kv::run (below) rather than a
// hand-written retry loop.
//
// Thread-safety: a Store is safe to use from many threads at once. A Transaction and a Watch are
// used by one thread at a time; Watch::cancel and the callbacks given to Watch::on_ready may run
// on any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kvq/status.h"

namespace kvq::kv {

using Clock = std::chrono::steady_clock;

// Limits every backend accepts. Larger keys or values fail at commit with kInvalidArgument.
inline constexpr size_t kMaxKeySize = 511;            // LMDB's compiled-in key limit.
inline constexpr size_t kMaxValueSize = 1024 * 1024;  // Under etcd's 1.5 MiB request cap.

struct KeyValue {
  std::string key;
  std::string value;
  friend bool operator==(const KeyValue&, const KeyValue&) = default;
};

struct ReadOptions {
  bool snapshot = false;  // true: adds no read conflict.
  // Guesses, for a read whose answer the commit checks anyway: they spare a store whose reads
  // are round trips (etcd) the call. Each has effect only in a transaction whose
  // allow_stale_reads() returned true; elsewhere, and on LMDB (whose reads are local), the read
  // is an ordinary one. A guessed read is tracked as a read without snapshot (whatever
  // `snapshot` says), so the commit fails (kAborted, which kv::run retries) if the store holds
  // anything else; a transaction that guessed and writes nothing has its guesses checked by
  // its commit all the same. A body should not guess again on the attempt after such a
  // failure: nothing is remembered of a failed guess, so the same guess would fail the same way.
  //
  // `remembered`: the value this store handle last saw of the key (read, or written by its own
  // commits) may answer, however old; a key it has not seen yet is read, and remembered for the
  // next transaction. For keys that seldom change (a type's settings) or that change mostly
  // through this handle (the row of a job this process added or took). The handle remembers a
  // few thousand keys, the least recently used going first.
  bool remembered = false;
  // `assume_absent`: the key is taken to be absent without asking the store. For a key the
  // caller expects to create (a new job's row). What the commit then writes to it is
  // remembered, as if it had been read with `remembered`.
  bool assume_absent = false;
};

struct RangeOptions {
  size_t limit = 0;       // 0 means no limit.
  bool reverse = false;   // true: from the end of the range backwards.
  bool snapshot = false;  // true: adds no read conflict.
};

// A get_range a transaction is about to make: its arguments (Transaction::prefetch).
struct RangeRead {
  std::string begin, end;
  RangeOptions options;
};

namespace detail {
struct WatchState;
}

// A one-shot notification that a key changed. Move-only; destroying it cancels it.
class Watch {
 public:
  Watch() = default;
  explicit Watch(std::shared_ptr<detail::WatchState> state);
  Watch(Watch&&) noexcept = default;
  Watch& operator=(Watch&& other) noexcept;
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  ~Watch();

  bool valid() const { return state_ != nullptr; }

  // True once the watch has fired or ended with an error.
  bool ready() const;

  // Blocks until the watch fires (OK), ends with a backend error, is cancelled (kCancelled), or
  // `deadline` passes (kDeadlineExceeded; the watch stays armed). Returns only after the
  // on_ready callbacks registered before the watch ended have returned (so a callback must not
  // wait on its own watch).
  Status wait_until(Clock::time_point deadline) const;

  // Calls `callback` exactly once with the final status: on the firing thread, or at once on
  // this thread if the watch is already ready. Cancelling calls it with kCancelled.
  void on_ready(std::function<void(const Status&)> callback);

  // Disarms the watch; a later or concurrent fire is dropped. Idempotent.
  void cancel();

 private:
  std::shared_ptr<detail::WatchState> state_;
};

class Transaction {
 public:
  virtual ~Transaction() = default;  // Uncommitted writes are discarded.

  // Every call below except committed_version() REQUIRES: commit() (or commit_async()) has not
  // been called on this transaction.
  //
  // The value of `key`, std::nullopt if absent.
  virtual Result<std::optional<std::string>> get(std::string_view key,
                                                 ReadOptions options = {}) = 0;

  // get() of each of `keys`, in order, as one read: on etcd one round trip instead of one per
  // key. The default calls get() for each.
  virtual Result<std::vector<std::optional<std::string>>> get_many(
      const std::vector<std::string>& keys, ReadOptions options = {});

  // Says that the transaction is about to read `keys`, and to make each get_range of
  // `ranges`: a store whose reads are round trips (etcd) fetches the keys and the first rows of
  // those ranges together now, in one, and the reads then answer from what it fetched. Reads
  // nothing for the transaction: each key or range is read (and, without snapshot, tracked for
  // conflicts) only when get(), get_many() or get_range() asks for it. A failure is left to
  // those reads. A key or range already fetched (and not yet read) is not fetched again.
  // `options` are those the keys will be read with: a key that read will answer with a guess
  // (ReadOptions) is not fetched. The default does nothing (LMDB reads from the map).
  virtual void prefetch(const std::vector<std::string>& keys,
                        const std::vector<RangeRead>& ranges = {}, ReadOptions options = {});

  // Keys in [begin, end) in key order (or reverse), at most `limit` of them.
  virtual Result<std::vector<KeyValue>> get_range(std::string_view begin, std::string_view end,
                                                  RangeOptions options = {}) = 0;

  virtual void set(std::string_view key, std::string_view value) = 0;
  virtual void clear(std::string_view key) = 0;
  // Clears every key in [begin, end).
  virtual void clear_range(std::string_view begin, std::string_view end) = 0;

  // Sets `key` to a fresh random value: a token whose content nobody reads, only that it
  // changed (a watch on it fires). A store may write the tokens of concurrent commits once for
  // all of them, and then writes them even for a commit that fails (on etcd: group commit,
  // kv/etcd/commit_batcher.h), so a touch may wake a watcher for nothing, never miss one. A
  // transaction that reads `key` without snapshot never shares a batch with one that touches
  // it. The default calls set().
  virtual void touch(std::string_view key);

  // Lets this transaction read a consistent state that may be a little behind the latest
  // commit, though never behind what this store handle has seen: its read version is still at
  // least that of every transaction of this store that read before it began, and of every
  // commit that returned before then (read_version's promise above holds). A commit that
  // writes still fails, as always, if anything it read without snapshot
  // changed after what it saw, so a read-modify-write stays serializable; what a transaction
  // that writes nothing read (or an error it drew from it) may be out of date. For callers
  // that write whatever they decide, or, finding nothing, watch from read_version() for what
  // comes after (or wait on a watch this store armed before, still unfired). Has effect only
  // before the first read. Returns whether reads may now be behind:
  // on etcd the first read then skips the ReadIndex round with a quorum
  // (EtcdOptions::serializable_first_reads); the default does nothing and returns false (LMDB
  // reads the latest commit).
  virtual bool allow_stale_reads() { return false; }

  // Whether, in the kv::run (or kv::run_async) that began this transaction, an earlier
  // attempt's commit ended with kUnknownResult: that commit may have applied. False on a first
  // attempt, on every attempt after commits that failed only otherwise (kAborted and the rest:
  // they did not apply) or bodies that failed, and for a transaction kv::run did not begin.
  // Once true it stays true for the run's later attempts: the attempt that looked for the
  // unknown commit may itself fail, and its look with it. A body that recognises its own
  // earlier commit needs to look for it only when this is true, so that a retry after a mere
  // conflict spends no reads on it (on etcd, round trips).
  bool earlier_commit_unknown() const { return earlier_commit_unknown_; }
  // For kv::run and kv::run_async, before they hand the transaction to the body.
  void set_earlier_commit_unknown(bool unknown) { earlier_commit_unknown_ = unknown; }

  // Makes the commit conflict if `key` changes after this transaction's read version, as if it
  // had been read without snapshot.
  virtual Status add_read_conflict_key(std::string_view key) = 0;

  virtual Result<Watch> watch(std::string_view key) = 0;

  // The commit-order number this transaction reads at (fixed by its first read; on etcd, in a
  // transaction that guessed a read before any other, the newest revision its store handle has
  // seen, so that asking costs no call).
  virtual Result<uint64_t> read_version() = 0;

  // Applies the buffered writes atomically. OK means they are committed (and, for a durable
  // store, on disk). REQUIRES: called at most once.
  virtual Status commit() = 0;

  // The version the commit got; the read version for a transaction that wrote nothing.
  // REQUIRES: commit() returned OK.
  virtual uint64_t committed_version() const = 0;
  // commit() for a caller that must not block: `done` gets commit()'s outcome, on this thread
  // before commit_async returns or later on another. On a store whose nonblocking() is true it
  // waits for neither the disk nor other commits; elsewhere it is commit() followed by `done`.
  // REQUIRES: the transaction stays alive until `done` has been called. `done` may run on the
  // store's own threads and must not block: a blocking commit there fails with kFailedPrecondition
  // (LMDB), as it could wait for itself; commit asynchronously, or hand the work elsewhere.
  virtual void commit_async(std::function<void(Status)> done);

  // ---- Bodies run again instead of waiting: kv::run_async on a store whose reads are round
  // trips (Store::replays_bodies) ----
  // From now until the commit, a read this transaction cannot answer from what it fetched
  // before (get, get_many, get_range, add_read_conflict_key, watch, read_version) does not
  // wait for the store: it fails at once (kUnavailable) and is noted, and prefetch only notes.
  // The default does nothing (reads never wait).
  virtual void defer_reads() {}
  // Whether a read was noted since the transaction began or last restarted.
  virtual bool has_deferred_reads() const { return false; }
  // Fetches every noted read in one round trip, at this transaction's read version (fixing it
  // if no read did yet), then calls `done` on one of the store's threads (which may block only
  // briefly). REQUIRES: the transaction stays alive until then.
  virtual void fetch_deferred(std::function<void(Status)> done) { done(Status::OK()); }
  // Drops the writes, the reads tracked for conflicts and the errors of the body's run so far,
  // keeping what was fetched and the read version: the body runs again from the start, and its
  // reads answer from what it fetched, as they would have the first time.
  virtual void restart() {}

 private:
  bool earlier_commit_unknown_ = false;
};

class Store {
 public:
  virtual ~Store() = default;
  // A new transaction. REQUIRES: the Store outlives it (and every Watch it made).
  virtual Result<std::unique_ptr<Transaction>> begin() = 0;
  // A short description for logs: "lmdb:/var/lib/kvq (sync)".
  virtual std::string describe() const = 0;
  // Whether the store can serve transactions now: OK, or why not (etcd unreachable or without
  // quorum; an LMDB store that acknowledges no commit since an fsync failed). kResourceExhausted
  // means it serves reads but cannot write: an LMDB store whose last write failed for lack of
  // disk space, until a commit succeeds or a probe (reserving a few MiB in a scratch file, at
  // most once a second) finds room again. It writes no data, so a health check may call it
  // often. The default begins a transaction and reads its version.
  virtual Status check_health();
  // True when a transaction never holds up its thread for long: reads come from local memory
  // or a map, and commit_async waits for neither the disk nor other commits. An event loop may
  // then run transactions itself (kv::run_async). False unless the backend says so.
  virtual bool nonblocking() const;
  // True when kv::run_async holds no thread while the store answers, though its reads are round
  // trips (etcd): each attempt defers its reads (Transaction::defer_reads), and the body runs
  // again once they are fetched, until a run reads nothing new; it then commits asynchronously.
  // The body and `done` run on the store's threads. False unless the backend says so.
  virtual bool replays_bodies() const { return false; }
  // Waits until every `done` given to an asynchronous call of this store's transactions
  // (commit_async, fetch_deferred) has returned, or `deadline` passes; says whether they have.
  // For a process that stops: what those callbacks use may go once this returns true. The
  // default returns true at once (LMDB: a commit's callback follows its write within
  // milliseconds, and a server's stopping grace covers it).
  virtual bool wait_for_callbacks(Clock::time_point deadline) {
    (void)deadline;
    return true;
  }
};

// ---- The one retry loop -------------------------------------------------------------------

struct RetryOptions {
  // Gives up with kDeadlineExceeded once this much time has passed since the first attempt.
  std::chrono::milliseconds timeout{30'000};
  // Gives up (returning the last retryable error) after this many attempts; 0 = no limit.
  int max_attempts = 0;
  std::chrono::microseconds initial_backoff{500};
  std::chrono::microseconds max_backoff{100'000};
  // For kv::run_async on a store that replays_bodies(): the body may run again on the same
  // transaction once its deferred reads are fetched (Transaction::defer_reads), because in a
  // run that has_deferred_reads() it changes nothing it keeps across attempts (a run that
  // stopped at a read it could not make decides nothing). false: run_async blocks on such a
  // store, as run does.
  bool replayable = false;
};

// `options` for a body that is RetryOptions::replayable.
inline RetryOptions replayable(RetryOptions options) {
  options.replayable = true;
  return options;
}

// How often kv::run retried in this process, by reason, since it started. For metrics.
struct RetryCounts {
  uint64_t aborted = 0;
  uint64_t unavailable = 0;
  uint64_t unknown_result = 0;
};
RetryCounts retry_counts();

namespace detail {
void count_retry(Code code);
// Sleeps a jittered exponential backoff for `attempt` (0-based) and returns false if the next
// attempt would start past `deadline`.
bool backoff_before_retry(int attempt, const RetryOptions& options, Clock::time_point deadline);
// The jittered backoff before the retry after `attempt`, or nullopt if it would end past
// `deadline`.
std::optional<std::chrono::microseconds> backoff_delay(int attempt, const RetryOptions& options,
                                                       Clock::time_point deadline);
// Runs `task` once `delay` has passed, on a timer thread kvq starts for the process on first
// use. For run_async's retries: tasks must not block.
void run_after(std::chrono::microseconds delay, std::function<void()> task);
}  // namespace detail

// Runs `fn(Transaction&)` in a transaction of its own and commits it, retrying the whole thing
// on kAborted, kUnavailable and kUnknownResult with jittered exponential backoff until it
// succeeds, fails otherwise, or `options` run out.
//
// `fn` MAY RUN SEVERAL TIMES. It must have no side effects outside the transaction, and since an
// unknown commit result is retried, it must be idempotent: read what it is about to change and
// write only what is still missing (e.g. record an operation id, and skip if it is present).
//
// `fn` returns Status or Result<T>; run returns the same type. An error from `fn` is not
// committed; a retryable one is retried like a commit conflict. REQUIRES: `fn` does not commit
// the transaction it is given.
template <typename Fn>
auto run(Store& store, Fn&& fn, const RetryOptions& options = {})
    -> std::invoke_result_t<Fn&, Transaction&> {
  using R = std::invoke_result_t<Fn&, Transaction&>;
  const auto deadline = Clock::now() + options.timeout;
  Status last;
  bool commit_unknown = false;
  for (int attempt = 0;; ++attempt) {
    auto txn = store.begin();
    if (txn.ok()) {
      (*txn)->set_earlier_commit_unknown(commit_unknown);
      R outcome = fn(**txn);
      Status status;
      if constexpr (std::is_same_v<R, Status>) {
        status = outcome;
      } else {
        status = outcome.status();
      }
      if (status.ok()) {
        status = (*txn)->commit();
        if (status.code() == Code::kUnknownResult) commit_unknown = true;
      }
      if (status.ok()) return outcome;
      if (!status.retryable()) return status;
      last = status;
    } else {
      if (!txn.status().retryable()) return txn.status();
      last = txn.status();
    }
    detail::count_retry(last.code());
    if (options.max_attempts > 0 && attempt + 1 >= options.max_attempts) {
      return last.with_context("gave up after " + std::to_string(attempt + 1) + " attempts");
    }
    if (!detail::backoff_before_retry(attempt, options, deadline)) {
      return DeadlineExceeded("transaction did not commit before its deadline; last error: " +
                              last.to_string());
    }
  }
}

namespace detail {

template <typename Fn, typename Done>
class AsyncRun : public std::enable_shared_from_this<AsyncRun<Fn, Done>> {
 public:
  using R = std::invoke_result_t<Fn&, Transaction&>;
  AsyncRun(Store& store, Fn fn, Done done, const RetryOptions& options)
      : store_(store),
        fn_(std::move(fn)),
        done_(std::move(done)),
        options_(options),
        deadline_(Clock::now() + options.timeout) {}

  void attempt() {
    auto began = store_.begin();
    if (!began.ok()) return failed(began.status());
    std::shared_ptr<Transaction> txn(std::move(*began));
    txn->set_earlier_commit_unknown(commit_unknown_);
    // Not nonblocking: run_async came here for a replayable body on a store that replays them.
    if (!store_.nonblocking()) txn->defer_reads();
    run_body(std::move(txn), 0);
  }

 private:
  // The body's runs on one transaction: its `runs`-th, then another for as long as a run
  // deferred reads (each fetched in one round trip first), then the commit.
  void run_body(std::shared_ptr<Transaction> txn, int runs) {
    auto outcome = std::make_shared<R>(fn_(*txn));
    if (txn->has_deferred_reads()) {
      // Whatever the run returned: it may have stopped at, or decided on, a read not yet made.
      if (runs + 1 >= kMaxRuns) {
        return done_(R(Internal("a transaction's body still read something new after " +
                                std::to_string(kMaxRuns) + " runs")));
      }
      Transaction& t = *txn;
      return t.fetch_deferred(
          [self = this->shared_from_this(), txn = std::move(txn), runs](Status fetched) mutable {
            if (!fetched.ok()) return self->failed(fetched);
            txn->restart();
            self->run_body(std::move(txn), runs + 1);
          });
    }
    Status status;
    if constexpr (std::is_same_v<R, Status>) {
      status = *outcome;
    } else {
      status = outcome->status();
    }
    if (!status.ok()) return failed(status);
    txn->commit_async([self = this->shared_from_this(), txn, outcome](Status committed) {
      if (committed.code() == Code::kUnknownResult) self->commit_unknown_ = true;
      if (committed.ok()) return self->done_(std::move(*outcome));
      self->failed(committed);
    });
  }

  // Runs of the body on one transaction before run_async gives up on it: a body that keeps
  // reading what its last run had not (a loop over reads) would otherwise run forever.
  static constexpr int kMaxRuns = 1000;

  // The end of the road, or for a retryable failure the next attempt after a backoff.
  void failed(const Status& status) {
    if (!status.retryable()) return done_(R(status));
    count_retry(status.code());
    if (options_.max_attempts > 0 && attempts_ + 1 >= options_.max_attempts) {
      return done_(
          R(status.with_context("gave up after " + std::to_string(attempts_ + 1) + " attempts")));
    }
    auto delay = backoff_delay(attempts_, options_, deadline_);
    if (!delay) {
      return done_(R(DeadlineExceeded(
          "transaction did not commit before its deadline; last error: " + status.to_string())));
    }
    ++attempts_;
    run_after(*delay, [self = this->shared_from_this()] { self->attempt(); });
  }

  Store& store_;
  Fn fn_;
  Done done_;
  RetryOptions options_;
  Clock::time_point deadline_;
  int attempts_ = 0;
  bool commit_unknown_ = false;  // an attempt's commit ended kUnknownResult
};

}  // namespace detail

// kv::run for a caller that must not block, such as an event loop: the same attempts, retries
// and outcome, but `done(outcome)` gets what run would return. On a store whose nonblocking()
// is true, `fn` runs at once on this thread and, for a retry, on kvq's timer thread after the
// backoff, and each attempt commits with commit_async, so `done` may run on another thread. On
// a store whose replays_bodies() is true (etcd), for a body that is options.replayable, the
// first run of each attempt is the same, and the runs after it (Transaction::defer_reads) and
// `done` come on the store's threads. On any other store, or for a body that is not
// replayable, this is `done(run(store, fn, options))`, blocking. `fn` and `done` must own what
// they use (they may outlive this call). REQUIRES: the store outlives `done`'s call.
template <typename Fn, typename Done>
void run_async(Store& store, Fn fn, Done done, const RetryOptions& options = {}) {
  if (!store.nonblocking() && !(store.replays_bodies() && options.replayable))
    return done(run(store, fn, options));
  std::make_shared<detail::AsyncRun<Fn, Done>>(store, std::move(fn), std::move(done), options)
      ->attempt();
}

// ---- Event loops that run transactions ------------------------------------------------------

// Lets the transactions that one round of an event loop commits go to a nonblocking store
// together. Installed on a loop's thread (for as long as the object lives), it changes what an
// asynchronous commit made on that thread does when no other commit is under way: instead of
// committing alone at once, it is put off until the loop has run the handlers that were ready,
// and the commits they make join it, so the store applies them as one group (LMDB: one write
// transaction instead of one each, and each of those writes the whole path of every key it
// changes). A blocking commit from any thread that finds such a commit put off commits it with
// its own, so nothing waits on the loop but the loop's own commits. Stores that are not
// nonblocking() ignore it.
class LoopBatching {
 public:
  // `post(task)` must run `task` on the loop after the handlers that are ready now, as
  // asio::defer does (asio::post too, but from a loop thread it wakes another thread of the
  // loop to run it, a context switch per commit at low load), and may drop it if the loop
  // stops: the destructor runs what was dropped.
  explicit LoopBatching(std::function<void(std::function<void()>)> post);
  // Runs every task put off here that the loop has not run, so no commit is left behind.
  // REQUIRES: destroyed on the thread that made it, after its loop has stopped running.
  ~LoopBatching();
  LoopBatching(const LoopBatching&) = delete;
  LoopBatching& operator=(const LoopBatching&) = delete;

  // For stores. Whether the calling thread has a LoopBatching.
  static bool on_this_thread();
  // For stores. Hands `task` to the calling thread's loop, to run once: on the loop, or in the
  // destructor if the loop dropped it. REQUIRES: on_this_thread().
  static void defer(std::function<void()> task);

 private:
  struct State;
  static thread_local State* installed_;  // the calling thread's, if any
  std::unique_ptr<State> state_;          // the loop's tasks hold only their own Deferred
};

// Runs `fn` in the caller's open transaction, once: the caller commits (and retries) everything
// together. This is what lets a layer's operation join a caller's own writes atomically.
template <typename Fn>
auto run(Transaction& txn, Fn&& fn) -> std::invoke_result_t<Fn&, Transaction&> {
  return fn(txn);
}

}  // namespace kvq::kv
