// workers/membership_notifier.h — one thread delivering membership changes to subscribers.
//
// For each type with subscribers it keeps one store watch on the type's membership version,
// armed in the same transaction that reads the membership, so no change after a delivery is
// missed. A subscriber is called only with versions above the last it was given.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "util/mutex.h"
#include "workers/workers_impl.h"

namespace kvq::workers {

class MembershipNotifier {
 public:
  explicit MembershipNotifier(std::shared_ptr<Core> core);
  ~MembershipNotifier();

  // Returns a handle that unsubscribes when destroyed.
  std::unique_ptr<MembershipSubscription> add(const std::string& type,
                                              std::function<void(const Membership&)> callback)
      KVQ_EXCLUDES(mu_);

 private:
  struct Subscriber {
    uint64_t id;
    std::function<void(const Membership&)> callback;
    std::optional<uint64_t> delivered;  // the last version given to it
    std::atomic<bool> removed{false};
  };
  struct TypeState {
    kv::Watch watch;
    bool live = false;
    std::vector<std::shared_ptr<Subscriber>> subscribers;
  };
  class Handle;

  void run() KVQ_EXCLUDES(mu_, delivering_);
  void remove(const std::string& type, uint64_t id) KVQ_EXCLUDES(mu_, delivering_);
  void deliver(const std::vector<std::shared_ptr<Subscriber>>& to, const Membership& m)
      KVQ_REQUIRES(delivering_);

  std::shared_ptr<Core> core_;
  util::Mutex mu_;
  util::CondVar cv_;
  std::map<std::string, TypeState> types_ KVQ_GUARDED_BY(mu_);
  uint64_t next_id_ KVQ_GUARDED_BY(mu_) = 1;
  bool dirty_ KVQ_GUARDED_BY(mu_) = false;
  bool stopping_ KVQ_GUARDED_BY(mu_) = false;
  // Held while callbacks run (never with mu_), so unsubscribing can wait them out.
  util::Mutex delivering_;
  std::thread thread_;
};

}  // namespace kvq::workers
