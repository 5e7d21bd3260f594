// kvq/workers.h — worker membership and health on any kv::Store (completing CouchDB's
// couch_workers prototype).
//
// A worker registers under a worker type and an id with some JSON info and a health timeout.
// The registering process keeps it alive with heartbeats (about every third of its timeout,
// jittered) until it unregisters or its last Registration handle is destroyed. Anyone can list
// the live workers of a type with a membership version, or subscribe to changes.
//
// A worker whose heartbeats stop is declared dead after its health timeout and removed. As with
// job activity, death is judged from the store's commit order between a monitor's own checks
// (measured on that monitor's own monotonic clock), never by comparing clocks of different
// machines: a worker is dead once it has not heartbeated since a check made at least one
// health timeout ago. Checks come about every quarter of the shortest timeout of the type
// (±20%), and the first check after the last heartbeat may come up to a period later, so a
// worker disappears between one timeout and about 1.6 timeouts after its last heartbeat.
// Every process that opens a Workers runs such a monitor; any number may run at once.
//
// The membership version of a type changes exactly when its set of workers changes (a join, a
// leave, a death, a take-over), never on a heartbeat.
//
// Joined to the jobs layer: set WorkersOptions::on_departure to a function that runs in the
// transaction removing a worker — typically `jobs->release_worker(txn, type, id)`, with workers
// accepting jobs under their registered type and id (AcceptOptions::worker_type and ::worker:
// an id is unique only within its type). Then the jobs a worker
// holds go back to pending the moment it unregisters or is declared dead, instead of after
// their activity timeout (each a lost run: see Jobs::set_max_lost_runs), and its later calls on
// them halt.
//
// Limits: worker type 1..64 bytes of [A-Za-z0-9_.:-]; id 1..256 bytes without control
// characters; info a JSON object of at most 64 KiB; health timeout at least 100 ms.
//
// Thread-safety: Workers and Registration are safe to use from many threads. Subscription
// callbacks run on a background thread of the Workers, one at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/kv.h"
#include "kvq/status.h"

namespace kvq::workers {

using Millis = std::chrono::milliseconds;

inline constexpr Millis kMinHealthTimeout{100};
inline constexpr size_t kMaxInfoBytes = 64 * 1024;

struct WorkersOptions {
  // Shared with the jobs layer by default (jobs use subspace ids 1–19, workers 20–39).
  std::string key_prefix = "kvq";
  bool run_health_monitor = true;
  // Called inside the transaction that removes a worker (unregister, death or take-over), with
  // its type and id. An error aborts that removal, which is retried later. It may run on the
  // health monitor's thread or in a Registration's unregister(), and like any transactional
  // function it may run several times (kv::run). REQUIRES: what it uses outlives the Workers and
  // every Registration it handed out (a Registration can unregister after its Workers is gone).
  std::function<Status(kv::Transaction&, const std::string& type, const std::string& id)>
      on_departure;
  kv::RetryOptions retry;
};

struct RegisterOptions {
  std::string info = "{}";  // a JSON object describing the worker (host, pid, version...)
  Millis health_timeout{10'000};
  // Replace a live registration of the same id made elsewhere (another process) instead of
  // failing with kAlreadyExists. The replaced one is told it was lost at its next heartbeat.
  bool take_over = false;
};

struct WorkerInfo {
  std::string type;
  std::string id;
  std::string info;  // JSON object text
  int64_t registered_at_ms = 0;
  int64_t last_heartbeat_ms = 0;
  Millis health_timeout{0};
};

struct Membership {
  std::vector<WorkerInfo> workers;  // in id order
  uint64_t version = 0;             // 0 if the type never had a worker
};

// A live registration. Heartbeats run in the background while any handle to it exists.
class Registration {
 public:
  virtual ~Registration() = default;
  virtual const std::string& type() const = 0;
  virtual const std::string& id() const = 0;
  // Stops heartbeats and removes the worker (running on_departure). Idempotent.
  virtual Status unregister() = 0;
  // True once the worker was declared dead or taken over: its heartbeats have stopped and it
  // must stop working. Registering again makes a new registration.
  virtual bool lost() const = 0;
  // Sends a heartbeat now (they also run by themselves). kFailedPrecondition once lost.
  virtual Status heartbeat() = 0;
};

// Ends delivery when destroyed (waiting for a callback in progress to return).
// REQUIRES: not destroyed from inside its own callback (that wait would never end).
class MembershipSubscription {
 public:
  virtual ~MembershipSubscription() = default;
};

class Workers {
 public:
  static Result<std::unique_ptr<Workers>> open(std::shared_ptr<kv::Store> store,
                                               WorkersOptions options = {});
  virtual ~Workers() = default;

  // Registers (type, id). Registering an id this Workers already holds returns the same
  // registration; an id alive elsewhere is kAlreadyExists unless options.take_over.
  virtual Result<std::shared_ptr<Registration>> register_worker(
      std::string_view type, std::string_view id, const RegisterOptions& options = {}) = 0;

  // The same registration without a handle, for a worker that heartbeats itself from
  // elsewhere (an HTTP client): nothing heartbeats it and nothing unregisters it; the caller
  // keeps the returned token and passes it to heartbeat/unregister below, on any process.
  virtual Result<std::string> register_remote(std::string_view type, std::string_view id,
                                              const RegisterOptions& options = {}) = 0;
  // The token is a secret of 128 random bits from the kernel (hex): whoever has it controls the
  // registration. Tokens are compared in constant time.
  //
  // heartbeat: OK if `token` holds the worker. kFailedPrecondition if the worker is gone
  // (declared dead or unregistered) or `token` is the one its current registration took over:
  // stop, register again. kPermissionDenied for any other token; nothing changes.
  virtual Status heartbeat(std::string_view type, std::string_view id, std::string_view token) = 0;
  // Removes the worker if `token` holds it (running on_departure). OK also when the worker is
  // gone, or `token` is the one its current registration took over (it is gone for that
  // caller). kPermissionDenied for any other token, and the worker stays registered.
  virtual Status unregister(std::string_view type, std::string_view id, std::string_view token) = 0;

  // Every live worker of `type` and the membership version, read in one transaction.
  virtual Result<Membership> workers(std::string_view type) = 0;

  // Every worker type that has ever had a worker (live or not), in name order. For dashboards:
  // a type stays listed after its last worker leaves.
  virtual Result<std::vector<std::string>> types() = 0;

  // Calls `callback` with the membership of `type` now and after every change, from a
  // background thread, in version order and never twice for one version. Changes that land
  // together may be delivered as one (the latest set). A callback that throws is logged and
  // delivery goes on. REQUIRES: `callback` does not block (one thread serves every
  // subscription of this Workers), and the subscription does not outlive this Workers.
  virtual Result<std::unique_ptr<MembershipSubscription>> subscribe(
      std::string_view type, std::function<void(const Membership&)> callback) = 0;

  // Counters of this process's health monitor, for metrics and tests.
  struct Stats {
    uint64_t declared_dead = 0;
    uint64_t heartbeats = 0;
    uint64_t monitor_checks = 0;
  };
  virtual Stats stats() const = 0;
};

}  // namespace kvq::workers
