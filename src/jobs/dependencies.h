// jobs/dependencies.h — dependencies between jobs (kvq/workflows.h) in the store: the edges an
// add writes (schema.h, (19, 4–6)), and their resolution in the transaction of a dependency's
// end. Every resolution reads and clears the one reverse entry of an unresolved edge, and writes
// the dependent's row, which a concurrent end of another of its dependencies also writes: the
// store's serializability makes each edge resolve once and the last one release the dependent.
#pragma once

#include <optional>
#include <string_view>

#include "jobs/schema.h"
#include "kvq/kv.h"

namespace kvq::jobs {

// kInvalidArgument naming what is wrong with options.depends_on for the job (type, id): more
// than kMaxDependencies, a bad type or id, a repeat, or the job itself (a cycle of one).
Status validate_dependencies(std::string_view type, std::string_view id, const AddOptions& options);

// The order in which add_many adds `jobs` (all of `type`): batch order, except that a job comes
// after every job of the batch it depends on, so that each dependency exists when its
// dependents are added. kInvalidArgument naming the jobs of a cycle, if the batch has one.
Result<std::vector<size_t>> batch_order(std::string_view type, const std::vector<NewJob>& jobs);

// For an add that writes `after` as a new job (`before` nullopt) or a finished one added anew:
// clears the edges of the job's earlier life, then for each of options.depends_on reads the
// dependency (kNotFound naming the first that does not exist) and writes its (19, 4) edge. One
// not yet ended also gets the reverse entry, its row has_dependents, and `after` waits on it;
// one ended succeeded (or failed, under kRun) resolves at once; one ended dead or cancelled
// under kCancel makes `after` finished cancelled, its error naming it.
Status add_dependencies(kv::Transaction& txn, const Keys& keys, std::string_view type,
                        std::string_view id, const std::optional<JobRow>& before, JobRow& after,
                        const AddOptions& options);

// The end of the job (type, id), whose row has has_dependents, with `outcome` (kCancelled for
// one removed before it ended), in its own transaction: resolves each unresolved edge to it,
// releasing, or cancelling (and so, through save_job, the dependents of) each job that waited
// on it. Called by save_job only.
Status resolve_dependents(kv::Transaction& txn, const Keys& keys, std::string_view type,
                          std::string_view id, Outcome outcome);

}  // namespace kvq::jobs
