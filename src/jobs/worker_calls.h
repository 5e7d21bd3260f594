// jobs/worker_calls.h — finish's parts (worker_ops.cc) that finish_and_accept joins with an
// accept in one transaction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "jobs/schema.h"
#include "kvq/jobs.h"

namespace kvq::jobs {

// A worker call's input, checked once: the data and the call's own JSON value (update's
// progress, finish's result), each normalized.
struct Checked {
  std::optional<std::string> data;
  std::optional<std::string> value;
  DataFormat data_format = DataFormat::kJson;  // what `data` was checked as: the handle's
};

// What finish_checked decided, for the type's stats.
struct Finished {
  bool succeeded = false;   // finished, not resubmitted
  int64_t started = 0;      // when the run began
  bool recognised = false;  // the call found its own earlier commit
  bool counted = false;     // set by counting(): the stats count it
};

// The handle and finish's input, checked (kInvalidArgument).
Result<Checked> check_finish(const Job& job, const FinishOptions& options, size_t max);
// finish in `txn`: kFailedPrecondition ("halt") once the worker is fenced out; a retry after
// an unknown commit result finds its own finish applied (while no other run holds the job).
Result<Finished> finish_checked(kv::Transaction& txn, const Keys& keys, const Job& job,
                                const Checked& checked);

}  // namespace kvq::jobs
