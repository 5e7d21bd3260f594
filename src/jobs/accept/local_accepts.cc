#include "jobs/accept/local_accepts.h"

namespace kvq::jobs {

bool InFlightCounts::under_way(std::string_view type) const {
  util::MutexLock lock(mu_);
  return counts_.find(type) != counts_.end();
}

void InFlightCounts::enter(const std::string& type) {
  util::MutexLock lock(mu_);
  ++counts_[type];
}

void InFlightCounts::leave(const std::string& type) {
  util::MutexLock lock(mu_);
  auto it = counts_.find(type);
  if (--it->second == 0) counts_.erase(it);
}

AcceptInFlight::AcceptInFlight(InFlightCounts& counts, std::string type)
    : counts_(counts), type_(std::move(type)) {
  counts_.enter(type_);
}

AcceptInFlight::~AcceptInFlight() { counts_.leave(type_); }

namespace {

// How long a claim let go is remembered: longer than any try that began before it lasts.
constexpr auto kClaimMemory = std::chrono::seconds(1);

// A claim's key: the type's length, the type and the id (so that types and ids of any bytes
// never run into each other).
std::string claim_key(std::string_view type, std::string_view id) {
  std::string key = std::to_string(type.size());
  key += '/';
  key += type;
  key += id;
  return key;
}

}  // namespace

bool ClaimRegistry::claim(const std::string& key, TimePoint try_began) {
  util::MutexLock lock(mu_);
  auto [it, fresh] = claims_.try_emplace(key);
  if (fresh) return true;
  // Held, or let go since this try began (whose reads may predate that try's commit and still
  // show the job pending). Let go before: this try's reads show what that one did.
  if (it->second.held || it->second.let_go_at >= try_began) return false;
  it->second.held = true;
  return true;
}

void ClaimRegistry::let_go(std::vector<std::string>& keys, TimePoint now) {
  util::MutexLock lock(mu_);
  for (std::string& key : keys) {
    auto& claim = claims_[key];
    claim.held = false;
    claim.let_go_at = now;
    let_go_order_.emplace_back(now, std::move(key));
  }
  while (!let_go_order_.empty() && let_go_order_.front().first + kClaimMemory < now) {
    auto it = claims_.find(let_go_order_.front().second);
    if (it != claims_.end() && !it->second.held &&
        it->second.let_go_at == let_go_order_.front().first)
      claims_.erase(it);
    let_go_order_.pop_front();
  }
}

bool PickClaims::claim(std::string_view type, std::string_view id) {
  std::string key = claim_key(type, id);
  if (!registry_.claim(key, try_began_)) return false;
  held_.push_back(std::move(key));
  return true;
}

Status PickClaims::after_nothing_taken(std::string_view types) const {
  if (!all_claimed_) return Status::OK();
  return Aborted("the due jobs of " + std::string(types) +
                 " are being taken by other accepts in this process");
}

void PickClaims::new_try() {
  let_go();
  all_claimed_ = false;
  try_began_ = std::chrono::steady_clock::now();
}

void PickClaims::let_go() {
  if (held_.empty()) return;
  registry_.let_go(held_, std::chrono::steady_clock::now());
  held_.clear();
}

void HeldBackLooks::note(std::string_view type) {
  util::MutexLock lock(mu_);
  auto it = counts_.find(type);
  if (it == counts_.end()) it = counts_.emplace(std::string(type), 0).first;
  ++it->second;
}

uint64_t HeldBackLooks::count(std::string_view type) const {
  util::MutexLock lock(mu_);
  auto it = counts_.find(type);
  return it == counts_.end() ? 0 : it->second;
}

void QueueLatencies::note(const std::string& lock, Millis latency) {
  util::MutexLock hold(mu_);
  if (by_lock_.insert_or_assign(lock, latency).second) order_.push_back(lock);
  while (order_.size() > kMaxNoted) {
    by_lock_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<Millis> QueueLatencies::take(const std::string& lock) {
  util::MutexLock hold(mu_);
  auto it = by_lock_.find(lock);
  if (it == by_lock_.end()) return std::nullopt;
  const Millis latency = it->second;
  by_lock_.erase(it);
  // `order_` keeps the lock until it reaches the front; erasing a missing key there is harmless.
  return latency;
}

std::optional<std::pair<int64_t, int64_t>> IndexHeads::get(const std::string& index) const {
  util::MutexLock lock(mu_);
  auto it = heads_.find(index);
  if (it == heads_.end()) return std::nullopt;
  return it->second;
}

void IndexHeads::set(const std::string& index, int64_t priority, int64_t time) {
  util::MutexLock lock(mu_);
  if (heads_.size() >= kMaxIndexes && !heads_.count(index)) heads_.clear();
  heads_[index] = {priority, time};
}

}  // namespace kvq::jobs
