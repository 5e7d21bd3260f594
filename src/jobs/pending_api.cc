// jobs/pending_api.cc — TEMPORARY: the calls declared for issue 22 (beanstalkd protocol) that
// the jobs layer does not implement yet answer kInternal, so that front ends can build against
// the declared API. Each moves to its own file as it is implemented; this file then goes.
#include "kvq/jobs.h"

namespace kvq::jobs {
namespace {
Status not_yet(const char* what) { return Internal(std::string(what) + " is not implemented yet"); }
}  // namespace

std::string_view data_format_name(DataFormat format) {
  return format == DataFormat::kBytes ? "bytes" : "json";
}
Result<bool> Jobs::ensure_type(std::string_view, const TypeSettings&) {
  return not_yet("ensure_type");
}
Result<uint64_t> Jobs::rerun_some(std::string_view, Outcome, size_t) {
  return not_yet("rerun_some");
}
Status Jobs::reschedule(std::string_view, std::string_view, const RescheduleOptions&) {
  return not_yet("reschedule");
}
Result<uint64_t> Jobs::make_due(std::string_view, size_t) { return not_yet("make_due"); }
Status Jobs::remove(std::string_view, std::string_view, const RemoveOptions&) {
  return not_yet("remove with options");
}
Result<std::string> Jobs::type_of(std::string_view) { return not_yet("type_of"); }
Result<uint64_t> Jobs::next_job_number() { return not_yet("next_job_number"); }
Result<JobInfo> Jobs::peek(std::string_view, Peek) { return not_yet("peek"); }
Status Jobs::remove(Job&) { return not_yet("remove(Job&)"); }
void Jobs::remove_async(Job, std::function<void(Status)> done) { done(not_yet("remove_async")); }
Status Jobs::remove(kv::Transaction&, Job&) { return not_yet("remove(txn, Job&)"); }

}  // namespace kvq::jobs
