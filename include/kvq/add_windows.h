// kvq/add_windows.h — two windows an add may open on a job id: a debounce window
// (AddOptions::debounce) and a unique window (AddOptions::unique_for). Both are kept in the
// job's row and decided in the add's own transaction, so they are exact: two adds of one id at
// the same moment, in two processes sharing the store, are ordered by the store, and the second
// sees what the first did (through retries after an unknown commit result too).
//
// Debounce {delay, max_delay}: "run once things have been quiet for `delay`, but never later
// than `max_delay` after the first add". An add with it
//   * on a new id adds the job due at now + delay, and opens its window (first add: now);
//   * on a pending or waiting job (not yet accepted) replaces its data (and priority, group,
//     timeout, as any add does) and moves its scheduled time to
//     min(now + delay, first add + max_delay) — AddResult::debounced; a job added without
//     debounce has no window yet, so this add is its first;
//   * on a running job adds a new run as IfExists::kUpdate does (a resubmit: the job runs again
//     after this run, with the data its worker leaves, so the add's data is NOT kept), due at
//     min(now + delay, first add + max_delay), the first add being the first debounced add
//     since the run began; later debounced adds push that next run as they would a pending job;
//   * on a finished job adds it anew (IfExists::kUpdate), due at now + delay, a new window.
// The window ends when its run is accepted (or the job finishes without running): the next
// debounced add opens a new one. The bound uses each add's own max_delay against the stored
// first-add time. Times are the adding process's wall clock, as scheduled times are.
//
// unique_for: "at most one add of this id takes effect per window". The first add with
// unique_for that finds no open window (typically the one that creates the job) opens a window
// from now to now + unique_for, stored with the job. Until it ends, every add of the id — with
// or without unique_for, any if_exists, debounce or not — returns the job unchanged
// (AddResult::added false, unique_until_ms the window's end), whatever the job's state:
// pending, waiting, running or finished. The window lives in the job's row, so it ends early
// if the job is removed (remove, or the type's finished-job retention): the next add creates
// the job anew. After it ends, an add behaves as it would without one (and, with unique_for,
// opens the next window from its own time): the window is counted from the first add, never
// extended by the adds it keeps.
//
// Plain values; the jobs layer validates and applies them (kvq/jobs.h, Jobs::add).
#pragma once

#include <chrono>

namespace kvq::jobs {

// The longest debounce delay, max_delay and unique_for an add takes: a year.
inline constexpr std::chrono::milliseconds kMaxAddWindow{365LL * 24 * 3600 * 1000};

struct Debounce {
  // How long after this add the run is due, unless max_delay says sooner. REQUIRES:
  // 0..kMaxAddWindow.
  std::chrono::milliseconds delay{0};
  // How long after the window's first add the run is due at the latest. REQUIRES:
  // delay..kMaxAddWindow. The default, the most it takes, leaves a debounce all but unbounded.
  std::chrono::milliseconds max_delay = kMaxAddWindow;
};

}  // namespace kvq::jobs
