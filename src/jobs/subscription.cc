// subscribe, Subscription and wait_any.
#include "jobs/job_store.h"
#include "jobs/jobs_impl.h"
#include "jobs/validation.h"

namespace kvq::jobs {
namespace {

bool matches(const JobEvent& e, std::optional<State> state) {
  return !e.found || !state || e.state == *state;
}

}  // namespace

Result<std::unique_ptr<Subscription>> Jobs::subscribe(std::string_view type, std::string_view id) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_id(id));
  auto state = std::make_shared<Subscription::State_>();
  state->type = type;
  state->id = id;
  state->notifier = &impl_->notifier;
  // Register before reading: a change after registration is either in the read below or
  // observed by the notifier, which re-reads this job once it sees the registration.
  impl_->notifier.add_subscription(state);
  auto row = kv::run(*store_, [&](kv::Transaction& txn) { return load_job(txn, impl_->keys, type, id); },
                     options_.retry);
  if (!row.ok() || !*row) {
    impl_->notifier.remove_subscription(state.get());
    if (!row.ok()) return row.status();
    return NotFound("job '" + std::string(id) + "' of type '" + std::string(type) + "' does not exist");
  }
  state->initial = JobEvent{state->type, state->id, true, state_of(**row), (*row)->data, (*row)->seq, (*row)->gave_up};
  state->latest = state->initial;
  {
    // Events the notifier queued from older reads are superseded by the initial state.
    std::lock_guard hub(impl_->notifier.hub_mutex());
    std::erase_if(state->queue, [&](const JobEvent& e) { return e.seq <= state->initial.seq; });
    if (state->initial.seq > state->last_seq) state->last_seq = state->initial.seq;
    if (state->initial.state == State::kFinished && state->queue.empty()) state->final_queued = true;
  }
  return std::make_unique<Subscription>(std::move(state));
}

Subscription::Subscription(std::shared_ptr<State_> state) : state_(std::move(state)) {}

Subscription::~Subscription() { state_->notifier->remove_subscription(state_.get()); }

const std::string& Subscription::type() const { return state_->type; }
const std::string& Subscription::id() const { return state_->id; }
const JobEvent& Subscription::initial() const { return state_->initial; }

bool Subscription::ended() const {
  std::lock_guard hub(state_->notifier->hub_mutex());
  return state_->final_queued && state_->queue.empty();
}

void Subscription::set_listener(std::function<void()> callback) {
  std::function<void()> call_now;
  {
    std::lock_guard hub(state_->notifier->hub_mutex());
    state_->listener = std::move(callback);
    if (!state_->queue.empty()) call_now = state_->listener;  // a copy: it may unsubscribe
  }
  if (call_now) call_now();
}

Result<JobEvent> Subscription::next(kv::Clock::time_point deadline) {
  std::unique_lock hub(state_->notifier->hub_mutex());
  auto& s = *state_;
  const bool got = state_->notifier->hub_cv().wait_until(hub, deadline, [&] {
    return !s.queue.empty() || s.final_queued;
  });
  if (!s.queue.empty()) {
    s.latest = std::move(s.queue.front());
    s.queue.erase(s.queue.begin());
    return s.latest;
  }
  if (got && s.final_queued) return NotFound("the subscription has ended");
  return DeadlineExceeded("no event before the deadline");
}

Result<JobEvent> Subscription::wait(std::optional<State> state, kv::Clock::time_point deadline) {
  {
    std::lock_guard hub(state_->notifier->hub_mutex());
    if (matches(state_->latest, state)) return state_->latest;
  }
  for (;;) {
    auto e = next(deadline);
    if (!e.ok() || matches(*e, state)) return e;
  }
}

Result<std::pair<size_t, JobEvent>> Jobs::wait_any(const std::vector<Subscription*>& subscriptions,
                                                   std::optional<State> state, kv::Clock::time_point deadline) {
  if (subscriptions.empty()) return InvalidArgument("wait_any needs at least one subscription");
  auto* notifier = subscriptions[0]->state_->notifier;
  std::unique_lock hub(notifier->hub_mutex());
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
    if (notifier->hub_cv().wait_until(hub, deadline) == std::cv_status::timeout) {
      return DeadlineExceeded("no matching event before the deadline");
    }
  }
}

}  // namespace kvq::jobs
