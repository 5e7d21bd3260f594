// kv/lmdb/lmdb_transaction.h — a kv::Transaction on an LMDB environment.
//
// Reads come from one LMDB read snapshot taken at the first read, overlaid with the
// transaction's own buffered writes. Non-snapshot reads are recorded (key and the version that
// wrote it; for ranges, a fingerprint of every key and version in the part of the range the
// read covered) and handed to the commit queue, which re-checks them against current data.
#pragma once

#include <memory>
#include <optional>

#include "kv/lmdb/commit_queue.h"
#include "kv/lmdb/lmdb_env.h"

namespace kvq::kv::lmdb {

class LmdbTransaction : public Transaction {
 public:
  explicit LmdbTransaction(std::shared_ptr<Env> env) : env_(std::move(env)) {}

  Result<std::optional<std::string>> get(std::string_view key, ReadOptions options) override;
  Result<std::vector<KeyValue>> get_range(std::string_view begin, std::string_view end,
                                          RangeOptions options) override;
  void set(std::string_view key, std::string_view value) override;
  void clear(std::string_view key) override;
  void clear_range(std::string_view begin, std::string_view end) override;
  Status add_read_conflict_key(std::string_view key) override;
  Result<Watch> watch(std::string_view key) override;
  Result<uint64_t> read_version() override;
  Status commit() override;
  void commit_async(std::function<void(Status)> done) override;
  uint64_t committed_version() const override { return committed_version_; }

 private:
  // What commit and commit_async check first: a failure, or whether the transaction goes on to
  // the commit queue (false: it wrote nothing, and so committed at its read version).
  Result<bool> prepare_commit();
  Status ensure_snapshot();
  // The stored version and value of `key` in the snapshot, ignoring this transaction's writes.
  Result<std::optional<std::pair<uint64_t, std::string>>> read_stored(std::string_view key);
  void fail_later(Status status);

  std::shared_ptr<Env> env_;
  std::optional<Env::ReadTxn> snapshot_;
  CommitRequest request_;
  Status deferred_error_;
  bool committed_ = false;
  uint64_t committed_version_ = 0;
};

}  // namespace kvq::kv::lmdb
