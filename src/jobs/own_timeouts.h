// jobs/own_timeouts.h — running jobs with an activity timeout of their own (AddOptions::timeout,
// the beanstalkd protocol's TTR). Their activity entries live in (18, type, timeout_ms, seq, id)
// instead of (3, type, seq, id) (schema.h, I2): within one timeout they are in commit order, so
// the activity monitor judges each timeout as it judges the type's and stops at the first entry
// not idle that long. The span (19, 3, type) of the own timeouts a type's jobs were added with
// tells the monitor whether to look at (18) at all, and how often to check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jobs/schema.h"
#include "kvq/kv.h"

namespace kvq::jobs {

struct OwnTimeoutSpan {
  Millis shortest{0};
  Millis longest{0};
};
std::string encode_own_timeout_span(const OwnTimeoutSpan& span);
Result<OwnTimeoutSpan> decode_own_timeout_span(std::string_view bytes);

// Widens the type's span to cover `timeout`, for an add of a job with it. The span is read
// without snapshot but written only when it widens (rarely), so adds seldom conflict on it;
// a widened span rewrites the types token, which sends every monitor to re-read it.
Status note_own_timeout(kv::Transaction& txn, const Keys& keys, std::string_view type,
                        Millis timeout);

// The distinct own timeouts of the type's running jobs, shortest first, at most `max` of them
// (snapshot reads: one per timeout, skipping over the entries of each).
Result<std::vector<int64_t>> running_own_timeouts(kv::Transaction& txn, const Keys& keys,
                                                  std::string_view type, size_t max);

// How many jobs of `type` run, counting at most `limit`, from both activity indexes. Not a
// snapshot read unless `snapshot`: a flow-control check that found room must conflict with a
// run that starts or ends meanwhile.
Result<uint64_t> count_running(kv::Transaction& txn, const Keys& keys, std::string_view type,
                               uint64_t limit, bool snapshot);

// The ids of the running jobs whose activity entry is at `seq` (their run started, or was last
// updated, by the transaction of that read version), from both activity indexes: how an accept
// whose commit result was unknown finds the jobs it took.
Result<std::vector<std::string>> runs_started_at(kv::Transaction& txn, const Keys& keys,
                                                 std::string_view type, uint64_t seq);

// The activity-index entry of the job `id` whose row is `row` (running), in (3) or (18).
std::string activity_key(const Keys& keys, std::string_view type, std::string_view id,
                         const JobRow& row);

}  // namespace kvq::jobs
