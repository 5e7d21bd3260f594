// jobs/acceptor.h — serves every accept that has to wait, from one thread per Jobs.
//
// A waiting accept is a queued callback, not a blocked thread, so a server can hold many
// thousands of long-polls. Per type, waiters are served in arrival order. The acceptor holds
// the notifier's pending interest for a type while it has waiters there, and makes a round of
// attempts whenever the type's pending generation moves (see notifier.h for why that misses no
// add), when the earliest delayed job falls due, and expires waiters at their deadlines.
// Waiters with the same options share a round: one that finds nothing due stands for them all.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "jobs/notifier.h"
#include "jobs/schema.h"
#include "kvq/jobs.h"

namespace kvq::jobs {

// One accept attempt in its own transaction (with retries, recognising its own earlier commit
// after an unknown result). kNotFound when nothing is due; *next_due then holds the earliest
// scheduled time of a pending job not yet due, if any.
Result<Job> attempt_accept(kv::Store& store, const Keys& keys, const JobsOptions& options, std::string_view type,
                           const AcceptOptions& accept, const std::string& lock, std::optional<int64_t>* next_due);

class Acceptor {
 public:
  using Callback = std::function<void(Result<Job>)>;

  Acceptor(kv::Store& store, const Keys& keys, const JobsOptions& options, Notifier& notifier);
  // Ends every waiter with kCancelled.
  ~Acceptor();

  // Queues a waiter. `generation` is the type's pending generation read before the caller's own
  // last attempt. Returns a ticket for cancel().
  uint64_t submit(const std::string& type, const AcceptOptions& options, const std::string& lock,
                  kv::Clock::time_point deadline, uint64_t generation, Callback callback);
  // Ends the waiter with kCancelled if it has not completed; returns whether it did.
  bool cancel(uint64_t ticket);

 private:
  struct Waiter {
    uint64_t ticket;
    AcceptOptions options;
    std::string lock;
    kv::Clock::time_point deadline;
    Callback callback;
  };
  struct Queue {
    std::deque<Waiter> waiters;
    uint64_t seen_generation = 0;
    bool attempt = false;
    std::optional<kv::Clock::time_point> next_due;
  };
  using Done = std::vector<std::pair<Callback, Result<Job>>>;

  void run();
  void round(const std::string& type, std::unique_lock<std::mutex>& lock, Done& done);
  void expire(const std::string& type, Queue& queue, kv::Clock::time_point now, Done& done);
  kv::Clock::time_point next_wake(kv::Clock::time_point now) const;
  // Erases an empty queue and releases its pending interest. REQUIRES: mu_ held.
  void drop_if_empty(std::map<std::string, Queue>::iterator it);

  kv::Store& store_;
  const Keys& keys_;
  const JobsOptions& options_;
  Notifier& notifier_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Queue> queues_;
  uint64_t next_ticket_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvq::jobs
