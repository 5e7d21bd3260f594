#include "beanstalk/session.h"

#include <algorithm>
#include <charconv>

#include "beanstalk/stats.h"
#include "beanstalk/tubes.h"

namespace kvq::beanstalk {
namespace {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

// beanstalkd's safety margin: the last second of a reserved job's TTR.
constexpr auto kSafetyMargin = 1s;

int64_t now_ms() {
  return std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A job's id as the protocol's number; nullopt for an id that is not one (a job added over
// HTTP under another name: the protocol cannot name it).
std::optional<uint64_t> job_number(const std::string& id) {
  uint64_t number = 0;
  auto [end, error] = std::from_chars(id.data(), id.data() + id.size(), number);
  if (error != std::errc() || end != id.data() + id.size() || id.empty() || id[0] == '0')
    return std::nullopt;
  return number;
}

// The TTR as kvq's job timeout: 0 is 1 s, as in beanstalkd; beyond kMaxJobTimeout (7 days) it
// is that.
Millis job_timeout(uint32_t ttr) {
  const Millis asked = std::chrono::seconds(std::max<uint32_t>(ttr, 1));
  return std::min(asked, std::chrono::duration_cast<Millis>(jobs::kMaxJobTimeout));
}

bool fenced_or_gone(const Status& status) {
  return status.code() == Code::kFailedPrecondition || status.code() == Code::kNotFound ||
         status.code() == Code::kWrongState;
}

std::string internal_error() { return line("INTERNAL_ERROR"); }

}  // namespace

Session::Session(SessionContext& context, uint64_t number)
    : context_(context), worker_("beanstalk-" + std::to_string(number)) {
  context_.counters.connection(1);
  context_.counters.tube_gauge(used_, &TubeCounts::using_, 1);
  context_.counters.tube_gauge(watched_[0], &TubeCounts::watching, 1);
}

Session::~Session() {
  context_.counters.connection(-1);
  context_.counters.tube_gauge(used_, &TubeCounts::using_, -1);
  for (const auto& tube : watched_) context_.counters.tube_gauge(tube, &TubeCounts::watching, -1);
  if (produced_) context_.counters.producer(-1);
  if (reserved_ever_) context_.counters.worker(-1);
}

void Session::execute(Request request, Done done) {
  if (!request.command) return done(std::string(request.error) + "\r\n", false);
  const Command& command = *request.command;
  context_.counters.command(command.verb);
  switch (command.verb) {
    case Verb::kQuit: return done("", true);
    case Verb::kReserve: return reserve(std::nullopt, std::move(done));
    case Verb::kReserveWithTimeout:
      return reserve(Clock::now() + std::chrono::seconds(command.timeout), std::move(done));
    default: break;
  }
  // The connection's first use of "default" makes its type, as any tube's first use does.
  if (auto made = ensure_tube(used_); !made.ok()) return done(internal_error(), false);
  // The commands of a job's every run commit without holding this thread (the jobs layer's
  // *_async): on LMDB their commits then share write transactions with other connections'.
  switch (command.verb) {
    case Verb::kPut: return put(command, std::move(request.body), std::move(done));
    case Verb::kDelete:
      forget_expired();
      if (held(command.id)) return remove_held(command.id, std::move(done));
      return done(remove(command.id), false);
    default: return done(run(command), false);
  }
}

std::string Session::run(const Command& command) {
  forget_expired();
  switch (command.verb) {
    case Verb::kUse: return use(command.tube);
    case Verb::kWatch: return watch(command.tube);
    case Verb::kIgnore: return ignore(command.tube);
    case Verb::kReserveJob: return reserve_job(command.id);
    case Verb::kRelease: return release(command);
    case Verb::kBury: return bury(command);
    case Verb::kTouch: return touch(command.id);
    case Verb::kPeek: return peek(command.id);
    case Verb::kPeekReady: return peek_in_used(jobs::Peek::kDue);
    case Verb::kPeekDelayed: return peek_in_used(jobs::Peek::kScheduled);
    case Verb::kPeekBuried: return peek_in_used(jobs::Peek::kDead);
    case Verb::kKick: return kick(command.bound);
    case Verb::kKickJob: return kick_job(command.id);
    case Verb::kStatsJob: return stats_job(command.id);
    case Verb::kStatsTube: return stats_tube(command.tube);
    case Verb::kStats: {
      auto yaml = server_stats_yaml(context_.jobs, context_.counters, context_.max_job_size);
      return yaml.ok() ? ok_reply(*yaml) : internal_error();
    }
    case Verb::kListTubes: {
      auto tubes = list_tubes(context_.jobs);
      return tubes.ok() ? ok_reply(yaml_list(*tubes)) : internal_error();
    }
    case Verb::kListTubeUsed: return "USING " + used_ + "\r\n";
    case Verb::kListTubesWatched: return ok_reply(yaml_list(watched_));
    case Verb::kPauseTube: return pause_tube(command.tube, command.delay);
    case Verb::kPut:  // these three reply through execute()'s `done`
    case Verb::kDelete:
    case Verb::kReserve:
    case Verb::kReserveWithTimeout:
    case Verb::kQuit: break;
  }
  return internal_error();
}

// ---- Reserve ----

void Session::reserve(std::optional<Clock::time_point> timeout_at, Done done) {
  forget_expired();
  if (!reserved_ever_) {
    reserved_ever_ = true;
    context_.counters.worker(1);
  }
  const auto now = Clock::now();
  // DEADLINE_SOON: a job of this connection is in its last second, or gets there while waiting.
  const auto deadline = earliest_deadline();
  std::optional<Clock::time_point> margin_at;
  if (deadline) {
    margin_at = *deadline - kSafetyMargin;
    if (*margin_at <= now) return done(line("DEADLINE_SOON"), false);
  }
  auto wait_until = now + context_.max_wait;
  if (timeout_at) wait_until = std::min(wait_until, *timeout_at);
  const bool bound_by_margin = margin_at && *margin_at <= wait_until;
  if (bound_by_margin) wait_until = *margin_at;
  const auto wait = std::max(Millis(0), std::chrono::ceil<Millis>(wait_until - now));

  auto types = watched_types();
  for (const auto& tube : watched_) {
    if (!ensure_tube(tube).ok()) return done(internal_error(), false);
  }
  {
    util::MutexLock lock(mu_);
    if (half_closed_) return done(line("TIMED_OUT"), false);
    waiting_ = true;
  }
  context_.counters.waiting(1);
  for (const auto& tube : watched_) context_.counters.tube_gauge(tube, &TubeCounts::waiting, 1);
  jobs::AcceptOptions options{.timeout = wait, .worker = worker_};
  auto self = shared_from_this();
  const uint64_t ticket = context_.jobs.accept_any_async(
      types, options,
      [self, timeout_at, bound_by_margin, done = std::move(done)](Result<jobs::Job> job) mutable {
        {
          util::MutexLock lock(self->mu_);
          self->waiting_ = false;
          self->wait_ticket_ = 0;
        }
        self->context_.counters.waiting(-1);
        for (const auto& tube : self->watched_)
          self->context_.counters.tube_gauge(tube, &TubeCounts::waiting, -1);
        // on_reserved may call the store (a snooze, another wait): not on the jobs layer's thread.
        self->context_.run_blocking([self, job = std::move(job), timeout_at, bound_by_margin,
                                     done = std::move(done)]() mutable {
          self->on_reserved(std::move(job), timeout_at, bound_by_margin, std::move(done));
        });
      });
  util::MutexLock lock(mu_);
  if (!waiting_ || ticket == 0) return;
  wait_ticket_ = ticket;
  if (!half_closed_) return;
  lock.unlock();
  context_.jobs.cancel_accept(ticket);
}

void Session::on_reserved(Result<jobs::Job> job, std::optional<Clock::time_point> timeout_at,
                          bool bound_by_margin, Done done) {
  bool half_closed = false;
  {
    util::MutexLock lock(mu_);
    half_closed = half_closed_;
  }
  if (job.ok()) {
    const auto number = job_number(job->id);
    if (half_closed || !number) {
      // Taken for a client that has gone, or a job the protocol cannot name: handed back as it
      // was, at once.
      context_.jobs.snooze(*job).ignore();
      return done(half_closed ? line("TIMED_OUT") : internal_error(), false);
    }
    std::string reply = job_reply("RESERVED", *number, job->data);
    hold(std::move(*job));
    return done(std::move(reply), false);
  }
  if (half_closed || job.code() == Code::kCancelled) return done(line("TIMED_OUT"), false);
  // A watched tube's type was deleted (over HTTP) since this session made it: the next
  // reserve makes it again.
  if (job.code() == Code::kNotFound) ensured_.clear();
  if (job.code() != Code::kDeadlineExceeded) return done(internal_error(), false);
  if (bound_by_margin) return done(line("DEADLINE_SOON"), false);
  if (timeout_at && Clock::now() + 5ms >= *timeout_at) return done(line("TIMED_OUT"), false);
  // A plain reserve's wait ended (context_.max_wait), or the jobs layer woke it early: again.
  reserve(timeout_at, std::move(done));
}

void Session::half_closed() {
  util::MutexLock lock(mu_);
  half_closed_ = true;
  if (!waiting_ || wait_ticket_ == 0) return;
  const uint64_t ticket = wait_ticket_;
  lock.unlock();
  context_.jobs.cancel_accept(ticket);
}

void Session::close() {
  forget_expired();
  for (auto& [id, held] : held_) context_.jobs.snooze(held.job).ignore();
  held_.clear();
}

void Session::forget_expired() {
  const auto now = Clock::now();
  std::erase_if(held_, [now](const auto& entry) { return entry.second.deadline <= now; });
}

std::optional<Session::Clock::time_point> Session::earliest_deadline() const {
  std::optional<Clock::time_point> earliest;
  for (const auto& [id, held] : held_) {
    if (!earliest || held.deadline < *earliest) earliest = held.deadline;
  }
  return earliest;
}

Session::Held* Session::held(uint64_t id) {
  forget_expired();
  auto found = held_.find(id);
  return found == held_.end() ? nullptr : &found->second;
}

void Session::hold(jobs::Job job) {
  const auto timeout = job.timeout > Millis(0) ? job.timeout : Millis(1000);
  const auto number = *job_number(job.id);
  held_[number] = Held{std::move(job), Clock::now() + timeout};
}

// ---- Tubes ----

Result<std::optional<std::string>> Session::ensure_tube(const std::string& tube) {
  auto type = type_of_tube(tube);
  if (!type) return std::optional<std::string>();
  if (ensured_.contains(*type)) return type;
  auto made = context_.jobs.ensure_type(*type, tube_type_settings());
  if (!made.ok()) return made.status();
  ensured_.insert(*type);
  return type;
}

std::vector<std::string> Session::watched_types() const {
  std::vector<std::string> types;
  for (const auto& tube : watched_) types.push_back(*type_of_tube(tube));
  return types;
}

std::string Session::use(const std::string& tube) {
  auto type = ensure_tube(tube);
  if (!type.ok()) return internal_error();
  if (!*type) return line("BAD_FORMAT");  // over kMaxTypeBytes once escaped
  context_.counters.tube_gauge(used_, &TubeCounts::using_, -1);
  used_ = tube;
  context_.counters.tube_gauge(used_, &TubeCounts::using_, 1);
  return "USING " + tube + "\r\n";
}

std::string Session::watch(const std::string& tube) {
  if (std::find(watched_.begin(), watched_.end(), tube) == watched_.end()) {
    // accept_any takes at most kMaxAcceptTypes types (docs/beanstalk.md).
    if (watched_.size() >= jobs::kMaxAcceptTypes) return line("BAD_FORMAT");
    auto type = ensure_tube(tube);
    if (!type.ok()) return internal_error();
    if (!*type) return line("BAD_FORMAT");
    watched_.push_back(tube);
    context_.counters.tube_gauge(tube, &TubeCounts::watching, 1);
  }
  return line("WATCHING", watched_.size());
}

std::string Session::ignore(const std::string& tube) {
  auto found = std::find(watched_.begin(), watched_.end(), tube);
  if (found != watched_.end()) {
    if (watched_.size() == 1) return line("NOT_IGNORED");
    watched_.erase(found);
    context_.counters.tube_gauge(tube, &TubeCounts::watching, -1);
  }
  return line("WATCHING", watched_.size());
}

std::string Session::pause_tube(const std::string& tube, uint32_t delay) {
  auto type = type_of_tube(tube);
  if (!type) return line("NOT_FOUND");
  Status paused = context_.jobs.pause_type(*type, now_ms() + int64_t{delay} * 1000);
  if (paused.code() == Code::kNotFound) return line("NOT_FOUND");
  if (!paused.ok()) return internal_error();
  context_.counters.paused(tube, delay);
  return line("PAUSED");
}

// ---- Jobs ----

void Session::put(const Command& command, std::string body, Done done) {
  forget_expired();
  auto type = type_of_tube(used_);
  auto number = context_.jobs.next_job_number();
  if (!number.ok()) return done(internal_error(), false);
  jobs::AddOptions options{
      .scheduled_time_ms = now_ms() + int64_t{command.delay} * 1000,
      .priority = command.priority,
      .if_exists = jobs::IfExists::kKeep,
      .timeout = job_timeout(command.ttr),
      .data_format = jobs::DataFormat::kBytes,
      .global_id = true,
      // Made again if it is missing: deleted over HTTP since this session made it.
      .create_type = tube_type_settings(),
  };
  // The add copies the body before it returns.
  context_.jobs.add_async(*type, std::to_string(*number), body, options,
                          [self = shared_from_this(), number = *number,
                           done = std::move(done)](Result<jobs::AddResult> added) {
                            if (!added.ok()) return done(internal_error(), false);
                            if (!self->produced_) {
                              self->produced_ = true;
                              self->context_.counters.producer(1);
                            }
                            self->context_.counters.put(self->used_);
                            done(line("INSERTED", number), false);
                          });
}

std::string Session::reserve_job(uint64_t id) {
  auto type = context_.jobs.type_of(std::to_string(id));
  if (!type.ok()) return type.code() == Code::kNotFound ? line("NOT_FOUND") : internal_error();
  auto job = context_.jobs.accept_job(*type, std::to_string(id), {.worker = worker_});
  if (!job.ok()) return fenced_or_gone(job.status()) ? line("NOT_FOUND") : internal_error();
  std::string reply = job_reply("RESERVED", id, job->data);
  if (!reserved_ever_) {
    reserved_ever_ = true;
    context_.counters.worker(1);
  }
  hold(std::move(*job));
  return reply;
}

// The reply to a delete, counted in the tube's stats when it deleted the job.
std::string Session::deleted(const Status& removed, const std::optional<std::string>& tube) {
  if (fenced_or_gone(removed)) return line("NOT_FOUND");
  if (!removed.ok()) return internal_error();
  if (tube) context_.counters.deleted(*tube);
  return line("DELETED");
}

void Session::remove_held(uint64_t id, Done done) {
  auto mine = held_.extract(id);
  jobs::Job job = std::move(mine.mapped().job);
  std::optional<std::string> tube = tube_of_type(job.type);
  context_.jobs.remove_async(
      std::move(job), [self = shared_from_this(), tube = std::move(tube), done = std::move(done)](
                          Status removed) { done(self->deleted(removed, tube), false); });
}

std::string Session::remove(uint64_t id) {
  // Not this connection's (execute() deletes a held job with remove_held): beanstalkd deletes a
  // ready, delayed or buried job, never one another connection has reserved.
  auto type = context_.jobs.type_of(std::to_string(id));
  if (!type.ok()) return type.code() == Code::kNotFound ? line("NOT_FOUND") : internal_error();
  return deleted(context_.jobs.remove(*type, std::to_string(id), {.unless_running = true}),
                 tube_of_type(*type));
}

std::string Session::release(const Command& command) {
  Held* mine = held(command.id);
  if (!mine) return line("NOT_FOUND");
  Status snoozed = context_.jobs.snooze(
      mine->job, {.delay = std::chrono::seconds(command.delay), .priority = command.priority});
  held_.erase(command.id);
  if (fenced_or_gone(snoozed)) return line("NOT_FOUND");
  return snoozed.ok() ? line("RELEASED") : internal_error();
}

std::string Session::bury(const Command& command) {
  Held* mine = held(command.id);
  if (!mine) return line("NOT_FOUND");
  // The dead state: no retry, whatever attempts are left, until a kick reruns it.
  auto failed = context_.jobs.fail(mine->job, {.message = "buried by its beanstalkd client",
                                               .kind = "buried",
                                               .retry = false,
                                               .priority = command.priority});
  held_.erase(command.id);
  if (!failed.ok()) return fenced_or_gone(failed.status()) ? line("NOT_FOUND") : internal_error();
  return line("BURIED");
}

std::string Session::touch(uint64_t id) {
  Held* mine = held(id);
  if (!mine) return line("NOT_FOUND");
  auto updated = context_.jobs.update(mine->job);
  if (!updated.ok()) {
    held_.erase(id);
    return fenced_or_gone(updated.status()) ? line("NOT_FOUND") : internal_error();
  }
  const auto timeout = mine->job.timeout > Millis(0) ? mine->job.timeout : Millis(1000);
  mine->deadline = Clock::now() + timeout;
  return line("TOUCHED");
}

std::string Session::peek(uint64_t id) {
  auto type = context_.jobs.type_of(std::to_string(id));
  if (!type.ok()) return type.code() == Code::kNotFound ? line("NOT_FOUND") : internal_error();
  auto job = context_.jobs.get(*type, std::to_string(id));
  if (!job.ok()) return job.code() == Code::kNotFound ? line("NOT_FOUND") : internal_error();
  if (!beanstalk_state(*job, now_ms())) return line("NOT_FOUND");
  return job_reply("FOUND", id, job->data);
}

std::string Session::peek_in_used(jobs::Peek which) {
  auto job = context_.jobs.peek(*type_of_tube(used_), which);
  if (!job.ok()) return job.code() == Code::kNotFound ? line("NOT_FOUND") : internal_error();
  auto number = job_number(job->id);
  if (!number) return line("NOT_FOUND");
  return job_reply("FOUND", *number, job->data);
}

std::string Session::kick(uint32_t bound) {
  auto kicked = context_.jobs.kick(*type_of_tube(used_), bound);
  return kicked.ok() ? line("KICKED", *kicked) : internal_error();
}

std::string Session::kick_job(uint64_t id) {
  const std::string name = std::to_string(id);
  auto type = context_.jobs.type_of(name);
  if (!type.ok()) return type.code() == Code::kNotFound ? line("NOT_FOUND") : internal_error();
  // kWrongState: a ready or reserved job, which beanstalkd does not kick either.
  Status kicked = context_.jobs.kick_job(*type, name);
  if (fenced_or_gone(kicked)) return line("NOT_FOUND");
  return kicked.ok() ? line("KICKED") : internal_error();
}

std::string Session::stats_job(uint64_t id) {
  const std::string name = std::to_string(id);
  auto type = context_.jobs.type_of(name);
  if (!type.ok()) return type.code() == Code::kNotFound ? line("NOT_FOUND") : internal_error();
  auto job = context_.jobs.get(*type, name);
  if (!job.ok()) return job.code() == Code::kNotFound ? line("NOT_FOUND") : internal_error();
  std::optional<Millis> time_left;
  if (Held* mine = held(id)) {
    time_left = std::chrono::duration_cast<Millis>(mine->deadline - Clock::now());
  }
  auto yaml = job_stats_yaml(*job, now_ms(), time_left);
  return yaml ? ok_reply(*yaml) : line("NOT_FOUND");
}

std::string Session::stats_tube(const std::string& tube) {
  auto type = type_of_tube(tube);
  if (!type) return line("NOT_FOUND");
  auto yaml = tube_stats_yaml(context_.jobs, context_.counters, tube, *type, now_ms());
  if (!yaml.ok()) return yaml.code() == Code::kNotFound ? line("NOT_FOUND") : internal_error();
  return ok_reply(*yaml);
}

}  // namespace kvq::beanstalk
