// Workers: registration, membership reads and subscriptions, over the Core and its loops.
#include "kvq/workers.h"

#include "util/secret.h"
#include "workers/health_monitor.h"
#include "workers/heartbeater.h"
#include "workers/membership_notifier.h"
#include "workers/workers_impl.h"

namespace kvq::workers {

RegistrationImpl::~RegistrationImpl() { unregister().ignore(); }

// A handle's token held the worker once, so a token the row no longer knows at all (taken over
// twice since) means taken over too, not a wrong token.
Status RegistrationImpl::unregister() {
  if (unregistered_.exchange(true) || lost_.load()) return Status::OK();
  Status s = kv::run(
      *core_->store,
      [&](kv::Transaction& txn) { return core_->registry.leave(txn, type_, id_, token_); },
      core_->options.retry);
  return s.code() == Code::kPermissionDenied ? Status::OK() : s;
}

Status RegistrationImpl::heartbeat() {
  if (lost_.load()) return FailedPrecondition("worker '" + id_ + "' was lost");
  if (unregistered_.load()) return FailedPrecondition("worker '" + id_ + "' has unregistered");
  Status s = kv::run(
      *core_->store,
      [&](kv::Transaction& txn) { return core_->registry.beat(txn, type_, id_, token_); },
      core_->options.retry);
  if (s.code() == Code::kPermissionDenied) {
    s = FailedPrecondition("worker '" + id_ + "' was taken over by another registration");
  }
  if (s.code() == Code::kFailedPrecondition) lost_ = true;
  if (s.ok()) core_->heartbeats.fetch_add(1);
  return s;
}

Status RegistrationImpl::heartbeat_all(
    const std::vector<std::shared_ptr<RegistrationImpl>>& batch) {
  if (batch.empty()) return Status::OK();
  Core& core = *batch.front()->core_;
  std::vector<RegistrationImpl*> lost;
  Status s = kv::run(
      *core.store,
      [&](kv::Transaction& txn) -> Status {
        lost.clear();
        for (const auto& r : batch) {
          Status beat = core.registry.beat(txn, r->type_, r->id_, r->token_);
          if (beat.code() == Code::kFailedPrecondition || beat.code() == Code::kPermissionDenied) {
            lost.push_back(r.get());  // it wrote nothing; the others still commit
          } else if (!beat.ok()) {
            return beat;
          }
        }
        return Status::OK();
      },
      core.options.retry);
  if (!s.ok()) return s;
  for (auto* r : lost) r->lost_ = true;
  core.heartbeats.fetch_add(batch.size() - lost.size());
  return Status::OK();
}

namespace {

class WorkersImpl : public Workers {
 public:
  explicit WorkersImpl(std::shared_ptr<Core> core) : core_(std::move(core)) {
    notifier_ = std::make_unique<MembershipNotifier>(core_);
    if (core_->options.run_health_monitor) monitor_ = std::make_unique<HealthMonitor>(core_);
  }

  Result<std::shared_ptr<Registration>> register_worker(std::string_view type, std::string_view id,
                                                        const RegisterOptions& options) override {
    KVQ_ASSIGN_OR_RETURN(RegisterOptions checked, check(type, id, options));
    const std::pair<std::string, std::string> name{std::string(type), std::string(id)};
    // Serialised per Workers, so registering one id from two threads yields one registration.
    util::MutexLock lock(register_mu_);
    {
      util::MutexLock held(core_->mu);
      if (auto existing = core_->held[name].lock(); existing && existing->active()) {
        return std::shared_ptr<Registration>(existing);
      }
    }
    KVQ_ASSIGN_OR_RETURN(std::string token, join(name.first, name.second, checked));
    auto registration = std::make_shared<RegistrationImpl>(core_, name.first, name.second, token,
                                                           options.health_timeout);
    {
      util::MutexLock held(core_->mu);
      core_->held[name] = registration;
    }
    heartbeater_.add(registration);
    return std::shared_ptr<Registration>(registration);
  }

  Result<std::string> register_remote(std::string_view type, std::string_view id,
                                      const RegisterOptions& options) override {
    KVQ_ASSIGN_OR_RETURN(RegisterOptions checked, check(type, id, options));
    return join(std::string(type), std::string(id), checked);
  }

  Status heartbeat(std::string_view type, std::string_view id, std::string_view token) override {
    KVQ_RETURN_IF_ERROR(validate_worker_type(type));
    KVQ_RETURN_IF_ERROR(validate_worker_id(id));
    const std::string t(type), i(id), k(token);
    Status s = kv::run(
        *core_->store, [&](kv::Transaction& txn) { return core_->registry.beat(txn, t, i, k); },
        core_->options.retry);
    if (s.ok()) core_->heartbeats.fetch_add(1);
    return s;
  }

  Status unregister(std::string_view type, std::string_view id, std::string_view token) override {
    KVQ_RETURN_IF_ERROR(validate_worker_type(type));
    KVQ_RETURN_IF_ERROR(validate_worker_id(id));
    const std::string t(type), i(id), k(token);
    return kv::run(
        *core_->store, [&](kv::Transaction& txn) { return core_->registry.leave(txn, t, i, k); },
        core_->options.retry);
  }

  Result<Membership> workers(std::string_view type) override {
    KVQ_RETURN_IF_ERROR(validate_worker_type(type));
    return kv::run(
        *core_->store, [&](kv::Transaction& txn) { return core_->registry.read(txn, type, false); },
        core_->options.retry);
  }

  Result<std::vector<std::string>> types() override {
    return kv::run(
        *core_->store, [&](kv::Transaction& txn) { return core_->registry.types(txn, true); },
        core_->options.retry);
  }

  Result<std::unique_ptr<MembershipSubscription>> subscribe(
      std::string_view type, std::function<void(const Membership&)> callback) override {
    KVQ_RETURN_IF_ERROR(validate_worker_type(type));
    if (!callback) return InvalidArgument("subscribe needs a callback");
    return notifier_->add(std::string(type), std::move(callback));
  }

  Result<RegisterOptions> check(std::string_view type, std::string_view id,
                                const RegisterOptions& options) const {
    KVQ_RETURN_IF_ERROR(validate_worker_type(type));
    KVQ_RETURN_IF_ERROR(validate_worker_id(id));
    if (options.health_timeout < kMinHealthTimeout) {
      return InvalidArgument("health timeout must be at least " +
                             std::to_string(kMinHealthTimeout.count()) + " ms");
    }
    RegisterOptions checked = options;
    KVQ_ASSIGN_OR_RETURN(checked.info, normalize_info(options.info));
    return checked;
  }

  // Joins with a fresh token; the same token on a retry recognises an earlier attempt's commit.
  Result<std::string> join(const std::string& type, const std::string& id,
                           const RegisterOptions& checked) {
    const std::string token = util::secret_hex();
    Status s = kv::run(
        *core_->store,
        [&](kv::Transaction& txn) { return core_->registry.join(txn, type, id, token, checked); },
        core_->options.retry);
    if (!s.ok()) return s;
    return token;
  }

  Stats stats() const override {
    Stats s;
    s.heartbeats = core_->heartbeats.load();
    if (monitor_) {
      s.declared_dead = monitor_->declared_dead();
      s.monitor_checks = monitor_->checks();
    }
    return s;
  }

 private:
  std::shared_ptr<Core> core_;
  util::Mutex register_mu_;
  Heartbeater heartbeater_;
  std::unique_ptr<MembershipNotifier> notifier_;
  std::unique_ptr<HealthMonitor> monitor_;
};

}  // namespace

Result<std::unique_ptr<Workers>> Workers::open(std::shared_ptr<kv::Store> store,
                                               WorkersOptions options) {
  if (!store) return InvalidArgument("no store");
  auto core = std::make_shared<Core>(std::move(store), std::move(options));
  return std::unique_ptr<Workers>(std::make_unique<WorkersImpl>(std::move(core)));
}

}  // namespace kvq::workers
