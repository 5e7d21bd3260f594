// jobs/worker_calls.h — finish's parts (worker_ops.cc) that finish_and_accept joins with an
// accept in one transaction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

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

// What a try returns when its reads, which may be a little behind the latest commit, decided
// something no commit of its will vouch for: kv::run tries again, and with `confirming` set the
// next try does not allow stale reads, so it decides on a current read.
inline Status confirm_on_current_read(bool& confirming) {
  confirming = true;
  return Aborted(
      "to confirm on a current read what a read that may be behind the latest commit "
      "decided");
}

// `call` (a worker's call: (txn, args...) -> Status or Result) on reads that may be a little
// behind the latest commit (kv::Transaction::allow_stale_reads: on etcd, no quorum round for
// the first read). A worker's call writes what it decides, and its commit fails if what it
// read had changed since. What it decides without writing — that the worker is fenced out,
// or the job is gone — is first confirmed on a current read: the member that answered may not
// yet have applied the accept that gave the worker its job.
template <typename Call>
auto allowing_stale_reads(Call call) {
  return [call, confirming = std::make_shared<bool>(false)](kv::Transaction& txn, auto&&... args) {
    const bool stale = !*confirming && txn.allow_stale_reads();
    auto result = call(txn, std::forward<decltype(args)>(args)...);
    // A run that stopped at a read not yet made decides nothing (kv::RetryOptions::replayable).
    if (txn.has_deferred_reads()) return result;
    const Code code = internal::status_of(result).code();
    if (stale && (code == Code::kFailedPrecondition || code == Code::kNotFound ||
                  code == Code::kWrongState)) {
      return decltype(result)(confirm_on_current_read(*confirming));
    }
    return result;
  };
}

// `call` (finish_checked, fail_checked, snooze_checked) marking its answer counted for the
// type's stats unless it recognised a commit that an earlier call made (and counted): one it
// recognises before any try of its own wrote. After a try that wrote, whose commit result was
// unknown, the commit it recognises is its own. (A try that wrote and failed for another
// reason, a conflict or a fault before the commit, then made it count a commit an earlier call
// made at the same moment: only possible for two calls with one handle at once.)
template <typename Call>
auto counting(Call call) {
  return [call, wrote = std::make_shared<bool>(false)](kv::Transaction& txn, const Keys& keys,
                                                       const Job& job, const auto& input) {
    auto result = call(txn, keys, job, input);
    if (result.ok() && !txn.has_deferred_reads()) {
      result->counted = !result->recognised || *wrote;
      if (!result->recognised) *wrote = true;
    }
    return result;
  };
}

// The handle and finish's input, checked (kInvalidArgument).
Result<Checked> check_finish(const Job& job, const FinishOptions& options, size_t max);
// finish in `txn`: kFailedPrecondition ("halt") once the worker is fenced out; a retry after
// an unknown commit result finds its own finish applied (while no other run holds the job).
Result<Finished> finish_checked(kv::Transaction& txn, const Keys& keys, const Job& job,
                                const Checked& checked);

}  // namespace kvq::jobs
