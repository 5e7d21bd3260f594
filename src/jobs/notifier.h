// jobs/notifier.h — one background thread per Jobs that turns store watches into subscription
// events.
//
// For each type with subscribers in this process, it keeps one store watch armed on the type's
// activity token, however many subscribers there are, and only while the type has any, so a
// process where nobody subscribes pays nothing for commits it makes. (Waiting accepts have their
// own watch, armed by the acceptor's looks: see accept_waiters.h.)
//
// Whenever a type's activity watch is re-armed — and whenever a subscription is added — the
// notifier re-reads the rows of every subscribed job of that type in the same transaction that
// arms the watch, and queues an event for each job whose seq moved. Changes between two reads
// coalesce; the final event (finished, unless the subscription follows; not-found) always
// arrives.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "jobs/schema.h"
#include "kvq/jobs.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace kvq::jobs {

// Everything a Subscription handle shares with the notifier.
struct Subscription::State_ {
  std::string type;
  std::string id;
  JobEvent initial;
  bool follow = false;  // SubscribeOptions::follow: only not-found is final
  JobEvent latest;      // the last event handed to the caller (initially `initial`)
  // Guarded by the notifier's hub mutex (Notifier::hub_mutex(); not annotated: the analysis
  // cannot name another object's mutex through `notifier`):
  uint64_t last_seq = 0;
  bool final_queued = false;  // the final event (is_final) has been queued
  bool closed = false;        // unsubscribed
  bool feeding = false;       // an on_event callback is handing out the queue
  std::vector<JobEvent> queue;
  std::function<void()> listener;
  class Notifier* notifier = nullptr;

  // Whether `e` ends this subscription.
  bool is_final(const JobEvent& e) const {
    return !e.found || (!follow && e.state == State::kFinished);
  }
};

class Notifier {
 public:
  Notifier(kv::Store& store, const Keys& keys, const kv::RetryOptions& retry);
  ~Notifier();

  // Registers `sub` and makes the notifier re-read its job soon.
  void add_subscription(const std::shared_ptr<Subscription::State_>& sub) KVQ_EXCLUDES(mu_);
  void remove_subscription(Subscription::State_* sub) KVQ_EXCLUDES(mu_, hub_mu_);
  // Queues `event` on `sub` unless it is older than what was already delivered.
  void deliver(Subscription::State_& sub, const JobEvent& event) KVQ_EXCLUDES(hub_mu_);

  // The mutex and condition variable every subscription wait uses. The analysis knows a lock
  // of hub_mutex() is a lock of hub_mu_.
  util::Mutex& hub_mutex() KVQ_RETURN_CAPABILITY(hub_mu_) { return hub_mu_; }
  util::CondVar& hub_cv() { return hub_cv_; }

 private:
  struct TypeWatch {
    kv::Watch activity;
    bool activity_live = false;
    bool refresh_subscribers = false;
    std::vector<std::shared_ptr<Subscription::State_>> subs;
  };
  struct Plan {
    std::string type;
    std::vector<std::shared_ptr<Subscription::State_>> subs;
  };

  void run() KVQ_EXCLUDES(mu_);
  std::vector<Plan> take_plans() KVQ_REQUIRES(mu_) KVQ_EXCLUDES(hub_mu_);
  Status rearm(std::vector<Plan>& plans) KVQ_EXCLUDES(mu_, hub_mu_);
  JobEvent observe(kv::Transaction& txn, const Subscription::State_& sub, Status* error);
  void on_watch_fired(const std::string& type) KVQ_EXCLUDES(mu_);

  kv::Store& store_;
  const Keys& keys_;
  kv::RetryOptions retry_;
  util::Mutex mu_;
  util::CondVar work_cv_;  // the notifier thread waits on this
  std::map<std::string, TypeWatch> types_ KVQ_GUARDED_BY(mu_);
  bool dirty_ KVQ_GUARDED_BY(mu_) = false;
  bool stopping_ KVQ_GUARDED_BY(mu_) = false;
  // Taken after mu_ when both are held (take_plans).
  util::Mutex hub_mu_ KVQ_ACQUIRED_AFTER(mu_);
  util::CondVar hub_cv_;
  std::thread thread_;
};

}  // namespace kvq::jobs
