// jobs/notifier.h — one background thread per Jobs that turns store watches into local wake-ups.
//
// For each type someone in this process waits on, it keeps two store watches armed: on the
// type's pending token (accept waiters) and on its activity token (subscribers). However many
// local waiters and subscribers there are, the store sees two watches per type.
//
// Watches are kept armed only while they serve someone — the pending watch while accepts wait
// on the type, the activity watch while the type has subscribers — so a process where
// nobody waits pays nothing for commits it makes.
//
// Accept waiters use a generation number per type, bumped each time the pending watch is
// (re-)armed. A waiter reads the generation *before* its accept transaction and waits until it
// changes (the acceptor hears of each change through the pending listener): an add committed after that transaction's read either fires the watch that was armed
// then, or happened before an arm that started later — and every arm bumps the generation, so
// the waiter looks again. No add is missed; after an idle spell the first wait costs one extra
// look.
//
// Subscribers: whenever a type's activity watch is re-armed — and whenever a subscription is
// added — the notifier re-reads the rows of every subscribed job of that type in the same
// transaction that arms the watch, and queues an event for each job whose seq moved. Changes
// between two reads coalesce; the final finished / not-found event always arrives.
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
  JobEvent latest;  // the last event handed to the caller (initially `initial`)
  // Guarded by the notifier's hub mutex:
  uint64_t last_seq = 0;
  bool final_queued = false;  // finished or not found has been queued
  bool closed = false;        // unsubscribed
  std::vector<JobEvent> queue;
  std::function<void()> listener;
  class Notifier* notifier = nullptr;
};

class Notifier {
 public:
  Notifier(kv::Store& store, const Keys& keys, const kv::RetryOptions& retry);
  ~Notifier();

  // The pending generation of `type`.
  uint64_t pending_generation(const std::string& type);
  // Keeps the pending watch of `type` armed while interest is held (the acceptor holds it while
  // accepts wait on the type).
  void hold_pending_interest(const std::string& type);
  void release_pending_interest(const std::string& type);
  // Called (from the notifier's thread, without its lock) after each bump of a type's pending
  // generation. Set once, before any interest is held.
  void set_pending_listener(std::function<void(const std::string& type)> listener);

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
    kv::Watch pending;
    kv::Watch activity;
    bool pending_live = false;
    bool activity_live = false;
    bool refresh_subscribers = false;
    uint64_t pending_gen = 0;
    int interest = 0;  // holders of pending interest (the acceptor, while accepts wait)
    std::vector<std::shared_ptr<Subscription::State_>> subs;
  };
  struct Plan {
    std::string type;
    bool arm_pending = false;
    bool arm_activity = false;
    std::vector<std::shared_ptr<Subscription::State_>> subs;
  };

  void run();
  std::vector<Plan> take_plans();
  Status rearm(std::vector<Plan>& plans);
  JobEvent observe(kv::Transaction& txn, const Subscription::State_& sub, Status* error);
  void on_watch_fired(const std::string& type, bool pending);

  kv::Store& store_;
  const Keys& keys_;
  kv::RetryOptions retry_;
  std::mutex mu_;
  std::condition_variable work_cv_;     // the notifier thread waits on this
  std::function<void(const std::string&)> pending_listener_;
  std::map<std::string, TypeWatch> types_;
  bool dirty_ = false;
  bool stopping_ = false;
  std::mutex hub_mu_;
  std::condition_variable hub_cv_;
  std::thread thread_;
};

}  // namespace kvq::jobs
