// server/long_poll.h — an exchange that waits (a long-poll, an event stream) and must end
// exactly once: with the answer to what it waits for, at its deadline, at server shutdown
// (Api::end_all_waiting) or when the client goes away.
//
// A route creates one, arms it, then starts what it waits for, whose callbacks answer through
// finish(). The first of the deadline, shutdown and the client going away calls the route's
// `give_up` (once, and never after finish): it answers through finish() itself (a wait's 204),
// or asks what it waits for to stop, whose callback then answers (an accept's cancel). Once
// finished, the timer and the shutdown hold are released and what keep() was given is dropped,
// off the finishing thread.
//
// Thread-safety: every member may be called from any thread, including from the callbacks of
// what it keeps.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "kvq/kv.h"
#include "server/api.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace kvq::server {

class LongPoll : public std::enable_shared_from_this<LongPoll> {
 public:
  using GiveUp = std::function<void(LongPoll&)>;

  // REQUIRES: `api` outlives the poll (the server ends every poll before it goes).
  static std::shared_ptr<LongPoll> create(Api& api);

  // Watches `ex` for its client going away, the server for shutdown and, with a deadline, the
  // clock; the first calls `give_up`. Does nothing once finished.
  void arm(Exchange& ex, std::optional<kv::Clock::time_point> deadline, GiveUp give_up)
      KVQ_EXCLUDES(mu_);
  // Ends the poll with `answer` (which replies or ends the stream) unless it has ended; returns
  // whether `answer` ran.
  bool finish(const std::function<void()>& answer) KVQ_EXCLUDES(mu_);
  // Runs `part` (a stream's event) unless the poll has ended, and never concurrently with the
  // answer's start: an event cannot follow the end of its stream. Returns whether it ran.
  // `part` must not block or call back into the poll.
  bool while_open(const std::function<void()>& part) KVQ_EXCLUDES(mu_);
  // Holds `resource` (a subscription) until the poll ends, then drops it on the timers' thread:
  // the finishing thread may be the resource's own callback, which its destructor would wait
  // for. Dropped at once if the poll has already ended.
  void keep(std::shared_ptr<void> resource) KVQ_EXCLUDES(mu_);

  explicit LongPoll(Api& api) : api_(api) {}

 private:
  void give_up() KVQ_EXCLUDES(mu_);
  void drop_later(std::vector<std::shared_ptr<void>> resources);

  Api& api_;
  // Held while calling into api_.timers and api_.hold/release (whose mutexes it precedes),
  // never while calling give_up_ or a finish's answer.
  util::Mutex mu_;
  bool finished_ KVQ_GUARDED_BY(mu_) = false;
  bool gave_up_ KVQ_GUARDED_BY(mu_) = false;
  uint64_t timer_ KVQ_GUARDED_BY(mu_) = 0;
  uint64_t held_ KVQ_GUARDED_BY(mu_) = 0;
  GiveUp give_up_ KVQ_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<void>> kept_ KVQ_GUARDED_BY(mu_);
};

}  // namespace kvq::server
