// workers/schema.h — the workers data model and the store operations on it.
//
// Keys are tuples under WorkersOptions::key_prefix + a subspace id. The ids are on disk: NEVER
// RENUMBER, only add. The jobs layer owns ids 1–19 of the same prefix; workers own 20–39.
//
//   (20, type, id) -> Tuple(format=1, token, seq, info, registered_at_ms, last_heartbeat_ms,
//                           health_timeout_ms[, replaced_token])   one live worker
//   (21, type)     -> Tuple(version)   membership version: +1 on every join, leave, death or
//                                      take-over; never on a heartbeat
//   (22, type)     -> ""               a worker type that has ever had a worker
//   (23, 0)        -> random token     rewritten when a new worker type appears (monitors
//                                      watch it)
//
// `token` is a secret per registration (util/secret.h): only a call carrying it may heartbeat or
// remove the worker. `replaced_token` is there only on a row written by a take-over: the token
// of the registration it replaced, so that registration is told "taken over" rather than "wrong
// token" (kept in clear: it no longer grants anything). `seq` is the read version of the
// transaction of the worker's last heartbeat (or its registration); the health monitor compares it
// with the read versions of its own checks.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/kv.h"
#include "kvq/tuple.h"
#include "kvq/workers.h"

namespace kvq::workers {

struct WorkerRow {
  std::string token;
  uint64_t seq = 0;
  std::string info;
  int64_t registered_at = 0;
  int64_t last_heartbeat = 0;
  int64_t timeout_ms = 0;
  std::string replaced_token;  // empty unless this registration took over another
};

std::string encode_row(const WorkerRow& row);
Result<WorkerRow> decode_row(std::string_view bytes);

class Keys {
 public:
  explicit Keys(std::string prefix) : root_(std::move(prefix)) {}
  std::string worker(std::string_view type, std::string_view id) const;
  std::pair<std::string, std::string> workers_of(std::string_view type) const;
  std::string version(std::string_view type) const;
  std::string known_type(std::string_view type) const;
  std::pair<std::string, std::string> known_types() const;
  std::string types_token() const;
  Result<std::string> parse_worker_id(std::string_view key) const;
  Result<std::string> parse_known_type(std::string_view key) const;

 private:
  enum Space : int64_t { kWorkers = 20, kVersion = 21, kKnownTypes = 22, kTypesToken = 23 };
  Subspace space(Space s) const { return root_.sub(Tuple{static_cast<int64_t>(s)}); }
  Subspace root_;
};

using DepartureHook =
    std::function<Status(kv::Transaction&, const std::string&, const std::string&)>;

// The operations, each inside the caller's transaction (kv::run retries them).
struct Registry {
  const Keys& keys;
  const DepartureHook& on_departure;

  // Adds (type, id) with `token`; kAlreadyExists if another token holds it, unless take_over.
  Status join(kv::Transaction& txn, const std::string& type, const std::string& id,
              const std::string& token, const RegisterOptions& options) const;
  // Records a heartbeat. kFailedPrecondition if (type, id) is gone or `token` is the one its
  // registration took over; kPermissionDenied for any other token that does not hold it.
  Status beat(kv::Transaction& txn, const std::string& type, const std::string& id,
              const std::string& token) const;
  // Removes (type, id) if `token` holds it. OK if it is gone or `token` is the one its
  // registration took over; kPermissionDenied (nothing removed) for any other token.
  Status leave(kv::Transaction& txn, const std::string& type, const std::string& id,
               const std::string& token) const;
  // Removes (type, id) if it has not heartbeated since `seq`; returns whether it did.
  Result<bool> declare_dead(kv::Transaction& txn, const std::string& type, const std::string& id,
                            uint64_t seq) const;
  Result<Membership> read(kv::Transaction& txn, std::string_view type, bool snapshot) const;
  // Every type that has ever had a worker, in name order.
  Result<std::vector<std::string>> types(kv::Transaction& txn, bool snapshot) const;

 private:
  Status remove(kv::Transaction& txn, const std::string& type, const std::string& id) const;
  Status bump_version(kv::Transaction& txn, const std::string& type) const;
};

Status validate_worker_type(std::string_view type);
Status validate_worker_id(std::string_view id);
// The info compacted; kInvalidArgument unless a JSON object of at most kMaxInfoBytes.
Result<std::string> normalize_info(std::string_view info);

int64_t wall_ms();

}  // namespace kvq::workers
