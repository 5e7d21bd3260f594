// jobs/pending_api.cc — TEMPORARY: the calls declared for issue 22 (beanstalkd protocol) that
// the jobs layer does not implement yet answer kInternal, so that front ends can build against
// the declared API. Each moves to its own file as it is implemented; this file then goes.
#include "kvq/jobs.h"

namespace kvq::jobs {
namespace {
Status not_yet(const char* what) { return Internal(std::string(what) + " is not implemented yet"); }
}  // namespace

Result<Job> Jobs::accept_any(const std::vector<std::string>&, const AcceptOptions&) {
  return not_yet("accept_any");
}
uint64_t Jobs::accept_any_async(const std::vector<std::string>&, const AcceptOptions&,
                                std::function<void(Result<Job>)> done) {
  done(not_yet("accept_any_async"));
  return 0;
}
Result<Job> Jobs::accept_job(std::string_view, std::string_view, const AcceptOptions&) {
  return not_yet("accept_job");
}
Result<std::optional<Job>> Jobs::finish_and_accept(Job&, const FinishOptions&,
                                                   const std::vector<std::string>&,
                                                   const AcceptOptions&) {
  return not_yet("finish_and_accept");
}
void Jobs::finish_and_accept_async(Job, FinishOptions, std::vector<std::string>, AcceptOptions,
                                   std::function<void(Result<std::optional<Job>>)> done) {
  done(not_yet("finish_and_accept_async"));
}

}  // namespace kvq::jobs
