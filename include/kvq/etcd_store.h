// kvq/etcd_store.h — the distributed backend: a kv::Store on an etcd v3 cluster (Raft-
// replicated), so kvq processes on many machines share one store.
//
// How the kv contract maps onto etcd:
//   * A transaction reads at one etcd revision (fixed by its first read); that revision is its
//     read version, and a commit's revision its committed version.
//   * Writes are buffered and committed as one etcd Txn whose compares check every key read
//     without snapshot: a present key by equality of the mod_revision it was read with, an
//     absent key by version == 0. A non-snapshot range read adds, for the part of the range it
//     covered, "every key's mod_revision is at most the read revision" (insertions and changes)
//     plus a compare per key it saw (deletions). A failed compare is kAborted.
//   * Watches are etcd watches from the read revision + 1, multiplexed over one stream per
//     store (with the `hasleader` metadata, so a member cut off from its leader does not stall
//     them). If etcd compacted the needed history, the key is re-read instead: a change is
//     never missed.
//   * Every key is stored under `key_prefix`, so deployments can share a cluster.
//   * Errors: a dropped connection, a member without a leader, or one that stops answering
//     (paused: see member_check_after) is left for the next endpoint — a read is sent there at
//     once, and kUnavailable comes back only when no endpoint answered within request_timeout;
//     a commit whose answer was lost is kUnknownResult, never re-sent by the store. Watches move
//     to the next endpoint with the calls.
//
// Limits etcd imposes, which kvq's own limits stay under: 1 MiB values (etcd caps requests
// near 1.5 MiB), and the number of compares and operations in one Txn (`--max-txn-ops`,
// default 128: run etcd with a larger value, see docs/operations.md).
//
// Thread-safety: the returned Store is thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kvq/kv.h"

namespace kvq {

struct EtcdOptions {
  std::vector<std::string> endpoints;  // "host:port" of the members' client URLs
  std::string key_prefix;              // every key kvq writes starts with this
  // The most one call waits for etcd, across members (a commit waits on one member only).
  std::chrono::milliseconds request_timeout{5000};
  // A call without an answer after member_check_after makes kvq ask the same member a tiny
  // linearizable read, allowed member_check_timeout. No answer to that either: the member is
  // taken for paused, dead or cut off from its quorum, and left for the next endpoint — a read
  // is sent there at once, a commit ends kUnknownResult (it may have applied, so it is never
  // sent again as if it had not). A paused member thus costs a call about 1 s with these
  // defaults, not request_timeout. An answer: the member is alive, and the slow call is
  // awaited up to request_timeout — unless the answer comes in a later raft term than the call
  // was sent in: the cluster elected a new leader meanwhile, and a member that forwarded the
  // call to the old one may never answer it, so it is given up as above.
  std::chrono::milliseconds member_check_after{500};
  std::chrono::milliseconds member_check_timeout{500};
  // TLS: set ca_file to talk TLS (verifying the members against that CA); cert_file and
  // key_file add a client certificate for etcd's --client-cert-auth.
  std::string ca_file, cert_file, key_file;
  // etcd authentication (etcdctl auth enable): the token is fetched at first use and renewed
  // when etcd says it expired.
  std::string username, password;
  // Send calls to the Raft leader: a follower forwards every write to it, which cost a third of
  // the commit rate when measured (docs/operations.md). kvq asks every endpoint for its status
  // (Maintenance.Status, answered without a quorum round) at the first call, every
  // leader_check_period after, and after each failover, and moves its calls — never its
  // watches, which any member serves — to the endpoint that says it leads. The asking never
  // holds up a call. false: calls go to the endpoints in the order given, moving on only when
  // one fails.
  bool prefer_leader = true;
  std::chrono::milliseconds leader_check_period{5000};
  // Group commit: commits made at the same time by this process go to etcd as one Txn of
  // nested Txns (one Raft round and one apply for all), never two that conflict in one (a
  // member's compares are judged before any member's writes, so kvq keeps apart commits where
  // one writes what another compared or wrote). A commit with nothing else waiting goes at once.
  // At most group_commit_in_flight requests are under way at a time, and one more while every
  // request under way holds a single commit and a single commit waits (light load: it would
  // wait for a Raft round it does not share); the others' commits wait for the next. Batches hold
  // at most group_commit_max_members commits and stay within etcd's default --max-txn-ops (128) and
  // --max-request-bytes (1.5 MiB); a request etcd refuses anyway (a cluster with lower limits) is
  // sent again commit by commit. false: each commit is its own Txn.
  bool group_commit = true;
  size_t group_commit_in_flight = 1;
  size_t group_commit_max_members = 64;
  // The first read of a transaction that allowed it (kv::Transaction::allow_stale_reads: the
  // jobs layer's adds, accepts that wait, and a worker's finish, fail, snooze and heartbeat) is
  // served by the member kvq talks to from what it has applied, without etcd's ReadIndex round
  // with a quorum ("serializable"). Its commit's compares still hold every key and range it read
  // to what it saw, so a read that was behind (a new leader still applying) fails the commit
  // and the transaction starts over. false: every first read is linearizable. (A transaction's
  // later reads are serializable either way: they read at the first one's revision.)
  bool serializable_first_reads = true;
  // kv::run_async (the jobs layer's *_async calls, which kvq serve's routes make) holds no
  // thread while etcd answers: each read a transaction's body makes that etcd must answer is
  // noted instead, fetched in one round trip with the others of that run, and the body runs
  // again on what was fetched (kv::Store::replays_bodies); the commit goes out asynchronously.
  // The runs after the first come on callback_threads threads of the store's. false:
  // kv::run_async blocks its thread as kv::run does.
  bool async_transactions = true;
  // Where kv::Transaction::commit_async (and so kv::run_async) calls back, either way.
  size_t callback_threads = 4;
};

// Parses "etcd://host:port,host:port[/prefix]" into options.
Result<EtcdOptions> parse_etcd_url(std::string_view url);

// Connects lazily: opening succeeds even when no member is reachable yet.
Result<std::shared_ptr<kv::Store>> open_etcd_store(const EtcdOptions& options);

}  // namespace kvq
