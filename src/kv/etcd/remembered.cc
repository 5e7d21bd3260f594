#include "kv/etcd/remembered.h"

#include "util/atomic_max.h"

namespace kvq::kv::etcd {

std::optional<std::optional<Remembered::Value>> Remembered::find(std::string_view key) {
  util::MutexLock lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  used(it->second);
  return it->second.value;
}

bool Remembered::knows(std::string_view key) const {
  util::MutexLock lock(mu_);
  return values_.find(key) != values_.end();
}

void Remembered::used(Entry& entry) { uses_.splice(uses_.begin(), uses_, entry.use); }

void Remembered::remember(const std::string& key, std::optional<Value> value) {
  util::MutexLock lock(mu_);
  if (auto it = values_.find(key); it != values_.end()) {
    it->second.value = std::move(value);
    used(it->second);
    return;
  }
  if (values_.size() >= kMaxKeys) {
    values_.erase(uses_.back());
    uses_.pop_back();
  }
  uses_.push_front(key);
  values_.emplace(key, Entry{std::move(value), uses_.begin()});
}

void Remembered::refresh(const std::string& key, const std::optional<Value>& value) {
  util::MutexLock lock(mu_);
  auto it = values_.find(key);
  if (it != values_.end()) it->second.value = value;
}

void Remembered::committed(const std::string& key, const std::optional<std::string>& value,
                           int64_t revision) {
  util::MutexLock lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return;
  if (value)
    it->second.value = Value{revision, *value};
  else
    it->second.value = std::nullopt;
}

void Remembered::forget(const std::string& key) {
  util::MutexLock lock(mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return;
  uses_.erase(it->second.use);
  values_.erase(it);
}

void Remembered::saw_revision(int64_t revision) { util::raise_to(latest_, revision); }

}  // namespace kvq::kv::etcd
