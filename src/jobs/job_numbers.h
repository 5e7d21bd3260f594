// jobs/job_numbers.h — next_job_number's blocks: numbers are taken kJobNumberBlock at a time
// from the counter (19, 2) (schema.h) in one transaction, then handed out from memory, so a
// process costs the store one transaction per block and two processes contend on the counter
// once per block, not per job.
#pragma once

#include <cstdint>

#include "util/mutex.h"

namespace kvq::jobs {

inline constexpr uint64_t kJobNumberBlock = 100;

// This Jobs's current block: [next, end). Empty (next == end) until the first call.
struct JobNumbers {
  util::Mutex mu;
  uint64_t next KVQ_GUARDED_BY(mu) = 0;
  uint64_t end KVQ_GUARDED_BY(mu) = 0;
};

}  // namespace kvq::jobs
