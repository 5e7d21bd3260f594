#include "kv/lmdb/watch_registry.h"

#include <algorithm>
#include <set>

namespace kvq::kv::lmdb {
namespace {

// Without the signal, other processes' commits are looked for this often.
constexpr std::chrono::milliseconds kFallbackPoll{10};

// The committed value of `key` now, in a fresh snapshot.
Result<std::optional<std::string>> read_now(Env& env, const std::string& key, uint64_t* version) {
  KVQ_ASSIGN_OR_RETURN(auto snapshot, env.begin_read());
  if (version) {
    KVQ_ASSIGN_OR_RETURN(*version, env.version_in(snapshot.get()));
  }
  MDB_val k = as_val(key), v;
  int rc = mdb_get(snapshot.get(), env.data(), &k, &v);
  if (rc == MDB_NOTFOUND) return std::optional<std::string>();
  if (rc) return status_from_lmdb(rc, "reading a watched key");
  KVQ_ASSIGN_OR_RETURN(auto stored, decode_stored(v));
  return std::optional<std::string>(std::string(stored.second));
}

}  // namespace

WatchRegistry::WatchRegistry(Env& env) : env_(env) {
  auto wake = WakeSignal::open(env.path());
  if (wake.ok()) wake_ = std::move(*wake);
}

WatchRegistry::~WatchRegistry() { shutdown(); }

Result<Watch> WatchRegistry::add(std::string key, std::optional<std::string> expected) {
  auto state = std::make_shared<detail::WatchState>();
  uint64_t id;
  bool first = false;
  {
    util::MutexLock lock(mu_);
    if (stopping_) return Unavailable("the store is closing");
    id = next_id_++;
    first = entries_.empty();
    entries_.emplace(key, Entry{id, expected, state});
    count_.fetch_add(1, std::memory_order_relaxed);
    if (!poller_.joinable()) poller_ = std::thread([this] { poll_loop(); });
  }
  // Only an idle poller waits for a watch to appear; one already polling would wake for nothing
  // (the notifier re-arms a watch after every commit that fires it: a context switch each).
  if (first) poll_cv_.notify_all();
  std::weak_ptr<WatchRegistry> weak = weak_from_this();
  state->unregister = [weak, key, id] {
    if (auto self = weak.lock()) self->remove(key, id);
  };
  // A commit between the transaction's read and the registration above is invisible to
  // on_commit, so compare with the committed value once now; later commits are reported.
  auto current = read_now(env_, key, nullptr);
  if (!current.ok()) {
    remove(key, id);
    return current.status();
  }
  if (*current != expected) fire_if_changed(key, *current);
  return Watch(std::move(state));
}

void WatchRegistry::remove(const std::string& key, uint64_t id) {
  util::MutexLock lock(mu_);
  auto [first, last] = entries_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    if (it->second.id == id) {
      entries_.erase(it);
      count_.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
  }
}

void WatchRegistry::fire_if_changed(const std::string& key,
                                    const std::optional<std::string>& value) {
  std::vector<std::shared_ptr<detail::WatchState>> fired;
  {
    util::MutexLock lock(mu_);
    auto [first, last] = entries_.equal_range(key);
    for (auto it = first; it != last;) {
      if (it->second.expected != value) {
        fired.push_back(std::move(it->second.state));
        it = entries_.erase(it);
        count_.fetch_sub(1, std::memory_order_relaxed);
      } else {
        ++it;
      }
    }
  }
  for (auto& state : fired) state->complete(Status::OK());
}

void WatchRegistry::on_commit(const std::vector<KeyChange>& changes, bool complete,
                              uint64_t base_version, uint64_t new_version) {
  if (wake_) wake_->notify();  // first: other processes' watches wait on it
  bool recheck = false;
  {
    util::MutexLock lock(mu_);
    // Only when nothing from another process slipped in between can the poller skip ahead.
    if (reported_version_ == base_version) reported_version_ = new_version;
    // A watch registered while this commit was in flight may have read the old value and yet
    // be missing from `changes`.
    recheck = !complete && !entries_.empty();
  }
  if (recheck) {
    recheck_watched_keys();
    return;
  }
  for (const KeyChange& change : changes) fire_if_changed(change.key, change.value);
}

void WatchRegistry::recheck_watched_keys() {
  std::set<std::string> keys;
  {
    util::MutexLock lock(mu_);
    for (const auto& [key, entry] : entries_) keys.insert(key);
  }
  for (const std::string& key : keys) {
    auto value = read_now(env_, key, nullptr);
    if (value.ok()) fire_if_changed(key, *value);
  }
}

void WatchRegistry::poll_loop() {
  util::MutexLock lock(mu_);
  while (!stopping_) {
    if (entries_.empty()) {
      poll_cv_.wait(mu_);
      continue;
    }
    if (!wake_) {
      const auto wake = std::chrono::steady_clock::now() + kFallbackPoll;
      while (!stopping_) {
        if (!poll_cv_.wait_until(mu_, wake)) break;
      }
      if (stopping_) break;
    }
    lock.unlock();
    if (wake_) {
      look_then_sleep();
    } else {
      check_all_keys();
    }
    lock.lock();
  }
}

void WatchRegistry::look_then_sleep() {
  // The sequence is read before the look, so a commit after the look moves it and the sleep
  // below does not start (or is woken): see wake_signal.h.
  const uint32_t seen = wake_->sequence();
  // A look that failed may have missed a commit whose wake-up came already: look again soon.
  const auto patience =
      check_all_keys() ? std::max(env_.options().watch_poll_interval, std::chrono::milliseconds(1))
                       : kFallbackPoll;
  // shutdown() sets closing_ before it bumps the sequence: a `seen` read after that bump finds
  // closing_ set here, one read before it makes the sleep return.
  if (closing_.load()) return;
  wake_->wait(seen, patience);
}

bool WatchRegistry::check_all_keys() {
  uint64_t version = 0;
  {
    auto snapshot = env_.begin_read();
    if (!snapshot.ok()) return false;  // transient (e.g. a resize); the next poll tries again
    auto v = env_.version_in(snapshot->get());
    if (!v.ok()) return false;
    version = *v;
  }
  {
    util::MutexLock lock(mu_);
    if (version == reported_version_) return true;
  }
  recheck_watched_keys();
  util::MutexLock lock(mu_);
  if (version > reported_version_) reported_version_ = version;
  return true;
}

void WatchRegistry::shutdown() {
  std::vector<std::shared_ptr<detail::WatchState>> ending;
  {
    util::MutexLock lock(mu_);
    if (stopping_ && !poller_.joinable()) return;
    stopping_ = true;
    closing_.store(true);
    for (auto& [key, entry] : entries_) ending.push_back(std::move(entry.state));
    entries_.clear();
    count_.store(0);
  }
  poll_cv_.notify_all();
  if (wake_ && poller_.joinable()) wake_->interrupt();
  if (poller_.joinable() && poller_.get_id() != std::this_thread::get_id()) poller_.join();
  for (auto& state : ending) state->complete(Unavailable("the store was closed"));
}

}  // namespace kvq::kv::lmdb
