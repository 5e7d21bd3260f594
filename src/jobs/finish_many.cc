// jobs/finish_many.cc — Jobs::finish_many: a worker's finishes of several jobs it holds, in one
// transaction (the batched path: one commit where finish() spends one per job).
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "jobs/jobs_impl.h"
#include "jobs/type_stats.h"
#include "jobs/worker_calls.h"

namespace kvq::jobs {
namespace {

// Errors of finish_checked that decide about its job alone, before it writes anything (the
// handle is fenced out, the job is gone): that job's finish fails and the others commit. Any
// other error is the transaction's.
bool decided_alone(const Status& status) {
  const Code code = status.code();
  return code == Code::kFailedPrecondition || code == Code::kNotFound || code == Code::kWrongState;
}

struct ManyInput {
  std::vector<Job> jobs;
  std::vector<Checked> checked;
};

// The handles and their input, checked: kInvalidArgument naming the first job that is not.
Result<std::shared_ptr<ManyInput>> check_many(std::vector<Job> jobs,
                                              const std::vector<FinishOptions>& options,
                                              size_t max_data_bytes) {
  if (jobs.empty() || jobs.size() > kMaxFinishMany) {
    return InvalidArgument("finish_many wants 1.." + std::to_string(kMaxFinishMany) +
                           " jobs, not " + std::to_string(jobs.size()));
  }
  if (!options.empty() && options.size() != jobs.size()) {
    return InvalidArgument("finish_many wants one FinishOptions per job, or none");
  }
  auto input = std::make_shared<ManyInput>();
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& job = jobs[i];
    if (!seen.emplace(job.type, job.id).second) {
      return InvalidArgument("job '" + job.id + "' of type '" + job.type +
                             "' is given twice to finish_many");
    }
    auto checked =
        check_finish(job, options.empty() ? FinishOptions{} : options[i], max_data_bytes);
    if (!checked.ok()) {
      return InvalidArgument("job '" + job.id + "' of type '" + job.type +
                             "': " + checked.status().message());
    }
    input->checked.push_back(std::move(*checked));
  }
  input->jobs = std::move(jobs);
  return input;
}

// One try of the batch, as run_call's allowing_stale_reads and counting do for one finish: a
// decision made on a read that may be behind is confirmed on a current one, and a job's finish
// counts for the stats unless it recognised a commit an earlier call made.
class FinishManyTry {
 public:
  FinishManyTry(const Keys& keys, std::shared_ptr<ManyInput> input)
      : keys_(keys), input_(std::move(input)), wrote_(input_->jobs.size(), false) {}

  Result<std::vector<Result<Finished>>> operator()(kv::Transaction& txn) {
    const bool stale = !confirming_ && txn.allow_stale_reads();
    std::vector<Result<Finished>> each;
    each.reserve(input_->jobs.size());
    bool any_alone = false;
    for (size_t i = 0; i < input_->jobs.size(); ++i) {
      auto finished = finish_checked(txn, keys_, input_->jobs[i], input_->checked[i]);
      // A run that stopped at a read not yet made decides nothing (kv::RetryOptions::replayable).
      if (txn.has_deferred_reads()) return each;
      if (!finished.ok()) {
        if (!decided_alone(finished.status())) return finished.status();
        any_alone = true;
      }
      each.push_back(std::move(finished));
    }
    if (stale && any_alone) return confirm_on_current_read(confirming_);
    for (size_t i = 0; i < each.size(); ++i) {
      if (!each[i].ok()) continue;
      each[i]->counted = !each[i]->recognised || wrote_[i];
      if (!each[i]->recognised) wrote_[i] = true;
    }
    return each;
  }

 private:
  const Keys& keys_;
  std::shared_ptr<ManyInput> input_;
  std::vector<bool> wrote_;  // per job: a try of this call wrote its finish
  bool confirming_ = false;
};

// The type stats' record of what committed, and each job's outcome.
std::vector<Status> outcomes(TypeStatsRecorder& stats, const ManyInput& input,
                             std::vector<Result<Finished>> each) {
  std::vector<Status> out;
  out.reserve(each.size());
  for (size_t i = 0; i < each.size(); ++i) {
    if (each[i].ok() && each[i]->counted) {
      stats.record_finished(input.jobs[i].type, each[i]->succeeded,
                            run_time_since(each[i]->started));
    }
    out.push_back(each[i].status());
  }
  return out;
}

}  // namespace

Result<std::vector<Status>> Jobs::finish_many(const std::vector<Job>& jobs,
                                              const std::vector<FinishOptions>& options) {
  KVQ_ASSIGN_OR_RETURN(auto input, check_many(jobs, options, options_.max_data_bytes));
  FinishManyTry attempt(impl_->keys, input);
  KVQ_ASSIGN_OR_RETURN(
      auto each, kv::run(
                     *store_, [&](kv::Transaction& txn) { return attempt(txn); }, options_.retry));
  return outcomes(impl_->type_stats, *input, std::move(each));
}

void Jobs::finish_many_async(std::vector<Job> jobs, std::vector<FinishOptions> options,
                             std::function<void(Result<std::vector<Status>>)> done) {
  auto input = check_many(std::move(jobs), options, options_.max_data_bytes);
  if (!input.ok()) return done(input.status());
  auto attempt = std::make_shared<FinishManyTry>(impl_->keys, *input);
  kv::run_async(
      *store_, [attempt](kv::Transaction& txn) { return (*attempt)(txn); },
      [impl = impl_.get(), input = *input,
       done = std::move(done)](Result<std::vector<Result<Finished>>> each) {
        if (!each.ok()) return done(each.status());
        done(outcomes(impl->type_stats, *input, std::move(*each)));
      },
      kv::replayable(options_.retry));
}

}  // namespace kvq::jobs
