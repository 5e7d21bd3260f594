// jobs/add_windows.h — the debounce and unique windows of an add (kvq/add_windows.h) in the
// store: what the add's transaction reads of them in the job's row (debounce_since,
// unique_until: schema.h, I13) and what it writes there. Every decision is made on the row the
// add read without snapshot, so a concurrent add of the same id conflicts with it, and the
// retry decides on the row the other one wrote.
#pragma once

#include <cstdint>
#include <optional>

#include "jobs/schema.h"

namespace kvq::jobs {

// kInvalidArgument naming what is wrong with options.debounce or options.unique_for: out of
// range, or debounce with a scheduled time or with if_exists kKeep.
Status validate_add_windows(const AddOptions& options);

// Whether the job's unique window is open at `now`: every add then keeps the job as it is.
bool unique_window_open(const JobRow& row, int64_t now);
// What an add kept by the job's open unique window answers.
AddResult kept_by_window(const JobRow& row);

// The scheduled time an add with `debounce` gives the run it adds or debounces (`before`:
// the job as the add found it, nullopt when new): min(now + delay, the window's first add +
// max_delay). For the add to pass on as AddOptions::scheduled_time_ms.
int64_t debounced_time(const std::optional<JobRow>& before, const Debounce& debounce, int64_t now);

// `after` (the row the add writes, nullopt when it would change nothing) with the windows
// `options` open: a debounce's first add, a new unique window (or one that has ended dropped).
// Becomes a row of its own when only a window changes.
std::optional<JobRow> with_windows(const std::optional<JobRow>& before, std::optional<JobRow> after,
                                   const AddOptions& options, int64_t now);

// What an add that was not kept answers, `after` being the row it wrote (nullopt: none).
AddResult add_result(const std::optional<JobRow>& before, const std::optional<JobRow>& after,
                     const AddOptions& options);

// For save_job (I13): a debounce window ends when its run is accepted or the job finishes.
void end_debounce_window(const std::optional<JobRow>& before, JobRow& after);

}  // namespace kvq::jobs
