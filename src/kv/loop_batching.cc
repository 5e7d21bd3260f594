#include <atomic>
#include <vector>

#include "kvq/kv.h"
#include "util/mutex.h"

namespace kvq::kv {
namespace {

// A task put off to a loop: run once, by the loop or by the LoopBatching's destructor, whichever
// comes first.
struct Deferred {
  explicit Deferred(std::function<void()> t) : task(std::move(t)) {}
  void run() {
    if (!taken.exchange(true, std::memory_order_acq_rel)) task();
  }
  std::atomic<bool> taken{false};
  std::function<void()> task;
};

}  // namespace

struct LoopBatching::State {
  std::function<void(std::function<void()>)> post;
  util::Mutex mu;  // the loop may run a task on any of its threads
  // Put off and perhaps not yet run; pruned of the ones that ran at each new one.
  std::vector<std::shared_ptr<Deferred>> outstanding KVQ_GUARDED_BY(mu);
};

thread_local LoopBatching::State* LoopBatching::installed_ = nullptr;

LoopBatching::LoopBatching(std::function<void(std::function<void()>)> post)
    : state_(std::make_unique<State>()) {
  state_->post = std::move(post);
  installed_ = state_.get();
}

LoopBatching::~LoopBatching() {
  if (installed_ == state_.get()) installed_ = nullptr;  // what runs below commits at once
  std::vector<std::shared_ptr<Deferred>> left;
  {
    util::MutexLock lock(state_->mu);
    left.swap(state_->outstanding);
  }
  for (auto& d : left) d->run();
}

bool LoopBatching::on_this_thread() { return installed_ != nullptr; }

void LoopBatching::defer(std::function<void()> task) {
  State* state = installed_;
  auto d = std::make_shared<Deferred>(std::move(task));
  {
    util::MutexLock lock(state->mu);
    std::erase_if(state->outstanding, [](const std::shared_ptr<Deferred>& o) {
      return o->taken.load(std::memory_order_acquire);
    });
    state->outstanding.push_back(d);
  }
  state->post([d] { d->run(); });
}

}  // namespace kvq::kv
