// jobs/retention.h — removing finished jobs whose type's retention has passed.
//
// The finished index (schema.h, subspace 9) lists a type's finished jobs in the order they
// finished, so the expired ones are a prefix of it: one range read finds them, however many
// jobs the type keeps. Each removal re-reads the job's row and goes through save_job, as
// Jobs::remove does, so a job that was added again (pending) meanwhile is left alone, a
// subscriber hears not-found, and two processes removing the same jobs conflict and the loser
// finds nothing left to do.
#pragma once

#include <cstdint>
#include <string>

#include "jobs/schema.h"
#include "kvq/kv.h"

namespace kvq::jobs {

// Removes up to `batch` jobs of `type` that finished before `cutoff_ms` (wall clock), in one
// transaction; returns how many.
Result<size_t> remove_expired_batch(kv::Store& store, const Keys& keys, const std::string& type,
                                    int64_t cutoff_ms, size_t batch, const kv::RetryOptions& retry);

}  // namespace kvq::jobs
