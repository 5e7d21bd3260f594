#include "kv/etcd/remembered.h"

namespace kvq::kv::etcd {

std::optional<std::optional<Remembered::Value>> Remembered::find(std::string_view key) const {
  util::MutexLock lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

void Remembered::remember(const std::string& key, std::optional<Value> value) {
  util::MutexLock lock(mu_);
  if (values_.size() >= kMaxKeys && !values_.count(key)) values_.erase(values_.begin());
  values_.insert_or_assign(key, std::move(value));
}

void Remembered::refresh(const std::string& key, const std::optional<Value>& value) {
  util::MutexLock lock(mu_);
  auto it = values_.find(key);
  if (it != values_.end()) it->second = value;
}

void Remembered::committed(const std::string& key, const std::optional<std::string>& value,
                           int64_t revision) {
  util::MutexLock lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return;
  if (value)
    it->second = Value{revision, *value};
  else
    it->second = std::nullopt;
}

void Remembered::forget(const std::string& key) {
  util::MutexLock lock(mu_);
  values_.erase(key);
}

void Remembered::saw_revision(int64_t revision) {
  int64_t seen = latest_.load(std::memory_order_relaxed);
  while (revision > seen && !latest_.compare_exchange_weak(seen, revision)) {
  }
}

}  // namespace kvq::kv::etcd
