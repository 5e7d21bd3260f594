// kv/etcd/remembered.h — what one etcd store handle remembers between its transactions: the
// values of keys read with ReadOptions::remembered, and the newest revision it has seen.
//
// A remembered value is a guess, never trusted: the transaction that uses it compares the key's
// mod_revision at commit, as for any read, so a value changed by another process fails that
// commit, and the value is then forgotten (the retry reads it). What a commit of this handle
// writes to a remembered key is remembered at the commit's revision.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace kvq::kv::etcd {

class Remembered {
 public:
  struct Value {
    int64_t mod_revision = 0;  // 0: absent
    std::string value;
  };

  // Keys with their values at most; past it, remembering a new key forgets the one least
  // recently found or remembered (a type's settings, found by every add, stay; the rows of jobs
  // long finished go).
  static constexpr size_t kMaxKeys = 4096;

  // The remembered value of `key` (a full key), if any.
  std::optional<std::optional<Value>> find(std::string_view key) KVQ_EXCLUDES(mu_);
  // Whether `key` (a full key) is remembered: find() would answer it, without copying its value.
  bool knows(std::string_view key) const KVQ_EXCLUDES(mu_);
  // Remembers `key` as read (nullopt: absent) at some revision.
  void remember(const std::string& key, std::optional<Value> value) KVQ_EXCLUDES(mu_);
  // A read of this handle found `value` for `key`: a remembered key takes it; any other is
  // left alone.
  void refresh(const std::string& key, const std::optional<Value>& value) KVQ_EXCLUDES(mu_);
  // A commit of this handle at `revision` wrote `value` (nullopt: deleted) to `key`: a
  // remembered key takes it; any other is left alone.
  void committed(const std::string& key, const std::optional<std::string>& value, int64_t revision)
      KVQ_EXCLUDES(mu_);
  // A guess of `key` failed (or may have): it is read again next time.
  void forget(const std::string& key) KVQ_EXCLUDES(mu_);

  // The newest revision any response to this handle carried (0 before the first).
  int64_t latest_revision() const { return latest_.load(std::memory_order_relaxed); }
  void saw_revision(int64_t revision);

 private:
  struct Entry {
    std::optional<Value> value;
    std::list<std::string>::iterator use;  // its place in uses_
  };
  // Moves `entry` to the front of uses_.
  void used(Entry& entry) KVQ_REQUIRES(mu_);

  mutable util::Mutex mu_;
  std::map<std::string, Entry, std::less<>> values_ KVQ_GUARDED_BY(mu_);
  std::list<std::string> uses_ KVQ_GUARDED_BY(mu_);  // the keys, most recently used first
  std::atomic<int64_t> latest_{0};
};

}  // namespace kvq::kv::etcd
