// kv/etcd/etcd_transaction.h — a kv::Transaction on etcd (see kvq/etcd_store.h for the mapping).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "kv/etcd/commit_batcher.h"
#include "kv/etcd/etcd_client.h"
#include "kv/etcd/etcd_watch.h"
#include "kv/etcd/remembered.h"
#include "kv/overlay.h"

namespace kvq::kv::etcd {

class EtcdTransaction : public Transaction {
 public:
  // `batcher`: null commits each transaction on its own. `remembered`: the store handle's,
  // shared by its transactions. `serializable_first_reads`: EtcdOptions::serializable_first_reads.
  // Where fetch_deferred and commit_async call their `done`: post(task) runs `task` on the
  // store's threads (never on gRPC's own, which a `done` that blocks could starve); started()
  // comes first, as the call starts, so that the store can wait for the callbacks to come
  // (kv::Store::wait_for_callbacks).
  class Callbacks {
   public:
    virtual ~Callbacks() = default;
    virtual void started() = 0;
    virtual void post(std::function<void()> task) = 0;
  };
  EtcdTransaction(std::shared_ptr<Client> client, std::shared_ptr<WatchHub> hub,
                  std::shared_ptr<CommitBatcher> batcher, std::shared_ptr<Remembered> remembered,
                  bool serializable_first_reads, std::shared_ptr<Callbacks> callbacks)
      : client_(std::move(client)),
        hub_(std::move(hub)),
        batcher_(std::move(batcher)),
        remembered_(std::move(remembered)),
        serializable_first_reads_(serializable_first_reads),
        callbacks_(std::move(callbacks)) {}

  Result<std::optional<std::string>> get(std::string_view key, ReadOptions options) override;
  // One Txn of ranges at this transaction's revision.
  Result<std::vector<std::optional<std::string>>> get_many(const std::vector<std::string>& keys,
                                                           ReadOptions options) override;
  // `keys` and the first page of each range, fetched in one Txn of ranges, not yet tracked:
  // get and get_many answer from fetched_, a range's first page read from prefetched_pages_.
  // Keys a guess will answer (guesses(options), a key the handle remembers) are left out.
  void prefetch(const std::vector<std::string>& keys, const std::vector<RangeRead>& ranges,
                ReadOptions options) override;
  Result<std::vector<KeyValue>> get_range(std::string_view begin, std::string_view end,
                                          RangeOptions options) override;
  void set(std::string_view key, std::string_view value) override;
  void clear(std::string_view key) override;
  void clear_range(std::string_view begin, std::string_view end) override;
  // A token write the batcher may share with other commits (commit_batcher.h).
  void touch(std::string_view key) override;
  bool allow_stale_reads() override {
    if (revision_ == 0) stale_ok_ = serializable_first_reads_;
    return stale_ok_;
  }
  Status add_read_conflict_key(std::string_view key) override;
  Result<Watch> watch(std::string_view key) override;
  // Without a read yet, in a transaction that guessed: the newest revision the handle has seen
  // (its reads are then at that revision), which costs no call.
  Result<uint64_t> read_version() override;
  Status commit() override;
  uint64_t committed_version() const override { return static_cast<uint64_t>(committed_revision_); }
  // The commit without a blocked thread: through the batcher's commit_async, or one Txn.
  void commit_async(std::function<void(Status)> done) override;

  void defer_reads() override { defer_ = true; }
  bool has_deferred_reads() const override {
    return !deferred_keys_.empty() || !deferred_pages_.empty() || deferred_version_;
  }
  // The noted keys and pages in one Txn of ranges (a count-only Range when only the read
  // version was asked for).
  void fetch_deferred(std::function<void(Status)> done) override;
  void restart() override;

  struct Stored {
    int64_t mod_revision;
    std::string value;
  };

 private:
  std::string full(std::string_view key) const { return client_->prefix() + std::string(key); }
  // For a first read that may be stale (serializable, no quorum round): the newest revision
  // this handle has seen, below which its answer is read again with a quorum round. A member
  // behind it (a follower after a failover, one cut off) would otherwise give this transaction
  // a read version older than an earlier one's, which kv.h promises never happens, and let a
  // look that finds nothing miss what a look of this handle saw before (the accept waiters
  // count on that). 0 (no floor) for any other read.
  int64_t stale_first_read_floor() const {
    return revision_ == 0 && stale_ok_ ? remembered_->latest_revision() : 0;
  }
  // Reads at this transaction's revision (fixing it on the first read).
  Status range(etcdserverpb::RangeRequest& request, etcdserverpb::RangeResponse* response);
  Result<std::optional<Stored>> read_stored(std::string_view key);
  // Whether a read with `options` is answered by a guess (ReadOptions::remembered,
  // assume_absent): only once reads may be stale.
  bool guesses(const ReadOptions& options) const {
    return stale_ok_ && (options.remembered || options.assume_absent);
  }
  // A read with a guess: the value fetched or guessed before in this transaction, else the
  // guess (a remembered key not yet remembered is read, and remembered).
  Result<std::optional<Stored>> guess(std::string_view key, const ReadOptions& options);
  // A read found `stored` at `full_key`: if the handle remembers that key, it takes what was read.
  void refresh_remembered(const std::string& full_key, const std::optional<Stored>& stored);
  // Forgets what this transaction guessed, after a commit that failed or may have.
  void forget_guesses();
  // The commit of a transaction that writes nothing: its guesses still hold (kAborted, and
  // they are forgotten, if not).
  Status check_guesses();
  // The Txn of compares that checks the guesses (check_guesses, commit_read_only_async).
  etcdserverpb::TxnRequest guess_checks() const;
  // Brings into fetched_ each of `keys` neither buffered nor fetched yet, and into
  // prefetched_pages_ the first page of each range, in one call (a Range for a lone key). With
  // reads deferred, notes them instead (kUnavailable if it noted any).
  Status fetch(const std::vector<std::string>& keys, const std::vector<RangeRead>& ranges);
  using PageKey = std::tuple<std::string, std::string, int64_t, int>;
  static PageKey page_key(const etcdserverpb::RangeRequest& request) {
    return PageKey{request.key(), request.range_end(), request.limit(), request.sort_order()};
  }
  // One Txn of ranges that fetches keys and pages, and where each answer goes.
  struct ReadPlan {
    etcdserverpb::TxnRequest request;
    std::vector<std::string> keys;
    std::vector<PageKey> pages;
    int64_t floor = 0;  // stale_first_read_floor() when planned
    etcdserverpb::TxnResponse response;
  };
  // The plan for those of `keys` and `pages` not buffered, fetched or prefetched yet.
  Result<ReadPlan> plan_read(const std::vector<std::string>& keys,
                             std::vector<etcdserverpb::RangeRequest> pages);
  // Whether the plan's answer is behind its floor: then it is asked again, linearizable.
  static bool behind_floor(ReadPlan& plan);
  // Takes the plan's answer into fetched_ and prefetched_pages_, fixing revision_.
  Status take_read(ReadPlan& plan);
  // What a commit's outcome means for this transaction: its Status, and on success what the
  // handle remembers (commit and commit_async).
  Status settle(const Result<Committed>& sent);
  // The commit of a transaction that writes nothing, asynchronously: its read version, then
  // its guesses checked (check_guesses).
  void commit_read_only_async(std::function<void(Status)> done);
  // `done`, wrapped to come through callbacks_ (counted from now).
  std::function<void(Status)> called_back(std::function<void(Status)> done);
  void record_read(std::string_view key, const std::optional<Stored>& stored);
  // The commit as the batcher takes it: compares, writes, tokens and what they cover.
  Member member() const;
  // Adds to `txn` the compare that `key`, read at `mod_revision` (0: absent), still holds.
  void compare_read(etcdserverpb::TxnRequest& txn, const std::string& key,
                    int64_t mod_revision) const;

  std::shared_ptr<Client> client_;
  std::shared_ptr<WatchHub> hub_;
  std::shared_ptr<CommitBatcher> batcher_;
  std::shared_ptr<Remembered> remembered_;
  int64_t revision_ = 0;
  // Keys answered by a guess rather than a read at revision_.
  std::vector<std::string> guessed_;
  // What each key read by get or get_many held at revision_: the same however often it is
  // asked again, so a second read of a key costs no round trip.
  std::map<std::string, std::optional<Stored>, std::less<>> fetched_;
  // Pages of ranges that prefetch fetched at revision_, by their request (key, range_end,
  // limit, sort order): the next range() of the same request takes its page from here.
  std::map<PageKey, etcdserverpb::RangeResponse> prefetched_pages_;
  // Non-snapshot reads: the key's mod_revision when read (0: absent).
  std::map<std::string, int64_t, std::less<>> reads_;
  // Covered parts of non-snapshot range reads: nothing in them may change after revision_.
  std::vector<std::pair<std::string, std::string>> ranges_;
  WriteBuffer buffer_;
  // The value each touch() wrote: a key whose buffered write is still that value is a token.
  std::map<std::string, std::string, std::less<>> tokens_;
  Status deferred_;
  const bool serializable_first_reads_;
  const std::shared_ptr<Callbacks> callbacks_;
  // Reads deferred (defer_reads), and those noted since the last fetch_deferred: keys, pages
  // (their requests), and whether a read version was asked for with nothing read yet.
  bool defer_ = false;
  std::vector<std::string> deferred_keys_;
  std::vector<etcdserverpb::RangeRequest> deferred_pages_;
  bool deferred_version_ = false;
  // Keys a guess deferred because the handle did not remember them yet: remembered once fetched.
  std::set<std::string, std::less<>> to_remember_;
  bool stale_ok_ = false;  // allow_stale_reads(), where the options let it
  bool committed_ = false;
  int64_t committed_revision_ = 0;
};

}  // namespace kvq::kv::etcd
