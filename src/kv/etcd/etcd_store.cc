#include "kvq/etcd_store.h"

#include <thread>
#include <utility>

#include "kv/etcd/commit_batcher.h"
#include "kv/etcd/etcd_client.h"
#include "kv/etcd/etcd_transaction.h"
#include "kv/etcd/etcd_watch.h"
#include "util/thread_pool.h"

namespace kvq {
namespace {

// How many callbacks of a store are still to come (started, and not yet run to the end).
struct CallbackTally {
  util::Mutex mu;
  util::CondVar idle;
  size_t under_way KVQ_GUARDED_BY(mu) = 0;
};

// The pool whose task runs on this thread, if any.
thread_local const util::ThreadPool* running_pool = nullptr;

// Where a store's asynchronous transactions call back: a few threads of their own, counting
// the callbacks to come. Transactions hold it, and a callback's task holds a transaction, so
// the last reference may go on one of the pool's own threads (a store destroyed before the
// task ended: kv::run_async lets it go once `done` is called): the pool is then destroyed on a
// thread of its own, as a pool cannot join the thread that destroys it.
class StoreCallbacks : public kv::etcd::EtcdTransaction::Callbacks {
 public:
  // REQUIRES: threads > 0.
  explicit StoreCallbacks(size_t threads) : pool_(std::make_unique<util::ThreadPool>(threads)) {}
  ~StoreCallbacks() override {
    if (running_pool == pool_.get()) std::thread([pool = std::move(pool_)] {}).detach();
  }
  void started() override {
    util::MutexLock lock(tally_->mu);
    ++tally_->under_way;
  }
  void post(std::function<void()> task) override {
    // Uses nothing of this after the task: the task may have let go of the last reference.
    pool_->post([tally = tally_, pool = pool_.get(), task = std::move(task)]() mutable {
      running_pool = pool;
      std::exchange(task, nullptr)();  // what it holds goes too, before it counts as run
      running_pool = nullptr;
      util::MutexLock lock(tally->mu);
      if (--tally->under_way == 0) tally->idle.notify_all();
    });
  }
  bool wait_until_idle(kv::Clock::time_point deadline) {
    util::MutexLock lock(tally_->mu);
    while (tally_->under_way > 0) {
      if (!tally_->idle.wait_until(tally_->mu, deadline)) return tally_->under_way == 0;
    }
    return true;
  }

 private:
  std::shared_ptr<CallbackTally> tally_ = std::make_shared<CallbackTally>();
  std::unique_ptr<util::ThreadPool> pool_;
};

class EtcdStore : public kv::Store {
 public:
  explicit EtcdStore(std::shared_ptr<kv::etcd::Client> client)
      : client_(std::move(client)), hub_(std::make_shared<kv::etcd::WatchHub>(client_)) {
    const EtcdOptions& o = client_->options();
    if (o.group_commit) {
      batcher_ = std::make_shared<kv::etcd::CommitBatcher>(
          client_, kv::etcd::BatchLimits{.max_members = o.group_commit_max_members,
                                         .in_flight = o.group_commit_in_flight});
    }
    client_->set_fail_over_listener([hub = std::weak_ptr(hub_)](size_t left) {
      if (auto h = hub.lock()) h->left_endpoint(left);
    });
    callbacks_ = std::make_shared<StoreCallbacks>(o.callback_threads);
  }

  Result<std::unique_ptr<kv::Transaction>> begin() override {
    return std::unique_ptr<kv::Transaction>(std::make_unique<kv::etcd::EtcdTransaction>(
        client_, hub_, batcher_, remembered_, client_->options().serializable_first_reads,
        callbacks_));
  }

  bool replays_bodies() const override { return client_->options().async_transactions; }
  bool wait_for_callbacks(kv::Clock::time_point deadline) override {
    return callbacks_->wait_until_idle(deadline);
  }

  std::string describe() const override {
    std::string out = "etcd:";
    for (size_t i = 0; i < client_->options().endpoints.size(); ++i) {
      out += (i ? "," : "") + client_->options().endpoints[i];
    }
    if (!client_->prefix().empty()) out += " prefix '" + client_->prefix() + "'";
    return out;
  }

 private:
  std::shared_ptr<kv::etcd::Client> client_;
  std::shared_ptr<kv::etcd::WatchHub> hub_;
  std::shared_ptr<kv::etcd::CommitBatcher> batcher_;  // null without group_commit
  std::shared_ptr<kv::etcd::Remembered> remembered_ = std::make_shared<kv::etcd::Remembered>();
  // Where asynchronous transactions call back; last, so that it is destroyed first (unless a
  // transaction still holds it), running what was posted while the rest still stands.
  std::shared_ptr<StoreCallbacks> callbacks_;
};

}  // namespace

Result<EtcdOptions> parse_etcd_url(std::string_view url) {
  constexpr std::string_view kScheme = "etcd://";
  if (url.substr(0, kScheme.size()) != kScheme)
    return InvalidArgument("an etcd URL starts with etcd://");
  url.remove_prefix(kScheme.size());
  EtcdOptions options;
  if (auto slash = url.find('/'); slash != std::string_view::npos) {
    options.key_prefix = std::string(url.substr(slash + 1));
    url = url.substr(0, slash);
  }
  while (!url.empty()) {
    auto comma = url.find(',');
    auto endpoint = url.substr(0, comma);
    if (endpoint.find(':') == std::string_view::npos) {
      return InvalidArgument("etcd endpoint '" + std::string(endpoint) + "' needs host:port");
    }
    options.endpoints.emplace_back(endpoint);
    if (comma == std::string_view::npos) break;
    url.remove_prefix(comma + 1);
  }
  if (options.endpoints.empty()) return InvalidArgument("an etcd URL needs at least one host:port");
  return options;
}

Result<std::shared_ptr<kv::Store>> open_etcd_store(const EtcdOptions& options) {
  if (options.endpoints.empty()) return InvalidArgument("no etcd endpoints");
  if (options.request_timeout.count() <= 0)
    return InvalidArgument("request_timeout must be positive");
  if (options.member_check_after.count() <= 0 || options.member_check_timeout.count() <= 0) {
    return InvalidArgument("member_check_after and member_check_timeout must be positive");
  }
  if (options.group_commit &&
      (options.group_commit_in_flight == 0 || options.group_commit_max_members == 0)) {
    return InvalidArgument("group_commit_in_flight and group_commit_max_members must be positive");
  }
  if (options.callback_threads == 0) return InvalidArgument("callback_threads must be positive");
  if (options.username.empty() != options.password.empty()) {
    return InvalidArgument("etcd authentication needs both a username and a password");
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return InvalidArgument("a TLS client certificate needs both cert_file and key_file");
  }
  KVQ_ASSIGN_OR_RETURN(auto client, kv::etcd::Client::create(options));
  return std::shared_ptr<kv::Store>(std::make_shared<EtcdStore>(std::move(client)));
}

}  // namespace kvq
