#include "kv/watch_state.h"

namespace kvq::kv {
namespace detail {

bool WatchState::complete(const Status& final_status) {
  std::vector<std::function<void(const Status&)>> to_call;
  {
    util::MutexLock lock(mu);
    if (done) return false;
    done = true;
    status = final_status;
    to_call.swap(callbacks);
  }
  // Outside the lock: a callback may well create or cancel other watches.
  for (auto& callback : to_call) callback(final_status);
  {
    util::MutexLock lock(mu);
    settled = true;
  }
  cv.notify_all();
  return true;
}

bool WatchState::is_complete() const {
  util::MutexLock lock(mu);
  return done;
}

}  // namespace detail

Watch::Watch(std::shared_ptr<detail::WatchState> state) : state_(std::move(state)) {}

Watch& Watch::operator=(Watch&& other) noexcept {
  if (this != &other) {
    cancel();
    state_ = std::move(other.state_);
  }
  return *this;
}

Watch::~Watch() { cancel(); }

bool Watch::ready() const { return state_ && state_->is_complete(); }

Status Watch::wait_until(Clock::time_point deadline) const {
  if (!state_) return Cancelled("wait on an empty watch");
  util::MutexLock lock(state_->mu);
  while (!state_->settled) {
    if (!state_->cv.wait_until(state_->mu, deadline) && !state_->settled) {
      return DeadlineExceeded("watch did not fire before the deadline");
    }
  }
  return state_->status;
}

void Watch::on_ready(std::function<void(const Status&)> callback) {
  if (!state_) {
    callback(Cancelled("on_ready on an empty watch"));
    return;
  }
  Status final_status;
  {
    util::MutexLock lock(state_->mu);
    if (!state_->done) {
      state_->callbacks.push_back(std::move(callback));
      return;
    }
    final_status = state_->status;
  }
  callback(final_status);
}

void Watch::cancel() {
  if (!state_) return;
  auto state = std::move(state_);
  if (state->complete(Cancelled("watch cancelled")) && state->unregister) state->unregister();
}

}  // namespace kvq::kv
