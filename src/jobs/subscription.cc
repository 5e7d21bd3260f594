// subscribe, Subscription (its blocking waits and its event feed) and wait_any.
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/validation.h"
#include "util/mutex.h"

namespace kvq::jobs {
namespace {

bool matches(const JobEvent& e, std::optional<State> state) {
  return !e.found || !state || e.state == *state;
}

}  // namespace

Result<std::unique_ptr<Subscription>> Jobs::subscribe(std::string_view type, std::string_view id,
                                                      SubscribeOptions options) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  auto state = std::make_shared<Subscription::State_>();
  state->type = type;
  state->id = id;
  state->follow = options.follow;
  state->notifier = &impl_->notifier;
  // Register before reading: a change after registration is either in the read below or
  // observed by the notifier, which re-reads this job once it sees the registration.
  impl_->notifier.add_subscription(state);
  auto row = kv::run(
      *store_, [&](kv::Transaction& txn) { return load_job(txn, impl_->keys, type, id); },
      options_.retry);
  if (!row.ok() || !*row) {
    impl_->notifier.remove_subscription(state.get());
    if (!row.ok()) return row.status();
    return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) +
                    "' does not exist");
  }
  state->initial = to_event(state->type, state->id, **row);
  state->latest = state->initial;
  {
    // Events the notifier queued from older reads are superseded by the initial state.
    util::MutexLock hub(impl_->notifier.hub_mutex());
    std::erase_if(state->queue, [&](const JobEvent& e) { return e.seq <= state->initial.seq; });
    if (state->initial.seq > state->last_seq) state->last_seq = state->initial.seq;
    if (state->is_final(state->initial) && state->queue.empty()) state->final_queued = true;
  }
  return std::make_unique<Subscription>(std::move(state));
}

Subscription::Subscription(std::shared_ptr<State_> state) : state_(std::move(state)) {}

Subscription::~Subscription() { state_->notifier->remove_subscription(state_.get()); }

const std::string& Subscription::type() const { return state_->type; }
const std::string& Subscription::id() const { return state_->id; }
const JobEvent& Subscription::initial() const { return state_->initial; }

bool Subscription::ended() const {
  util::MutexLock hub(state_->notifier->hub_mutex());
  return state_->final_queued && state_->queue.empty();
}

void Subscription::set_listener(std::function<void()> callback) {
  std::function<void()> call_now;
  {
    util::MutexLock hub(state_->notifier->hub_mutex());
    state_->listener = std::move(callback);
    if (!state_->queue.empty()) call_now = state_->listener;  // a copy: it may unsubscribe
  }
  if (call_now) call_now();
}

void Subscription::on_event(std::function<void(const JobEvent&)> callback) {
  // Weak: the listener lives in the state it would otherwise keep alive; locked while feeding,
  // so a handle destroyed inside `callback` leaves the state valid until the loop sees `closed`.
  std::weak_ptr<State_> weak = state_;
  set_listener([weak, callback = std::move(callback)] {
    auto s = weak.lock();
    if (!s) return;
    util::MutexLock hub(s->notifier->hub_mutex());
    // One feeder at a time hands out the queue in order; a call that finds one under way
    // leaves the new events to it.
    if (s->feeding) return;
    s->feeding = true;
    while (!s->closed && !s->queue.empty()) {
      s->latest = std::move(s->queue.front());
      s->queue.erase(s->queue.begin());
      const JobEvent event = s->latest;
      hub.unlock();
      callback(event);
      hub.lock();
    }
    s->feeding = false;
  });
}

void Subscription::wait_async(std::optional<State> state,
                              std::function<void(Result<JobEvent>)> done) {
  {
    util::MutexLock hub(state_->notifier->hub_mutex());
    if (matches(state_->latest, state)) {
      const JobEvent latest = state_->latest;
      hub.unlock();
      return done(latest);
    }
    if (state_->final_queued && state_->queue.empty()) {
      hub.unlock();
      return done(NotFound("the subscription has ended"));
    }
  }
  // Called one at a time (on_event), so `answered` needs no lock.
  auto answered = std::make_shared<bool>(false);
  on_event([answered, state, done = std::move(done), follow = state_->follow](const JobEvent& e) {
    if (*answered) return;
    if (matches(e, state)) {
      *answered = true;
      return done(e);
    }
    if (!follow && e.state == State::kFinished) {
      *answered = true;
      done(NotFound("the subscription has ended"));
    }
  });
}

Result<JobEvent> Subscription::next(kv::Clock::time_point deadline) {
  util::MutexLock hub(state_->notifier->hub_mutex());
  auto& s = *state_;
  while (s.queue.empty() && !s.final_queued &&
         state_->notifier->hub_cv().wait_until(state_->notifier->hub_mutex(), deadline)) {
  }
  if (!s.queue.empty()) {
    s.latest = std::move(s.queue.front());
    s.queue.erase(s.queue.begin());
    return s.latest;
  }
  if (s.final_queued) return NotFound("the subscription has ended");
  return DeadlineExceeded("no event before the deadline");
}

Result<JobEvent> Subscription::wait(std::optional<State> state, kv::Clock::time_point deadline) {
  {
    util::MutexLock hub(state_->notifier->hub_mutex());
    if (matches(state_->latest, state)) return state_->latest;
  }
  for (;;) {
    auto e = next(deadline);
    if (!e.ok() || matches(*e, state)) return e;
  }
}

Result<std::pair<size_t, JobEvent>> Jobs::wait_any(const std::vector<Subscription*>& subscriptions,
                                                   std::optional<State> state,
                                                   kv::Clock::time_point deadline) {
  if (subscriptions.empty()) return InvalidArgument("wait_any needs at least one subscription");
  auto* notifier = subscriptions[0]->state_->notifier;
  util::MutexLock hub(notifier->hub_mutex());
  for (size_t i = 0; i < subscriptions.size(); ++i) {
    const auto& latest = subscriptions[i]->state_->latest;
    if (matches(latest, state)) return std::pair{i, latest};
  }
  for (;;) {
    bool all_ended = true;
    for (size_t i = 0; i < subscriptions.size(); ++i) {
      auto& s = *subscriptions[i]->state_;
      while (!s.queue.empty()) {
        s.latest = std::move(s.queue.front());
        s.queue.erase(s.queue.begin());
        if (matches(s.latest, state)) return std::pair{i, s.latest};
      }
      if (!s.final_queued) all_ended = false;
    }
    if (all_ended) return NotFound("every subscription has ended");
    if (!notifier->hub_cv().wait_until(notifier->hub_mutex(), deadline)) {
      return DeadlineExceeded("no matching event before the deadline");
    }
  }
}

}  // namespace kvq::jobs
