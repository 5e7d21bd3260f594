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
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "jobs/schema.h"
#include "kvq/jobs.h"

namespace kvq::jobs {

// Everything a Subscription handle shares with the notifier.
struct Subscription::State_ {
  std::string type;
  std::string id;
  JobEvent initial;
  bool follow = false;  // SubscribeOptions::follow: only not-found is final
  JobEvent latest;      // the last event handed to the caller (initially `initial`)
  // Guarded by the notifier's hub mutex:
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
  void add_subscription(const std::shared_ptr<Subscription::State_>& sub);
  void remove_subscription(Subscription::State_* sub);
  // Queues `event` on `sub` unless it is older than what was already delivered.
  void deliver(Subscription::State_& sub, const JobEvent& event);

  // The mutex and condition variable every subscription wait uses.
  std::mutex& hub_mutex() { return hub_mu_; }
  std::condition_variable& hub_cv() { return hub_cv_; }

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

  void run();
  std::vector<Plan> take_plans();
  Status rearm(std::vector<Plan>& plans);
  JobEvent observe(kv::Transaction& txn, const Subscription::State_& sub, Status* error);
  void on_watch_fired(const std::string& type);

  kv::Store& store_;
  const Keys& keys_;
  kv::RetryOptions retry_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // the notifier thread waits on this
  std::map<std::string, TypeWatch> types_;
  bool dirty_ = false;
  bool stopping_ = false;
  std::mutex hub_mu_;
  std::condition_variable hub_cv_;
  std::thread thread_;
};

}  // namespace kvq::jobs
