#include "kv/etcd/etcd_client.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "util/atomic_max.h"

namespace kvq::kv::etcd {

Status from_grpc(const grpc::Status& status, bool commit) {
  const std::string message = "etcd: " + status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::OK: return Status::OK();
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
      // The request was sent; for a commit nobody can say whether it applied.
      return commit ? UnknownResult(message) : Unavailable(message);
    case grpc::StatusCode::OUT_OF_RANGE:
      // Both are about the transaction's read revision: compacted away, or (a serializable
      // read) not yet applied by the member asked.
      if (status.error_message().find("future revision") != std::string::npos)
        return Aborted(message +
                       " (the member is behind the read revision; retry the transaction)");
      return Aborted(message + " (the read revision was compacted; retry the transaction)");
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION: return InvalidArgument(message);
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return ResourceExhausted(message);
    default: return Unavailable(message);
  }
}

namespace {

// The outcome of a call, for a thread that waits for it.
struct Outcome {
  util::Mutex mu;
  util::CondVar cv;
  bool done KVQ_GUARDED_BY(mu) = false;
  Status status KVQ_GUARDED_BY(mu);

  void complete(Status s) KVQ_EXCLUDES(mu) {
    util::MutexLock lock(mu);
    status = std::move(s);
    done = true;
    cv.notify_all();
  }
  Status wait() KVQ_EXCLUDES(mu) {
    util::MutexLock lock(mu);
    while (!done) cv.wait(mu);
    return status;
  }
};

// A code that says the member did not answer: its connection is gone, it has no leader, or
// the call ran out of time.
bool unreachable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Result<std::shared_ptr<Client>> Client::create(EtcdOptions options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.ca_file.empty() || !options.cert_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_file.empty()) {
      KVQ_ASSIGN_OR_RETURN(ssl.pem_root_certs, read_file(options.ca_file));
    }
    if (!options.cert_file.empty()) {
      KVQ_ASSIGN_OR_RETURN(ssl.pem_cert_chain, read_file(options.cert_file));
      KVQ_ASSIGN_OR_RETURN(ssl.pem_private_key, read_file(options.key_file));
    }
    credentials = grpc::SslCredentials(ssl);
  }
  return std::make_shared<Client>(std::move(options), std::move(credentials));
}

Client::Client(EtcdOptions options, std::shared_ptr<grpc::ChannelCredentials> credentials)
    : options_(std::move(options)), credentials_(std::move(credentials)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 * 1024 * 1024);  // gRPC's 4 MiB default is below large ranges
  // A backstop for a connection that went silent while no call checks it (an idle watch
  // stream): pings every 10 s, which etcd's default --grpc-keepalive-min-time (5 s) allows;
  // faster ones it answers with GOAWAY "too_many_pings". Calls are checked faster, by
  // watch_calls.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2'000);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  for (const auto& endpoint : options_.endpoints) {
    auto channel = grpc::CreateCustomChannel(endpoint, credentials_, args);
    kv_.push_back(etcdserverpb::KV::NewStub(channel));
    maintenance_.push_back(etcdserverpb::Maintenance::NewStub(channel));
    channels_.push_back(std::move(channel));
  }
  call_watcher_ = std::thread([this] { watch_calls(); });
}

Client::~Client() {
  {
    util::MutexLock lock(calls_mu_);
    while (!calls_.empty()) calls_changed_.wait(calls_mu_);
    stopping_ = true;
    calls_changed_.notify_all();
  }
  call_watcher_.join();  // it lets go of the calls it holds
  live_calls_.wait_none();
  std::vector<std::thread> threads;
  {
    util::MutexLock lock(leader_mu_);
    while (leader_check_running_) leader_check_done_.wait(leader_mu_);
    threads.swap(leader_threads_);
  }
  for (auto& thread : threads) thread.join();
}

std::shared_ptr<grpc::Channel> Client::channel(size_t endpoint) {
  return channels_[endpoint % channels_.size()];
}

void Client::fail_over(size_t index) {
  size_t expected = index;
  if (!current_.compare_exchange_strong(expected, (index + 1) % channels_.size())) return;
  check_leader(true);  // the next endpoint may not lead: a new leader may have been elected
  std::function<void(size_t)> listener;
  {
    util::MutexLock lock(listener_mu_);
    listener = listener_;
  }
  if (listener) listener(index);
}

void Client::set_fail_over_listener(std::function<void(size_t)> listener) {
  util::MutexLock lock(listener_mu_);
  listener_ = std::move(listener);
}

Client::Check Client::check(size_t index, std::chrono::system_clock::time_point deadline,
                            uint64_t term) {
  grpc::ClientContext context;
  context.set_deadline(
      std::min(deadline, std::chrono::system_clock::now() + options_.member_check_timeout));
  if (!authorize(context).ok()) return Check::kAlive;  // cannot tell; let the call run its course
  // The read read_version makes: linearizable, so a member cut off from its quorum fails it too.
  etcdserverpb::RangeRequest request;
  request.set_key(options_.key_prefix + "\x01");
  request.set_count_only(true);
  etcdserverpb::RangeResponse response;
  const grpc::Status status = kv_[index]->Range(&context, request, &response);
  if (unreachable(status.error_code())) return Check::kSilent;
  if (!status.ok()) return Check::kAlive;
  saw_term(response.header().raft_term());
  return term != 0 && response.header().raft_term() > term ? Check::kNewLeader : Check::kAlive;
}

void Client::saw_term(uint64_t term) { util::raise_to(raft_term_, term); }

void Client::check_leader(bool now) {
  if (!options_.prefer_leader || channels_.size() < 2) return;
  std::vector<std::thread> finished;
  {
    util::MutexLock lock(leader_mu_);
    const auto at = std::chrono::steady_clock::now();
    if (leader_check_running_) return;
    if (!now && leader_checked_at_ && at - *leader_checked_at_ < options_.leader_check_period)
      return;
    leader_check_running_ = true;
    leader_checked_at_ = at;
    finished.swap(leader_threads_);
  }
  // The last check's threads have all answered (it is not running); they are ending.
  for (auto& thread : finished) thread.join();
  // One thread per endpoint, each with a synchronous call whose context lives on its stack:
  // joined before the next check starts them again and in ~Client, so no call of a check
  // outlives the Client. (It used gRPC's callback API at first, with the calls' contexts
  // shared by the callbacks and freed by the last of them; in one full test run gRPC 1.51
  // aborted in the test of this check on a reference count, "assertion failed: prior > 0".
  // The likeliest cause: that last callback still running while ~Client, released by it,
  // destroyed the stubs and channels. Threads that are joined leave no such window.)
  std::vector<std::thread> threads;
  auto left = std::make_shared<std::atomic<size_t>>(channels_.size());
  for (size_t i = 0; i < channels_.size(); ++i) {
    threads.emplace_back([this, left, i] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + options_.member_check_timeout);
      // Without a token now, this endpoint's answer is missed; the next check asks again.
      if (authorize(context).ok()) {
        etcdserverpb::StatusRequest request;
        etcdserverpb::StatusResponse response;
        grpc::Status status = maintenance_[i]->Status(&context, request, &response);
        // A member that leads names itself: the leader's id is its own member id.
        if (status.ok() && response.leader() != 0 &&
            response.leader() == response.header().member_id()) {
          current_.store(i);
        }
      }
      if (left->fetch_sub(1) == 1) {
        util::MutexLock lock(leader_mu_);
        leader_check_running_ = false;
        leader_check_done_.notify_all();
      }
    });
  }
  util::MutexLock lock(leader_mu_);
  for (auto& thread : threads) leader_threads_.push_back(std::move(thread));
}

Status Client::authenticate(size_t index) {
  auto stub = etcdserverpb::Auth::NewStub(channels_[index]);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options_.request_timeout);
  etcdserverpb::AuthenticateRequest request;
  request.set_name(options_.username);
  request.set_password(options_.password);
  etcdserverpb::AuthenticateResponse response;
  grpc::Status status = stub->Authenticate(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
      status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
    return FailedPrecondition("etcd refused user '" + options_.username +
                              "': " + status.error_message());
  }
  if (!status.ok()) return from_grpc(status, false);
  util::MutexLock lock(token_mu_);
  token_ = response.token();
  return Status::OK();
}

Status Client::authorize(grpc::ClientContext& context) {
  if (options_.username.empty()) return Status::OK();
  std::string token;
  {
    util::MutexLock lock(token_mu_);
    token = token_;
  }
  if (token.empty()) {
    KVQ_RETURN_IF_ERROR(authenticate(current_.load() % channels_.size()));
    util::MutexLock lock(token_mu_);
    token = token_;
  }
  context.AddMetadata("token", token);
  return Status::OK();
}

// One call: its attempts (one for a commit, at most one per endpoint for a read), the current
// one's member and context, and what the check of that member found.
struct Client::Call {
  explicit Call(Client* c) : client(c) { client->live_calls_.add(); }
  // Last, after gRPC has let go of the call's callback (which holds this) and the contexts are
  // gone: only then may ~Client destroy the channels. gRPC 1.51 aborted on a reference count
  // ("assertion failed: prior > 0") when a Client went while a call's callback was still
  // returning into gRPC (seen once in a full test run, in a batcher test's teardown).
  ~Call() {
    contexts.clear();
    client->live_calls_.done();
  }
  Client* client;
  bool commit = false;
  Start start;
  std::function<void(Status)> done;
  std::chrono::system_clock::time_point deadline;
  size_t tried = 0;  // attempts started
  // The current attempt's, guarded by calls_mu_ once it started.
  size_t index = 0;
  uint64_t term = 0;
  std::chrono::steady_clock::time_point check_at;
  // Its member was checked (once per attempt), or no attempt has started: nothing to check.
  bool checked = true;
  Check found = Check::kAlive;
  bool given_up = false;  // cancelled after the check
  // Every attempt's context: gRPC may still use one while the next attempt starts.
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  Status result = Unavailable("etcd: no endpoint");
};

// Each attempt is given member_check_after for its answer; then watch_calls asks the member a
// tiny read of its own. A member that answers that is alive and merely slow: the call is
// awaited until request_timeout. One that does not (paused, dead, cut off from its quorum) has
// the call cancelled: a read is sent again at once to the next endpoint, within the same
// deadline; a commit is never sent again here — it may have applied, so it ends
// kUnknownResult and the caller's retry (kv::run, which re-reads first) decides. The next call
// starts on the next endpoint either way. A member that answers in a later raft term than the
// call was sent in has the call cancelled too: a follower forwards writes (and asks for read
// indexes) to the leader it knew, and when that leader is gone (paused, dead) the request is
// lost — etcd answers it only after its own request timeout, 7 s by default, or once the old
// leader resumes. Seen on a 3-member cluster with the leader paused for 3 s: an add waited 3 to
// 6 s where the election took about 1.5 s.
void Client::call_async(bool commit, Start start, std::function<void(Status)> done) {
  auto call = std::make_shared<Call>(this);
  call->commit = commit;
  call->start = std::move(start);
  call->done = std::move(done);
  call->deadline = std::chrono::system_clock::now() + options_.request_timeout;
  check_leader(false);
  {
    util::MutexLock lock(calls_mu_);
    calls_.insert(call);
  }
  start_attempt(call);
}

void Client::start_attempt(const std::shared_ptr<Call>& call) {
  const size_t index = current_.load() % channels_.size();
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(call->deadline);
  if (Status authorized = authorize(*context); !authorized.ok()) return finish(call, authorized);
  grpc::ClientContext* started = context.get();
  {
    util::MutexLock lock(calls_mu_);
    ++call->tried;
    call->index = index;
    call->term = raft_term_.load(std::memory_order_relaxed);
    call->check_at = std::chrono::steady_clock::now() + options_.member_check_after;
    call->checked = false;
    call->found = Check::kAlive;
    call->given_up = false;
    call->contexts.push_back(std::move(context));
    // Woken only if it would sleep past this check: under load it is not (every call's check
    // comes member_check_after after its start), and a wake-up per call cost a context switch.
    if (call->check_at < watcher_wakes_at_) calls_changed_.notify_all();
  }
  call->start(*kv_[index], *started,
              [this, call](grpc::Status status) { attempt_ended(call, status); });
}

void Client::attempt_ended(const std::shared_ptr<Call>& call, const grpc::Status& status) {
  size_t index;
  uint64_t term;
  Check found;
  bool given_up;
  {
    util::MutexLock lock(calls_mu_);
    index = call->index;
    term = call->term;
    found = call->found;
    given_up = call->given_up;
  }
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    // The token expired (etcd's simple tokens do): fetch another on the next call.
    {
      util::MutexLock lock(token_mu_);
      token_.clear();
    }
    return finish(call, Unavailable("etcd: " + status.error_message() + " (re-authenticating)"));
  }
  // An answer that came despite the cancellation stands.
  given_up = given_up && status.error_code() == grpc::StatusCode::CANCELLED;
  if (!given_up && !unreachable(status.error_code()))
    return finish(call, from_grpc(status, call->commit));
  fail_over(index);
  const std::string member = "member " + options_.endpoints[index];
  const std::string why =
      found == Check::kNewLeader
          ? member + " held the call while the cluster elected a new leader (raft term " +
                std::to_string(term) + " before); what it forwarded to the old one may be lost"
          : member + " answered neither the call in " +
                std::to_string(options_.member_check_after.count()) + " ms nor a check of it in " +
                std::to_string(options_.member_check_timeout.count()) + " ms";
  call->result = given_up
                     ? from_grpc(grpc::Status(grpc::StatusCode::UNAVAILABLE, why), call->commit)
                     : from_grpc(status, call->commit);
  if (call->commit || call->tried >= channels_.size() ||
      std::chrono::system_clock::now() >= call->deadline)
    return finish(call, call->result);
  start_attempt(call);
}

void Client::finish(const std::shared_ptr<Call>& call, Status outcome) {
  // Out of calls_ first: `done` may let the caller destroy this Client (~Client waits for calls_
  // to empty), and it must run last.
  auto done = std::move(call->done);
  {
    util::MutexLock lock(calls_mu_);
    calls_.erase(call);
    if (calls_.empty()) calls_changed_.notify_all();  // ~Client may wait for that
  }
  done(std::move(outcome));
}

void Client::watch_calls() {
  util::MutexLock lock(calls_mu_);
  for (;;) {
    if (stopping_) return;  // ~Client, once no call is under way
    const auto now = std::chrono::steady_clock::now();
    std::optional<std::chrono::steady_clock::time_point> next;
    // The calls due for a check, with the attempt each was on, by member: one check of a member
    // answers for every call waiting on it (a paused member holds them all).
    std::map<size_t, std::vector<std::pair<std::shared_ptr<Call>, size_t>>> due;
    std::map<size_t, uint64_t> terms;  // the oldest raft term a due call on a member was sent in
    for (const auto& call : calls_) {
      if (call->checked) continue;
      if (call->check_at > now) {
        if (!next || call->check_at < *next) next = call->check_at;
        continue;
      }
      call->checked = true;
      due[call->index].emplace_back(call, call->tried);
      auto [term, first] = terms.try_emplace(call->index, call->term);
      if (!first) term->second = std::min(term->second, call->term);
    }
    if (due.empty()) {
      watcher_wakes_at_ = next.value_or(std::chrono::steady_clock::time_point::max());
      if (next) {
        calls_changed_.wait_until(calls_mu_, *next);
      } else {
        calls_changed_.wait(calls_mu_);
      }
      continue;
    }
    watcher_wakes_at_ = std::chrono::steady_clock::time_point::min();  // busy: sees new calls
    // Checked outside the lock (each waits up to member_check_timeout); a call may end
    // meanwhile, or move on to its next attempt, whose check is its own.
    lock.unlock();
    std::map<size_t, Check> found;
    for (const auto& [index, calls] : due) {
      auto deadline = calls.front().first->deadline;
      for (const auto& [call, tried] : calls) deadline = std::max(deadline, call->deadline);
      found[index] = check(index, deadline, terms[index]);
    }
    lock.lock();
    for (const auto& [index, calls] : due) {
      if (found[index] == Check::kAlive) continue;
      for (const auto& [call, tried] : calls) {
        if (call->tried != tried || !calls_.count(call)) continue;
        call->found = found[index];
        call->given_up = true;
        call->contexts.back()->TryCancel();
      }
    }
  }
}

template <typename Request, typename Response, typename Method>
void Client::call_async(bool commit, Method method, const Request& request, Response* response,
                        std::function<void(Status)> done) {
  call_async(
      commit,
      [method, &request, response](etcdserverpb::KV::Stub& stub, grpc::ClientContext& context,
                                   std::function<void(grpc::Status)> ended) {
        (stub.async()->*method)(&context, &request, response, std::move(ended));
      },
      [this, response, done = std::move(done)](Status status) {
        if (status.ok()) saw_term(response->header().raft_term());
        done(std::move(status));
      });
}

namespace {

// Waits for the outcome that `start(done)` passes to `done`.
template <typename Start>
Status waited(Start start) {
  auto outcome = std::make_shared<Outcome>();
  start([outcome](Status s) { outcome->complete(std::move(s)); });
  return outcome->wait();
}

using AsyncKV = etcdserverpb::KV::StubInterface::async_interface;
using RangeCall = void (AsyncKV::*)(grpc::ClientContext*, const etcdserverpb::RangeRequest*,
                                    etcdserverpb::RangeResponse*,
                                    std::function<void(grpc::Status)>);
using TxnCall = void (AsyncKV::*)(grpc::ClientContext*, const etcdserverpb::TxnRequest*,
                                  etcdserverpb::TxnResponse*, std::function<void(grpc::Status)>);

}  // namespace

Status Client::range(const etcdserverpb::RangeRequest& request,
                     etcdserverpb::RangeResponse* response) {
  return waited([&](auto done) { range_async(request, response, std::move(done)); });
}

Status Client::txn(const etcdserverpb::TxnRequest& request, etcdserverpb::TxnResponse* response) {
  return waited([&](auto done) { txn_async(request, response, std::move(done)); });
}

void Client::range_async(const etcdserverpb::RangeRequest& request,
                         etcdserverpb::RangeResponse* response, std::function<void(Status)> done) {
  call_async(false, static_cast<RangeCall>(&AsyncKV::Range), request, response, std::move(done));
}

void Client::txn_async(const etcdserverpb::TxnRequest& request, etcdserverpb::TxnResponse* response,
                       std::function<void(Status)> done) {
  auto writes = [](const auto& ops) {
    return std::any_of(ops.begin(), ops.end(),
                       [](const etcdserverpb::RequestOp& op) { return !op.has_request_range(); });
  };
  const bool commit = writes(request.success()) || writes(request.failure());
  call_async(commit, static_cast<TxnCall>(&AsyncKV::Txn), request, response, std::move(done));
}

}  // namespace kvq::kv::etcd
