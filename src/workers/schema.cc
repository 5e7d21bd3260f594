#include "workers/schema.h"

#include <nlohmann/json.hpp>

#include "util/random.h"
#include "util/secret.h"
#include "util/text.h"

namespace kvq::workers {
namespace {

constexpr int64_t kRowFormat = 1;

}  // namespace

int64_t wall_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// A row that took over no one stays byte for byte what it was before replaced_token existed.
std::string encode_row(const WorkerRow& r) {
  Tuple t{kRowFormat,       r.token,     static_cast<int64_t>(r.seq), r.info, r.registered_at,
          r.last_heartbeat, r.timeout_ms};
  if (!r.replaced_token.empty()) t.append(r.replaced_token);
  return t.pack();
}

Result<WorkerRow> decode_row(std::string_view bytes) {
  KVQ_ASSIGN_OR_RETURN(Tuple t, Tuple::unpack(bytes));
  const bool shaped = (t.size() == 7 || (t.size() == 8 && t[7].is_string())) && t[0].is_int() &&
                      t[0].as_int() == kRowFormat && t[1].is_string() && t[2].is_int() &&
                      t[3].is_string() && t[4].is_int() && t[5].is_int() && t[6].is_int();
  if (!shaped) return Internal("worker row has an unknown format");
  return WorkerRow{t[1].as_string(),
                   static_cast<uint64_t>(t[2].as_int()),
                   t[3].as_string(),
                   t[4].as_int(),
                   t[5].as_int(),
                   t[6].as_int(),
                   t.size() == 8 ? t[7].as_string() : std::string()};
}

namespace {

// Whether `token` holds `row`; if not, the status that says why.
Status check_token(const WorkerRow& row, const std::string& id, const std::string& token) {
  if (util::secret_equal(row.token, token)) return Status::OK();
  if (!row.replaced_token.empty() && util::secret_equal(row.replaced_token, token)) {
    return FailedPrecondition("worker '" + id + "' was taken over by another registration");
  }
  return PermissionDenied("wrong token for worker '" + id + "'");
}

}  // namespace

std::string Keys::worker(std::string_view type, std::string_view id) const {
  return space(kWorkers).pack({type, id});
}
std::pair<std::string, std::string> Keys::workers_of(std::string_view type) const {
  return space(kWorkers).range({type});
}
std::string Keys::version(std::string_view type) const { return space(kVersion).pack({type}); }
std::string Keys::known_type(std::string_view type) const {
  return space(kKnownTypes).pack({type});
}
std::pair<std::string, std::string> Keys::known_types() const { return space(kKnownTypes).range(); }
std::string Keys::types_token() const { return space(kTypesToken).pack({int64_t{0}}); }

Result<std::string> Keys::parse_worker_id(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, space(kWorkers).unpack(key));
  if (t.size() != 2 || !t[1].is_string()) return InvalidArgument("not a worker key");
  return t[1].as_string();
}

Result<std::string> Keys::parse_known_type(std::string_view key) const {
  KVQ_ASSIGN_OR_RETURN(Tuple t, space(kKnownTypes).unpack(key));
  if (t.size() != 1 || !t[0].is_string()) return InvalidArgument("not a worker type key");
  return t[0].as_string();
}

Status validate_worker_type(std::string_view type) {
  if (type.empty()) return InvalidArgument("worker type is empty");
  if (type.size() > 64) return InvalidArgument("worker type is longer than 64 bytes");
  for (char c : type) {
    if (!util::is_name_char(c))
      return InvalidArgument("worker type may only contain A-Z a-z 0-9 _ . : -");
  }
  return Status::OK();
}

Status validate_worker_id(std::string_view id) {
  if (id.empty()) return InvalidArgument("worker id is empty");
  if (id.size() > 256) return InvalidArgument("worker id is longer than 256 bytes");
  for (unsigned char c : id) {
    if (c < 0x20 || c == 0x7F) return InvalidArgument("worker id contains a control character");
  }
  return Status::OK();
}

Result<std::string> normalize_info(std::string_view info) {
  if (info.size() > 4 * kMaxInfoBytes) return InvalidArgument("worker info is larger than 64 KiB");
  auto parsed = nlohmann::json::parse(info, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return InvalidArgument("worker info is not valid JSON");
  if (!parsed.is_object()) return InvalidArgument("worker info must be a JSON object");
  std::string compact = parsed.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (compact.size() > kMaxInfoBytes) return InvalidArgument("worker info is larger than 64 KiB");
  return compact;
}

// ---- Registry ----

Status Registry::join(kv::Transaction& txn, const std::string& type, const std::string& id,
                      const std::string& token, const RegisterOptions& options) const {
  KVQ_ASSIGN_OR_RETURN(auto existing, txn.get(keys.worker(type, id)));
  std::optional<WorkerRow> before;
  if (existing) {
    KVQ_ASSIGN_OR_RETURN(before, decode_row(*existing));
    // An earlier attempt of this join committed.
    if (util::secret_equal(before->token, token)) return Status::OK();
    if (!options.take_over) {
      return AlreadyExists("worker '" + id + "' of type '" + type +
                           "' is alive elsewhere; register with take_over");
    }
    if (on_departure) KVQ_RETURN_IF_ERROR(on_departure(txn, type, id));
  }
  KVQ_ASSIGN_OR_RETURN(uint64_t version, txn.read_version());
  const int64_t now = wall_ms();
  const std::string replaced = before ? before->token : std::string();
  txn.set(keys.worker(type, id), encode_row({token, version, options.info, now, now,
                                             options.health_timeout.count(), replaced}));
  KVQ_ASSIGN_OR_RETURN(auto known, txn.get(keys.known_type(type), {.snapshot = true}));
  if (!known) {
    txn.set(keys.known_type(type), "");
    txn.set(keys.types_token(), util::random_hex(8));
  }
  return bump_version(txn, type);
}

Status Registry::beat(kv::Transaction& txn, const std::string& type, const std::string& id,
                      const std::string& token) const {
  KVQ_ASSIGN_OR_RETURN(auto existing, txn.get(keys.worker(type, id)));
  if (!existing) return FailedPrecondition("worker '" + id + "' was declared dead or unregistered");
  KVQ_ASSIGN_OR_RETURN(WorkerRow row, decode_row(*existing));
  KVQ_RETURN_IF_ERROR(check_token(row, id, token));
  KVQ_ASSIGN_OR_RETURN(row.seq, txn.read_version());
  row.last_heartbeat = wall_ms();
  txn.set(keys.worker(type, id), encode_row(row));
  return Status::OK();
}

Status Registry::leave(kv::Transaction& txn, const std::string& type, const std::string& id,
                       const std::string& token) const {
  KVQ_ASSIGN_OR_RETURN(auto existing, txn.get(keys.worker(type, id)));
  if (!existing) return Status::OK();
  KVQ_ASSIGN_OR_RETURN(WorkerRow row, decode_row(*existing));
  Status holds = check_token(row, id, token);
  if (holds.code() == Code::kFailedPrecondition)
    return Status::OK();  // already replaced: gone for it
  KVQ_RETURN_IF_ERROR(holds);
  return remove(txn, type, id);
}

Result<bool> Registry::declare_dead(kv::Transaction& txn, const std::string& type,
                                    const std::string& id, uint64_t seq) const {
  KVQ_ASSIGN_OR_RETURN(auto existing, txn.get(keys.worker(type, id)));
  if (!existing) return false;
  KVQ_ASSIGN_OR_RETURN(WorkerRow row, decode_row(*existing));
  if (row.seq != seq) return false;  // it heartbeated (or re-registered) since the check
  KVQ_RETURN_IF_ERROR(remove(txn, type, id));
  return true;
}

Status Registry::remove(kv::Transaction& txn, const std::string& type,
                        const std::string& id) const {
  if (on_departure) KVQ_RETURN_IF_ERROR(on_departure(txn, type, id));
  txn.clear(keys.worker(type, id));
  return bump_version(txn, type);
}

Status Registry::bump_version(kv::Transaction& txn, const std::string& type) const {
  KVQ_ASSIGN_OR_RETURN(auto current, txn.get(keys.version(type)));
  int64_t version = 0;
  if (current) {
    auto t = Tuple::unpack(*current);
    if (!t.ok() || t->size() != 1 || !(*t)[0].is_int())
      return Internal("corrupt membership version");
    version = (*t)[0].as_int();
  }
  txn.set(keys.version(type), Tuple{version + 1}.pack());
  return Status::OK();
}

Result<Membership> Registry::read(kv::Transaction& txn, std::string_view type,
                                  bool snapshot) const {
  Membership m;
  KVQ_ASSIGN_OR_RETURN(auto version, txn.get(keys.version(type), {.snapshot = snapshot}));
  if (version) {
    auto t = Tuple::unpack(*version);
    if (!t.ok() || t->size() != 1 || !(*t)[0].is_int())
      return Internal("corrupt membership version");
    m.version = static_cast<uint64_t>((*t)[0].as_int());
  }
  auto [begin, end] = keys.workers_of(type);
  KVQ_ASSIGN_OR_RETURN(auto rows, txn.get_range(begin, end, {.snapshot = snapshot}));
  for (const auto& kv : rows) {
    KVQ_ASSIGN_OR_RETURN(std::string id, keys.parse_worker_id(kv.key));
    KVQ_ASSIGN_OR_RETURN(WorkerRow row, decode_row(kv.value));
    m.workers.push_back(WorkerInfo{std::string(type), std::move(id), std::move(row.info),
                                   row.registered_at, row.last_heartbeat, Millis(row.timeout_ms)});
  }
  return m;
}

Result<std::vector<std::string>> Registry::types(kv::Transaction& txn, bool snapshot) const {
  auto [begin, end] = keys.known_types();
  KVQ_ASSIGN_OR_RETURN(auto rows, txn.get_range(begin, end, {.snapshot = snapshot}));
  std::vector<std::string> out;
  for (const auto& kv : rows) {
    KVQ_ASSIGN_OR_RETURN(std::string type, keys.parse_known_type(kv.key));
    out.push_back(std::move(type));
  }
  return out;
}

}  // namespace kvq::workers
