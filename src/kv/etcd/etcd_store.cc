#include "kvq/etcd_store.h"
#include "kv/etcd/commit_batcher.h"
#include "kv/etcd/etcd_client.h"
#include "kv/etcd/etcd_transaction.h"
#include "kv/etcd/etcd_watch.h"
#include "util/thread_pool.h"

namespace kvq {
namespace {

// Where a store's asynchronous transactions call back: a few threads of their own (or, with
// async_transactions off, the thread that completed the call), counting the callbacks to come.
class StoreCallbacks : public kv::etcd::EtcdTransaction::Callbacks {
 public:
  explicit StoreCallbacks(size_t threads) {
    if (threads > 0) pool_ = std::make_unique<util::ThreadPool>(threads);
  }
  void started() override {
    util::MutexLock lock(mu_);
    ++under_way_;
  }
  void post(std::function<void()> task) override {
    auto run = [this, task = std::move(task)] {
      task();
      util::MutexLock lock(mu_);
      if (--under_way_ == 0) idle_.notify_all();
    };
    if (pool_) return pool_->post(std::move(run));
    run();
  }
  bool wait_until_idle(kv::Clock::time_point deadline) {
    util::MutexLock lock(mu_);
    while (under_way_ > 0) {
      if (!idle_.wait_until(mu_, deadline)) return under_way_ == 0;
    }
    return true;
  }

 private:
  util::Mutex mu_;
  util::CondVar idle_;
  size_t under_way_ KVQ_GUARDED_BY(mu_) = 0;
  std::unique_ptr<util::ThreadPool> pool_;  // last: joined first, its tasks run
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
    callbacks_ = std::make_shared<StoreCallbacks>(o.async_transactions ? o.callback_threads : 0);
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
  if (options.async_transactions && options.callback_threads == 0)
    return InvalidArgument("callback_threads must be positive for async_transactions");
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
