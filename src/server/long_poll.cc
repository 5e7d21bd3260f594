#include "server/long_poll.h"

namespace kvq::server {

std::shared_ptr<LongPoll> LongPoll::create(Api& api) { return std::make_shared<LongPoll>(api); }

void LongPoll::arm(Exchange& ex, std::optional<kv::Clock::time_point> deadline, GiveUp give_up) {
  auto self = shared_from_this();
  {
    util::MutexLock lock(mu_);
    if (finished_) return;
    give_up_ = std::move(give_up);
    if (deadline) timer_ = api_.timers.at(*deadline, [self] { self->give_up(); });
    held_ = api_.hold([self] { self->give_up(); });
  }
  // Outside the lock: the callback may run at once (the client has gone already).
  ex.on_disconnect([self] { self->give_up(); });
}

void LongPoll::give_up() {
  GiveUp call;
  {
    util::MutexLock lock(mu_);
    if (finished_ || gave_up_) return;
    gave_up_ = true;
    call = give_up_;
  }
  call(*this);
}

bool LongPoll::finish(const std::function<void()>& answer) {
  std::vector<std::shared_ptr<void>> drop;
  {
    util::MutexLock lock(mu_);
    if (finished_) return false;
    finished_ = true;
    if (timer_) api_.timers.cancel(timer_);
    if (held_) api_.release(held_);
    drop.swap(kept_);
    give_up_ = nullptr;
  }
  drop_later(std::move(drop));
  answer();
  return true;
}

bool LongPoll::while_open(const std::function<void()>& part) {
  util::MutexLock lock(mu_);
  if (finished_) return false;
  part();
  return true;
}

void LongPoll::keep(std::shared_ptr<void> resource) {
  {
    util::MutexLock lock(mu_);
    if (!finished_) {
      kept_.push_back(std::move(resource));
      return;
    }
  }
  drop_later({std::move(resource)});
}

void LongPoll::drop_later(std::vector<std::shared_ptr<void>> resources) {
  if (resources.empty()) return;
  api_.timers.at(kv::Clock::now(), [resources = std::move(resources)] {});
}

}  // namespace kvq::server
