#include "jobs/notifier.h"

#include <cstdio>

#include "jobs/job_store.h"

namespace kvq::jobs {
namespace {

using namespace std::chrono_literals;
constexpr auto kRetryPause = 50ms;

}  // namespace

Notifier::Notifier(kv::Store& store, const Keys& keys, const kv::RetryOptions& retry)
    : store_(store), keys_(keys), retry_(retry), thread_([this] { run(); }) {}

Notifier::~Notifier() {
  {
    util::MutexLock lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
  // Only now, with the thread gone, are the watches safe to touch; their callbacks see
  // kCancelled and do nothing.
  for (auto& [type, tw] : types_) tw.activity.cancel();
}

void Notifier::add_subscription(const std::shared_ptr<Subscription::State_>& sub) {
  util::MutexLock lock(mu_);
  auto& tw = types_[sub->type];
  tw.subs.push_back(sub);
  tw.refresh_subscribers = true;
  dirty_ = true;
  work_cv_.notify_all();
}

void Notifier::remove_subscription(Subscription::State_* sub) {
  {
    util::MutexLock hub(hub_mu_);
    sub->closed = true;
    sub->queue.clear();
    sub->listener = nullptr;
  }
  util::MutexLock lock(mu_);
  auto it = types_.find(sub->type);
  if (it == types_.end()) return;
  auto& subs = it->second.subs;
  std::erase_if(subs, [&](const auto& s) { return s.get() == sub; });
}

void Notifier::deliver(Subscription::State_& sub, const JobEvent& event) {
  std::function<void()> listener;
  {
    util::MutexLock hub(hub_mu_);
    if (sub.closed || sub.final_queued || event.seq <= sub.last_seq) return;
    sub.last_seq = event.seq;
    sub.final_queued = sub.is_final(event);
    sub.queue.push_back(event);
    listener = sub.listener;
  }
  hub_cv_.notify_all();
  if (listener) listener();
}

void Notifier::on_watch_fired(const std::string& type) {
  util::MutexLock lock(mu_);
  if (stopping_) return;
  auto it = types_.find(type);
  if (it == types_.end()) return;
  it->second.activity_live = false;
  dirty_ = true;
  work_cv_.notify_all();
}

std::vector<Notifier::Plan> Notifier::take_plans() {
  std::vector<Plan> plans;
  for (auto& [type, tw] : types_) {
    // Subscriptions that have ended are dropped here, on the notifier's own thread.
    std::erase_if(tw.subs, [&](const auto& s) {
      util::MutexLock hub(hub_mu_);
      return s->closed || s->final_queued;
    });
    if (tw.subs.empty() || (tw.activity_live && !tw.refresh_subscribers)) continue;
    tw.refresh_subscribers = false;
    plans.push_back(Plan{type, tw.subs});
  }
  return plans;
}

void Notifier::run() {
  util::MutexLock lock(mu_);
  while (!stopping_) {
    while (!stopping_ && !dirty_) work_cv_.wait(mu_);
    if (stopping_) break;
    dirty_ = false;
    std::vector<Plan> plans = take_plans();
    lock.unlock();
    Status s = rearm(plans);
    lock.lock();
    if (!s.ok()) {
      // Put the work back and try again shortly; the store may be briefly unavailable.
      for (auto& plan : plans) types_[plan.type].refresh_subscribers = true;
      dirty_ = true;
      const auto until = kv::Clock::now() + kRetryPause;
      while (!stopping_) {
        if (!work_cv_.wait_until(mu_, until)) break;  // the pause is over
      }
    }
  }
}

Status Notifier::rearm(std::vector<Plan>& plans) {
  if (plans.empty()) return Status::OK();
  KVQ_ASSIGN_OR_RETURN(auto txn, store_.begin());
  std::vector<std::pair<std::string, kv::Watch>> armed;
  std::vector<std::pair<Subscription::State_*, JobEvent>> events;
  for (auto& plan : plans) {
    KVQ_ASSIGN_OR_RETURN(auto w, txn->watch(keys_.activity_token(plan.type)));
    armed.emplace_back(plan.type, std::move(w));
    for (auto& sub : plan.subs) {
      Status error;
      JobEvent e = observe(*txn, *sub, &error);
      KVQ_RETURN_IF_ERROR(error);
      events.emplace_back(sub.get(), std::move(e));
    }
  }
  std::vector<kv::Watch> replaced;
  std::vector<kv::Watch*> installed;
  {
    util::MutexLock lock(mu_);
    for (auto& [type, watch] : armed) {
      auto& tw = types_[type];
      replaced.push_back(std::move(tw.activity));
      tw.activity = std::move(watch);
      installed.push_back(&tw.activity);
      tw.activity_live = true;
    }
  }
  // Outside the lock: a callback may run at once (the watch already fired), and cancelling a
  // replaced watch runs its callback too. Only this thread touches the installed watches.
  for (auto& w : replaced) w.cancel();
  for (size_t i = 0; i < armed.size(); ++i) {
    installed[i]->on_ready([this, type = armed[i].first](const Status& s) {
      if (s.code() != Code::kCancelled) on_watch_fired(type);
    });
  }
  for (auto& [sub, event] : events) deliver(*sub, event);
  return Status::OK();
}

JobEvent Notifier::observe(kv::Transaction& txn, const Subscription::State_& sub, Status* error) {
  JobEvent e;
  e.type = sub.type;
  e.id = sub.id;
  auto row = load_job(txn, keys_, sub.type, sub.id);
  if (!row.ok()) {
    *error = row.status();
    return e;
  }
  if (!*row) {
    e.found = false;
    e.seq = UINT64_MAX;  // after everything: the job is gone
    return e;
  }
  return to_event(sub.type, sub.id, **row);
}

}  // namespace kvq::jobs
