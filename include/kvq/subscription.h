// kvq/subscription.h — a live view of one job (Jobs::subscribe, kvq/jobs.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kvq/job_types.h"
#include "kvq/kv.h"
#include "kvq/status.h"

namespace kvq::jobs {

class Jobs;

// A live view of one job. Events arrive in commit order: first the state at subscribe time,
// then each change the notifier observes (a state change, or new data from update while
// running). Changes that land between two observations coalesce into the latest one, but the
// final event is always delivered, after which the subscription ends: not-found (the job is
// gone) always; `finished` too unless it follows (SubscribeOptions::follow).
// Events are taken one way per handle: by next / wait, or pushed by on_event / wait_async.
// Destroying the handle unsubscribes and drops anything queued; after it returns no callback
// of the handle starts (one under way on another thread may still be finishing).
// REQUIRES: a Subscription does not outlive the Jobs that made it.
class Subscription {
 public:
  ~Subscription();
  const std::string& type() const;
  const std::string& id() const;
  // The state at subscribe time.
  const JobEvent& initial() const;
  // The next event; kDeadlineExceeded if none by `deadline`; kNotFound after the final event.
  Result<JobEvent> next(kv::Clock::time_point deadline);
  // Returns once the job is in `state` (any state if none) — at once if the latest event seen
  // (initially the state at subscribe time) is — skipping other events; or when the job is
  // gone (an event with found = false, so callers see why the wait ended); or at `deadline`.
  Result<JobEvent> wait(std::optional<State> state, kv::Clock::time_point deadline);
  // Calls `callback` (from the notifier's thread) whenever an event is queued; used to
  // integrate with event loops. The callback must not block.
  void set_listener(std::function<void()> callback);
  // The event feed, for a caller that must not block: hands `callback` every event next()
  // would return (not initial()), one call at a time and in order, until the final one — those
  // already queued at once on this thread, later ones from the notifier's thread. It must not
  // block. Replaces any listener.
  void on_event(std::function<void(const JobEvent&)> callback);
  // wait() without a blocked thread: `done` is called once, with the first event (the latest
  // seen, initially the state at subscribe time, included) in which the job is in `state`
  // (any if none) or gone — at once on this thread if the latest is — or with kNotFound when
  // the subscription ends without one (it does not follow, and the job finished). Never at a
  // deadline: the caller gives up by destroying the handle. Uses on_event.
  void wait_async(std::optional<State> state, std::function<void(Result<JobEvent>)> done);
  bool ended() const;

  struct State_;
  explicit Subscription(std::shared_ptr<State_> state);

 private:
  friend class Jobs;
  std::shared_ptr<State_> state_;
};

}  // namespace kvq::jobs
