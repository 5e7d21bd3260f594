#include "workers/membership_notifier.h"

#include <cstdio>
#include <exception>

namespace kvq::workers {
namespace {

using namespace std::chrono_literals;
constexpr auto kErrorPause = 50ms;

}  // namespace

class MembershipNotifier::Handle : public MembershipSubscription {
 public:
  Handle(MembershipNotifier* notifier, std::string type, uint64_t id)
      : notifier_(notifier), type_(std::move(type)), id_(id) {}
  ~Handle() override { notifier_->remove(type_, id_); }

 private:
  MembershipNotifier* notifier_;
  std::string type_;
  uint64_t id_;
};

MembershipNotifier::MembershipNotifier(std::shared_ptr<Core> core)
    : core_(std::move(core)), thread_([this] { run(); }) {}

MembershipNotifier::~MembershipNotifier() {
  {
    util::MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& [type, state] : types_) state.watch.cancel();
}

std::unique_ptr<MembershipSubscription> MembershipNotifier::add(
    const std::string& type, std::function<void(const Membership&)> callback) {
  util::MutexLock lock(mu_);
  const uint64_t id = next_id_++;
  auto& state = types_[type];
  auto subscriber = std::make_shared<Subscriber>();
  subscriber->id = id;
  subscriber->callback = std::move(callback);
  state.subscribers.push_back(std::move(subscriber));
  state.live = false;  // read now, to give the new subscriber the current membership
  dirty_ = true;
  cv_.notify_all();
  return std::make_unique<Handle>(this, type, id);
}

void MembershipNotifier::remove(const std::string& type, uint64_t id) {
  {
    util::MutexLock lock(mu_);
    auto it = types_.find(type);
    if (it != types_.end()) {
      std::erase_if(it->second.subscribers, [&](const auto& s) {
        if (s->id != id) return false;
        s->removed = true;  // a delivery that already copied it skips it
        return true;
      });
    }
  }
  // Wait out a delivery in progress, unless this is that delivery unsubscribing itself.
  if (std::this_thread::get_id() != thread_.get_id()) util::MutexLock wait(delivering_);
}

void MembershipNotifier::deliver(const std::vector<std::shared_ptr<Subscriber>>& to,
                                 const Membership& m) {
  for (const auto& s : to) {
    if (s->removed || (s->delivered && *s->delivered >= m.version)) continue;
    s->delivered = m.version;
    try {
      s->callback(m);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kvq: membership callback threw: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "kvq: membership callback threw a non-exception\n");
    }
  }
}

void MembershipNotifier::run() {
  util::MutexLock lock(mu_);
  while (!stopping_) {
    while (!stopping_ && !dirty_) cv_.wait(mu_);
    if (stopping_) break;
    dirty_ = false;
    std::vector<std::string> stale;
    for (auto& [type, state] : types_) {
      if (!state.live && !state.subscribers.empty()) stale.push_back(type);
    }
    lock.unlock();
    bool failed = false;
    for (const auto& type : stale) {
      // Read and arm in one transaction: every change after this read fires the watch.
      auto txn = core_->store->begin();
      Result<Membership> m =
          txn.ok() ? core_->registry.read(**txn, type, true) : Result<Membership>(txn.status());
      Result<kv::Watch> watch =
          m.ok() ? (*txn)->watch(core_->keys.version(type)) : Result<kv::Watch>(m.status());
      if (!watch.ok()) {
        failed = true;
        continue;
      }
      std::vector<std::shared_ptr<Subscriber>> to;
      kv::Watch* armed = nullptr;  // only this thread touches watches; the map only grows
      {
        util::MutexLock relock(mu_);
        auto& state = types_[type];
        state.watch = std::move(*watch);
        state.live = true;
        to = state.subscribers;
        armed = &state.watch;
      }
      armed->on_ready([this, type](const Status& s) {
        if (s.code() == Code::kCancelled) return;
        util::MutexLock relock(mu_);
        types_[type].live = false;
        dirty_ = true;
        cv_.notify_all();
      });
      util::MutexLock hold(delivering_);
      deliver(to, *m);
    }
    lock.lock();
    if (failed) {
      for (const auto& type : stale) types_[type].live = false;
      dirty_ = true;
      const auto resume = kv::Clock::now() + kErrorPause;
      while (!stopping_) {
        if (!cv_.wait_until(mu_, resume)) break;
      }
    }
  }
}

}  // namespace kvq::workers
