// kv/etcd/commit_batcher.h — group commit over etcd: the commits a process makes at the same
// time go to etcd as one Txn whose success branch holds each of them as a nested Txn. etcd
// judges every nested Txn on its own (its compares decide whether its writes apply) and gives
// them all one revision, for one Raft round and one apply instead of one each.
//
// A batch is not serializable by itself: etcd evaluates every compare of a request against the
// state before any of its writes. So a commit joins a batch only if no other member writes a
// key or range it compared, compares one it writes, or writes one it writes (etcd also refuses
// a request that puts one key twice, whichever member would fail). Then running the members in
// any order gives the outcome the batch gave, and each member is exactly the commit it would
// have been alone.
//
// Tokens (Transaction::touch) are the exception: keys whose value only says "changed", written
// by many commits of a type (the jobs layer's activity and pending tokens). They would keep any
// two members touching them apart, so a batch writes each once at its outer level, whatever its
// members' compares decide (a failed member's token write is a spurious wake-up, harmless).
//
// A commit alone (nothing else waiting) is sent at once as it is: the batcher adds no latency
// when idle. While `in_flight` batches are under way, commits wait and go together in the next,
// except under light load: while every request under way holds one commit, a lone waiting
// commit goes at once as one request more (may_send). Requests are sent asynchronously, and
// the end of each sends the next: no thread waits for etcd but one that asked to (commit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kv/etcd/etcd_client.h"
#include "util/mutex.h"

namespace kvq::kv::etcd {

// A key range [begin, end) of full (prefixed) keys; a single key k is [k, k + '\0').
struct Span {
  std::string begin, end;
  static Span key(std::string k) {
    std::string end = k;
    end.push_back('\0');
    return Span{std::move(k), std::move(end)};
  }
};

// One commit: its request (compares and writes, tokens not among them), its tokens, and the
// keys it compared and wrote, which decide what it may share a batch with.
struct Member {
  etcdserverpb::TxnRequest txn;
  std::vector<std::pair<std::string, std::string>> tokens;  // full key, value
  std::vector<Span> compared;
  std::vector<Span> written;
};

// Moves `member`'s tokens into its own writes, for a commit sent as a request of its own (its
// token writes then apply only if its compares hold, as any write of it).
void fold_tokens(Member& member);

// A member's outcome: whether its compares held (its writes applied), and the revision.
struct Committed {
  bool succeeded = false;
  int64_t revision = 0;
};

struct BatchLimits {
  size_t max_members = 64;
  // etcd's --max-txn-ops (default 128) bounds each level of a request: the outer level holds
  // one operation per member and one per token.
  size_t max_ops = 128;
  // etcd's --max-request-bytes defaults to 1.5 MiB; a member larger than this goes alone.
  size_t max_bytes = 1 << 20;
  size_t in_flight = 1;  // requests under way at once from one batcher
};

class CommitBatcher {
 public:
  CommitBatcher(std::shared_ptr<Client> client, BatchLimits limits);

  // Commits `member`, alone or with others; blocks until its outcome is known. A failed request
  // gives each of its members that failure (kUnknownResult: any of them may have applied). A
  // request etcd refused before applying anything (kInvalidArgument, kResourceExhausted: too
  // many operations, too large, a key written twice) is sent again member by member.
  Result<Committed> commit(Member member);
  // Queues every member at once, then commits them as commit() would (tests: a set of members
  // certain to meet in the batcher).
  std::vector<Result<Committed>> commit_together(std::vector<Member> members);
  // commit() without a blocked thread: `done` gets the outcome on one of gRPC's threads (or on
  // this one), so it must not block.
  void commit_async(Member member, std::function<void(Result<Committed>)> done);

  struct Counts {
    uint64_t requests = 0;    // Txn requests sent
    uint64_t members = 0;     // commits made
    uint64_t batched = 0;     // of them, in a request with other members
    uint64_t refused = 0;     // batches refused by etcd and sent again member by member
    uint64_t kept_apart = 0;  // times a waiting member was left out of a batch for a conflict
    uint64_t under_way = 0;   // requests sent and not yet answered, now
  };
  Counts counts() const;

 private:
  struct Waiter;
  struct Pending;
  struct Request;
  // Takes the members of the next batch off the queue: the oldest, then each later one that
  // conflicts with none taken so far, within the limits.
  std::vector<Pending*> take_batch() KVQ_REQUIRES(mu_);
  // Queues `mine` and sends what may be sent; then, for members with a waiter, waits until
  // they are done.
  void enqueue(const std::vector<Pending*>& mine) KVQ_EXCLUDES(mu_);
  // Sends batches while may_send(), each asynchronously; the end of each sends the next.
  void pump() KVQ_REQUIRES(mu_);
  // Sends one batch; ended() records each member's outcome.
  void send(std::vector<Pending*> batch) KVQ_EXCLUDES(mu_);
  // Sends request->members[i] on its own; the last of a request's to end calls ended().
  void send_alone(const std::shared_ptr<Request>& request, size_t i) KVQ_EXCLUDES(mu_);
  void ended(Request& request) KVQ_EXCLUDES(mu_);
  // Whether the next batch may be sent now: while fewer than `in_flight` requests are under
  // way, and one more while all of them, and the next, are light.
  bool may_send() const KVQ_REQUIRES(mu_);

  // A request of at most this many members is light. Under light load (a few producers, each
  // waiting for its commit) a commit that waits for the request under way waits for a whole
  // Raft round it does not share; under heavy load (requests of several members) a second
  // request would split the batches and cost Raft rounds.
  static constexpr size_t kLightBatch = 1;

  std::shared_ptr<Client> client_;
  BatchLimits limits_;
  mutable util::Mutex mu_;
  std::deque<Pending*> queue_ KVQ_GUARDED_BY(mu_);
  size_t sending_ KVQ_GUARDED_BY(mu_) = 0;
  size_t heavy_sending_ KVQ_GUARDED_BY(mu_) = 0;  // of them, requests of more than kLightBatch
  Counts counts_ KVQ_GUARDED_BY(mu_);
};

}  // namespace kvq::kv::etcd
