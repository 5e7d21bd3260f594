#include "jobs/add_windows.h"

#include <algorithm>
#include <string>

namespace kvq::jobs {
namespace {

std::string ms(Millis d) { return std::to_string(d.count()) + " ms"; }

std::string max_text() { return ms(kMaxAddWindow) + " (365 days)"; }

// The first add of the debounce window an add with debounce falls in: the job's open window's
// (a pending or waiting job's, or a running one's next run's: I13), else this add's own.
int64_t window_start(const std::optional<JobRow>& before, int64_t now) {
  if (before && before->debounce_since != 0 && state_of(*before) != State::kFinished)
    return before->debounce_since;
  return now;
}

bool not_yet_accepted(const JobRow& row) {
  const State state = state_of(row);
  return state == State::kPending || state == State::kWaiting;
}

}  // namespace

Status validate_add_windows(const AddOptions& options) {
  if (options.debounce) {
    const Debounce& d = *options.debounce;
    if (d.delay < Millis(0) || d.delay > kMaxAddWindow)
      return InvalidArgument("debounce delay must be 0 to " + max_text() + ", not " + ms(d.delay));
    if (d.max_delay < d.delay || d.max_delay > kMaxAddWindow)
      return InvalidArgument("debounce max_delay must be at least its delay (" + ms(d.delay) +
                             ") and at most " + max_text() + ", not " + ms(d.max_delay));
    if (options.scheduled_time_ms)
      return InvalidArgument(
          "debounce sets the scheduled time: give debounce or scheduled_time, not both");
    if (options.if_exists == IfExists::kKeep)
      return InvalidArgument(
          "debounce changes an existing job and if_exists keep keeps it: give one or the other");
  }
  if (options.unique_for &&
      (*options.unique_for < Millis(1) || *options.unique_for > kMaxAddWindow))
    return InvalidArgument("unique_for must be 1 ms to " + max_text() + ", not " +
                           ms(*options.unique_for));
  return Status::OK();
}

bool unique_window_open(const JobRow& row, int64_t now) { return row.unique_until > now; }

AddResult kept_by_window(const JobRow& row) {
  return AddResult{.added = false, .unique_until_ms = row.unique_until};
}

int64_t debounced_time(const std::optional<JobRow>& before, const Debounce& debounce, int64_t now) {
  return std::min(now + debounce.delay.count(),
                  window_start(before, now) + debounce.max_delay.count());
}

std::optional<JobRow> with_windows(const std::optional<JobRow>& before, std::optional<JobRow> after,
                                   const AddOptions& options, int64_t now) {
  if (!after && !before) return after;
  // A window that has ended is dropped by a write made anyway (never one of its own).
  if (after && !options.unique_for && after->unique_until != 0 &&
      !unique_window_open(*after, now)) {
    after->unique_until = 0;
  }
  if (!options.debounce && !options.unique_for) return after;
  const JobRow& base = after ? *after : *before;  // before is set when after is not
  const int64_t since = options.debounce ? window_start(before, now) : base.debounce_since;
  const int64_t until = options.unique_for ? now + options.unique_for->count() : base.unique_until;
  if (!after) {
    if (since == before->debounce_since && until == before->unique_until) return after;
    after = *before;
  }
  after->debounce_since = since;
  after->unique_until = until;
  return after;
}

AddResult add_result(const std::optional<JobRow>& before, const std::optional<JobRow>& after,
                     const AddOptions& options) {
  AddResult result;
  const JobRow* row = after ? &*after : before ? &*before : nullptr;
  if (!row) return result;
  if (options.unique_for) result.unique_until_ms = row->unique_until;
  if (options.debounce) {
    result.debounced = before && not_yet_accepted(*before);
    result.scheduled_time_ms =
        state_of(*row) == State::kRunning ? row->next_scheduled : row->scheduled;
  }
  return result;
}

void end_debounce_window(const std::optional<JobRow>& before, JobRow& after) {
  if (after.debounce_since == 0) return;
  const State state = state_of(after);
  const bool accepted =
      state == State::kRunning && (!before || state_of(*before) != State::kRunning);
  if (accepted || state == State::kFinished) after.debounce_since = 0;
}

}  // namespace kvq::jobs
