#include "kv/lmdb/lmdb_transaction.h"

#include "kv/lmdb/watch_registry.h"

namespace kvq::kv::lmdb {
namespace {

// Walks the stored keys of [begin, end) in either direction.
class RangeCursor : public RangeSource {
 public:
  RangeCursor(MDB_txn* txn, MDB_dbi dbi, std::string_view begin, std::string_view end, bool reverse)
      : txn_(txn), dbi_(dbi), begin_(begin), end_(end), reverse_(reverse) {}
  ~RangeCursor() {
    if (cursor_) mdb_cursor_close(cursor_);
  }

  Status start() {
    if (int rc = mdb_cursor_open(txn_, dbi_, &cursor_); rc)
      return status_from_lmdb(rc, "mdb_cursor_open");
    if (!reverse_) {
      key_ = as_val(begin_);
      return settle(mdb_cursor_get(cursor_, &key_, &value_, MDB_SET_RANGE));
    }
    key_ = as_val(end_);
    int rc = mdb_cursor_get(cursor_, &key_, &value_, MDB_SET_RANGE);
    rc = mdb_cursor_get(cursor_, &key_, &value_, rc == MDB_SUCCESS ? MDB_PREV : MDB_LAST);
    return settle(rc);
  }
  Status next() override {
    return settle(mdb_cursor_get(cursor_, &key_, &value_, reverse_ ? MDB_PREV : MDB_NEXT));
  }

  bool valid() const override { return valid_; }
  std::string_view key() const override { return as_view(key_); }
  uint64_t version() const { return version_; }
  std::string_view value() const override { return payload_; }

 private:
  Status settle(int rc) {
    valid_ = false;
    if (rc == MDB_NOTFOUND) return Status::OK();
    if (rc) return status_from_lmdb(rc, "reading a key range");
    const auto k = as_view(key_);
    if (reverse_ ? k < begin_ : k >= end_) return Status::OK();
    KVQ_ASSIGN_OR_RETURN(auto stored, decode_stored(value_));
    version_ = stored.first;
    payload_ = stored.second;
    valid_ = true;
    return Status::OK();
  }

  MDB_txn* txn_;
  MDB_dbi dbi_;
  std::string_view begin_, end_;
  bool reverse_;
  MDB_cursor* cursor_ = nullptr;
  MDB_val key_{}, value_{};
  bool valid_ = false;
  uint64_t version_ = 0;
  std::string_view payload_;
};

}  // namespace

Status LmdbTransaction::ensure_snapshot() {
  if (snapshot_) return Status::OK();
  if (committed_) return FailedPrecondition("the transaction has already committed");
  KVQ_ASSIGN_OR_RETURN(auto snapshot, env_->begin_read());
  auto version = env_->version_in(snapshot.get());
  if (!version.ok()) return version.status();
  request_.read_version = *version;
  snapshot_.emplace(std::move(snapshot));
  return Status::OK();
}

Result<std::optional<std::pair<uint64_t, std::string>>> LmdbTransaction::read_stored(
    std::string_view key) {
  if (key.size() > kMaxKeySize || key.empty()) {
    return InvalidArgument("key of " + std::to_string(key.size()) + " bytes is outside 1.." +
                           std::to_string(kMaxKeySize));
  }
  KVQ_RETURN_IF_ERROR(ensure_snapshot());
  MDB_val k = as_val(key), v;
  int rc = mdb_get(snapshot_->get(), env_->data(), &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<std::pair<uint64_t, std::string>>();
  if (rc) return status_from_lmdb(rc, "reading a key");
  KVQ_ASSIGN_OR_RETURN(auto stored, decode_stored(v));
  return std::optional(std::pair{stored.first, std::string(stored.second)});
}

Result<std::optional<std::string>> LmdbTransaction::get(std::string_view key, ReadOptions options) {
  if (auto buffered = request_.buffer.lookup(key)) return *buffered;
  KVQ_ASSIGN_OR_RETURN(auto stored, read_stored(key));
  if (!options.snapshot) {
    request_.point_reads.push_back(
        {std::string(key), stored.has_value(), stored ? stored->first : 0});
  }
  if (!stored) return std::optional<std::string>();
  return std::optional<std::string>(std::move(stored->second));
}

Result<std::vector<KeyValue>> LmdbTransaction::get_range(std::string_view begin,
                                                         std::string_view end,
                                                         RangeOptions options) {
  if (begin >= end) return std::vector<KeyValue>();
  KVQ_RETURN_IF_ERROR(ensure_snapshot());
  RangeCursor db(snapshot_->get(), env_->data(), begin, end, options.reverse);
  KVQ_RETURN_IF_ERROR(db.start());

  // Every stored key the merge passes, so the commit can re-check exactly the covered part.
  Fingerprint seen;
  KVQ_ASSIGN_OR_RETURN(auto merged, merge_range(db, request_.buffer, begin, end, options,
                                                [&] { seen.add(db.key(), db.version()); }));
  if (!options.snapshot) {
    request_.range_reads.push_back(
        {std::move(merged.covered_begin), std::move(merged.covered_end), seen});
  }
  return std::move(merged.rows);
}

void LmdbTransaction::fail_later(Status status) {
  if (deferred_error_.ok()) deferred_error_ = std::move(status);
}

void LmdbTransaction::set(std::string_view key, std::string_view value) {
  if (key.empty() || key.size() > kMaxKeySize) {
    return fail_later(InvalidArgument("key of " + std::to_string(key.size()) +
                                      " bytes is outside 1.." + std::to_string(kMaxKeySize)));
  }
  if (value.size() > kMaxValueSize) {
    return fail_later(InvalidArgument("value of " + std::to_string(value.size()) +
                                      " bytes exceeds " + std::to_string(kMaxValueSize)));
  }
  request_.buffer.set(key, value);
}

void LmdbTransaction::clear(std::string_view key) {
  if (key.empty() || key.size() > kMaxKeySize) return;  // such a key cannot exist
  request_.buffer.clear(key);
}

void LmdbTransaction::clear_range(std::string_view begin, std::string_view end) {
  request_.buffer.clear_range(begin, end);
}

Status LmdbTransaction::add_read_conflict_key(std::string_view key) {
  KVQ_ASSIGN_OR_RETURN(auto stored, read_stored(key));
  request_.point_reads.push_back(
      {std::string(key), stored.has_value(), stored ? stored->first : 0});
  return Status::OK();
}

Result<Watch> LmdbTransaction::watch(std::string_view key) {
  KVQ_ASSIGN_OR_RETURN(auto stored, read_stored(key));
  std::optional<std::string> expected;
  if (stored) expected = std::move(stored->second);
  return env_->watches().add(std::string(key), std::move(expected));
}

Result<uint64_t> LmdbTransaction::read_version() {
  KVQ_RETURN_IF_ERROR(ensure_snapshot());
  return request_.read_version;
}

Result<bool> LmdbTransaction::prepare_commit() {
  if (committed_) return FailedPrecondition("commit called twice");
  KVQ_RETURN_IF_ERROR(deferred_error_);
  if (request_.buffer.empty()) {
    // Serializable at its read version, which is therefore its commit version.
    KVQ_RETURN_IF_ERROR(ensure_snapshot());
    committed_ = true;
    committed_version_ = request_.read_version;
    snapshot_.reset();
    return false;
  }
  // Release the snapshot first: the commit may need to grow the map, which waits for every
  // open transaction of this process.
  snapshot_.reset();
  committed_ = true;
  return true;
}

Status LmdbTransaction::commit() {
  KVQ_ASSIGN_OR_RETURN(const bool to_queue, prepare_commit());
  if (!to_queue) return Status::OK();
  CommitOutcome outcome = env_->commit_queue().commit(request_);
  if (!outcome.status.ok()) return outcome.status;
  committed_version_ = outcome.version;
  return Status::OK();
}

void LmdbTransaction::commit_async(std::function<void(Status)> done) {
  Result<bool> to_queue = prepare_commit();
  if (!to_queue.ok()) return done(to_queue.status());
  if (!*to_queue) return done(Status::OK());
  env_->commit_queue().commit_async(request_,
                                    [this, done = std::move(done)](CommitOutcome outcome) {
                                      if (outcome.status.ok()) committed_version_ = outcome.version;
                                      done(outcome.status);
                                    });
}

}  // namespace kvq::kv::lmdb
