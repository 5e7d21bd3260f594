// kv/etcd/etcd_client.h — the gRPC connection to an etcd cluster: one channel per endpoint,
// calls with a deadline, failover to the next endpoint when one is unreachable or stops
// answering (a paused member is found out in about member_check_after + member_check_timeout,
// not request_timeout), and the one mapping from gRPC statuses to kvq codes.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kvq/etcd_store.h"
#include "rpc.grpc.pb.h"
#include "util/mutex.h"

namespace kvq::kv::etcd {

// `commit`: the request may have been applied although its answer was lost.
Status from_grpc(const grpc::Status& status, bool commit);

class Client {
 public:
  Client(EtcdOptions options, std::shared_ptr<grpc::ChannelCredentials> credentials);
  // Waits for a leader check under way (at most member_check_timeout) and for every call to
  // have ended, its `done` called and gRPC done with its callback: they use this.
  ~Client();
  // Reads the TLS files; an error names the file.
  static Result<std::shared_ptr<Client>> create(EtcdOptions options);

  const EtcdOptions& options() const { return options_; }
  const std::string& prefix() const { return options_.key_prefix; }

  Status range(const etcdserverpb::RangeRequest& request, etcdserverpb::RangeResponse* response);
  // A failure of a Txn that writes may have applied it (kUnknownResult); one of reads only
  // applied nothing (kUnavailable).
  Status txn(const etcdserverpb::TxnRequest& request, etcdserverpb::TxnResponse* response);

  // range() and txn() without a blocked thread: the same attempts, failover and outcome, but
  // `done` gets the outcome on one of gRPC's threads (or this one, if no call could start), so
  // it must not block. REQUIRES: `request` and `response` stay alive until `done` is called.
  void range_async(const etcdserverpb::RangeRequest& request, etcdserverpb::RangeResponse* response,
                   std::function<void(Status)> done);
  void txn_async(const etcdserverpb::TxnRequest& request, etcdserverpb::TxnResponse* response,
                 std::function<void(Status)> done);

  // A channel for long-lived streams (watches), on `endpoint` (an index, as current() gives).
  std::shared_ptr<grpc::Channel> channel(size_t endpoint);
  // Adds the auth token (fetching one first if needed) to a call's metadata.
  Status authorize(grpc::ClientContext& context) KVQ_EXCLUDES(token_mu_);
  // Moves to the next endpoint after a failure on `index`'s (if it is still the current one),
  // then tells the listener, on the calling thread, which endpoint was left.
  void fail_over(size_t index) KVQ_EXCLUDES(listener_mu_);
  size_t current() const { return current_.load(); }
  void set_fail_over_listener(std::function<void(size_t left)> listener) KVQ_EXCLUDES(listener_mu_);

 private:
  // start(stub, context, done) starts one asynchronous call that ends by calling done(status).
  using Start = std::function<void(etcdserverpb::KV::Stub&, grpc::ClientContext&,
                                   std::function<void(grpc::Status)>)>;
  struct Call;
  // Makes a call (one attempt, or for a read one per endpoint at most) and passes its outcome
  // to `done`; `commit`: a lost answer leaves it kUnknownResult. Never blocks.
  void call_async(bool commit, Start start, std::function<void(Status)> done)
      KVQ_EXCLUDES(calls_mu_);
  // call_async of a Txn or Range (stub.async()->*method) whose answer goes to `response`;
  // `done` gets the outcome once the response's raft term is noted (saw_term).
  template <typename Request, typename Response, typename Method>
  void call_async(bool commit, Method method, const Request& request, Response* response,
                  std::function<void(Status)> done) KVQ_EXCLUDES(calls_mu_);
  // Starts the next attempt of `call`, on the current endpoint.
  void start_attempt(const std::shared_ptr<Call>& call) KVQ_EXCLUDES(calls_mu_);
  // What to do once an attempt ended with `status`: the call's outcome, or another attempt.
  void attempt_ended(const std::shared_ptr<Call>& call, const grpc::Status& status)
      KVQ_EXCLUDES(calls_mu_);
  void finish(const std::shared_ptr<Call>& call, Status outcome) KVQ_EXCLUDES(calls_mu_);
  // The thread that checks the member of each call unanswered after member_check_after, and
  // cancels the call if the member is silent or the cluster has a new leader since.
  void watch_calls() KVQ_EXCLUDES(calls_mu_);
  // What a check of the member that holds a slow call found (check()).
  enum class Check {
    kAlive,      // it answered, and the cluster has the leader it had when the call was sent
    kSilent,     // no answer within member_check_timeout: paused, dead or cut off
    kNewLeader,  // it answered in a raft term after the call's: the cluster elected a leader
  };
  // Asks member `index` a tiny linearizable read within member_check_timeout, for a call sent
  // when the newest raft term seen was `term` (0: none seen yet).
  Check check(size_t index, std::chrono::system_clock::time_point deadline, uint64_t term);
  // A response carried raft term `term`.
  void saw_term(uint64_t term);
  // Starts, unless one is under way or the last is recent (leader_check_period), an asking of
  // every endpoint for its status; the endpoint that answers that it leads becomes current.
  // `now`: ask even if the last asking is recent (after a failover). Never blocks.
  void check_leader(bool now) KVQ_EXCLUDES(leader_mu_);

  Status authenticate(size_t index) KVQ_EXCLUDES(token_mu_);

  EtcdOptions options_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  util::Mutex token_mu_;
  std::string token_ KVQ_GUARDED_BY(token_mu_);
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<etcdserverpb::KV::Stub>> kv_;
  std::vector<std::unique_ptr<etcdserverpb::Maintenance::Stub>> maintenance_;
  std::atomic<size_t> current_{0};
  std::atomic<uint64_t> raft_term_{0};  // the newest raft term any response carried
  // The leader check (check_leader): whether one is under way, and when the last started.
  util::Mutex leader_mu_;
  bool leader_check_running_ KVQ_GUARDED_BY(leader_mu_) = false;
  util::CondVar leader_check_done_;
  std::optional<std::chrono::steady_clock::time_point> leader_checked_at_
      KVQ_GUARDED_BY(leader_mu_);
  std::vector<std::thread> leader_threads_ KVQ_GUARDED_BY(leader_mu_);  // joined before reuse
  util::Mutex listener_mu_;
  std::function<void(size_t)> listener_ KVQ_GUARDED_BY(listener_mu_);
  // How many Call objects live (~Client waits for none: see Call).
  class LiveCount {
   public:
    void add() KVQ_EXCLUDES(mu_) {
      util::MutexLock lock(mu_);
      ++n_;
    }
    void done() KVQ_EXCLUDES(mu_) {
      util::MutexLock lock(mu_);
      if (--n_ == 0) none_.notify_all();
    }
    void wait_none() KVQ_EXCLUDES(mu_) {
      util::MutexLock lock(mu_);
      while (n_ > 0) none_.wait(mu_);
    }

   private:
    util::Mutex mu_;
    util::CondVar none_;
    size_t n_ KVQ_GUARDED_BY(mu_) = 0;
  };
  LiveCount live_calls_;
  // The calls under way, for watch_calls.
  util::Mutex calls_mu_;
  util::CondVar calls_changed_;
  std::set<std::shared_ptr<Call>> calls_ KVQ_GUARDED_BY(calls_mu_);
  bool stopping_ KVQ_GUARDED_BY(calls_mu_) = false;
  // When watch_calls wakes next by itself (max: not before it is told; min: it is awake).
  std::chrono::steady_clock::time_point watcher_wakes_at_ KVQ_GUARDED_BY(calls_mu_) =
      std::chrono::steady_clock::time_point::min();
  std::thread call_watcher_;
};

}  // namespace kvq::kv::etcd
