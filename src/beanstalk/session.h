// beanstalk/session.h — one beanstalkd connection's state and commands, over the public jobs API.
//
// A Session holds what beanstalkd keeps per connection: the tube it uses, the tubes it watches
// (initially "default"), and the jobs it has reserved — each as the kvq Job handle whose lock
// fences it. Each command is one jobs call (docs/beanstalk.md gives the mapping), after a
// type_of for a command that names a job by its id alone; the session decides nothing about
// jobs itself. Commands on a job that the connection does not
// hold (release, bury, touch, and delete of a running job) answer NOT_FOUND, as beanstalkd's do;
// so does any call the store fences (kFailedPrecondition: the job's TTR ran out and it went
// back, or someone removed it).
//
// What it promises:
// - execute() runs one command and calls `done` exactly once with the reply's bytes, possibly
//   from another thread, possibly later (a reserve waits). A caller runs one command at a time.
//   Its `close` flag says the connection should close after the reply (quit).
// - A waiting reserve holds no thread: it is an Jobs::accept_any_async over the watched tubes'
//   types, whose wait is bounded by the reserve's timeout and by DEADLINE_SOON's margin.
// - Short store calls run inside execute(): the caller runs it where blocking briefly is fine
//   (the listener's worker pool).
// - close(), after the last command's `done`, hands back at once every job the connection
//   holds (see close()). half_closed() says the client will send nothing more: a waiting reserve
//   then answers TIMED_OUT at once, as every later one does (protocol.txt: "if the client's
//   connection is half-closed, the server will respond with TIMED_OUT").
//
// Thread-safety: execute() and close() are called one at a time (the caller serialises them);
// half_closed() may be called from any thread at any time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "beanstalk/counters.h"
#include "beanstalk/protocol.h"
#include "kvq/jobs.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace kvq::beanstalk {

// What every session of one listener shares.
struct SessionContext {
  jobs::Jobs& jobs;
  Counters& counters;
  size_t max_job_size = kDefaultMaxJobSize;
  // Runs `task` where it may block briefly (the listener's worker pool): the end of a reserve,
  // which comes from the jobs layer's threads, which must not be blocked.
  std::function<void(std::function<void()>)> run_blocking;
  // The longest a reserve's single wait lasts before it looks again (a plain `reserve` waits
  // for ever, as a loop of such waits).
  std::chrono::milliseconds max_wait{3'600'000};
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  using Clock = std::chrono::steady_clock;
  // The reply's bytes, and whether to close the connection after it (quit: then "").
  using Done = std::function<void(std::string reply, bool close)>;

  // `number` names the connection as the jobs' worker ("beanstalk-<number>"), which shows
  // over HTTP as the job's worker; nothing else uses it.
  Session(SessionContext& context, uint64_t number);
  ~Session();

  void execute(Request request, Done done);
  // The client has ended its side: a waiting reserve, and every later one, answers TIMED_OUT.
  void half_closed() KVQ_EXCLUDES(mu_);
  // The connection is gone: each job it holds goes back to ready at once with Jobs::snooze on
  // its handle — not counted as an attempt or a lost run, as beanstalkd does not count it as a
  // timeout. (Jobs::release_worker would count each as a lost run, and would need a worker
  // name unique across every process sharing the store.) A handle that the store fences (its
  // TTR ran out) is left to whoever has the job now. If this process dies instead, each job
  // comes back when its TTR runs out (the activity monitor).
  void close();

 private:
  // A job this connection holds, and when its TTR runs out by this process's clock.
  struct Held {
    jobs::Job job;
    Clock::time_point deadline;
  };
  using HeldMap = std::map<uint64_t, Held>;

  std::string run(const Command& command);  // the commands that reply at once
  void reserve(std::optional<Clock::time_point> timeout_at, Done done);
  void on_reserved(Result<jobs::Job> job, std::optional<Clock::time_point> timeout_at,
                   bool bound_by_margin, Done done);
  // Drops the jobs whose TTR has run out: they are no longer this connection's (beanstalkd
  // takes them back then; kvq's activity monitor does, at most about a quarter TTR later).
  void forget_expired();
  std::optional<Clock::time_point> earliest_deadline() const;
  Held* held(uint64_t id);
  void hold(jobs::Job job);

  // put and the delete of a held job reply through `done` once their commit settles.
  void put(const Command& command, std::string body, Done done);
  void remove_held(uint64_t id, Done done);
  std::string deleted(const Status& removed, const std::optional<std::string>& tube);
  std::string use(const std::string& tube);
  std::string watch(const std::string& tube);
  std::string ignore(const std::string& tube);
  std::string reserve_job(uint64_t id);
  std::string remove(uint64_t id);  // of a job this connection does not hold
  std::string release(const Command& command);
  std::string bury(const Command& command);
  std::string touch(uint64_t id);
  std::string peek(uint64_t id);
  std::string peek_in_used(jobs::Peek which);
  std::string kick(uint32_t bound);
  std::string kick_job(uint64_t id);
  std::string stats_job(uint64_t id);
  std::string stats_tube(const std::string& tube);
  std::string pause_tube(const std::string& tube, uint32_t delay);
  // The type of a tube this connection names, made with tube_type_settings() if new; nullopt
  // when the tube's name is too long for a type.
  Result<std::optional<std::string>> ensure_tube(const std::string& tube);
  std::vector<std::string> watched_types() const;

  SessionContext& context_;
  const std::string worker_;
  std::string used_ = "default";
  std::vector<std::string> watched_{"default"};
  bool produced_ = false;
  bool reserved_ever_ = false;
  HeldMap held_;
  // Types this session has made sure exist: one ensure_type per tube and connection, not per
  // command.
  std::set<std::string> ensured_;

  util::Mutex mu_;
  uint64_t wait_ticket_ KVQ_GUARDED_BY(mu_) = 0;
  bool waiting_ KVQ_GUARDED_BY(mu_) = false;
  bool half_closed_ KVQ_GUARDED_BY(mu_) = false;
};

}  // namespace kvq::beanstalk
