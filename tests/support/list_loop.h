// An event loop for tests of kv::LoopBatching: what is posted waits here until run_all(), so a
// test decides when the loop turns (and so which commits share a group).
#pragma once

#include <functional>
#include <mutex>
#include <vector>

namespace kvq::testing {

class ListLoop {
 public:
  std::function<void(std::function<void()>)> poster() {
    return [this](std::function<void()> task) {
      std::lock_guard lock(mu_);
      tasks_.push_back(std::move(task));
    };
  }
  size_t pending() {
    std::lock_guard lock(mu_);
    return tasks_.size();
  }
  void run_all() {
    std::vector<std::function<void()>> now;
    {
      std::lock_guard lock(mu_);
      now.swap(tasks_);
    }
    for (auto& task : now) task();
  }

 private:
  std::mutex mu_;
  std::vector<std::function<void()>> tasks_;
};

}  // namespace kvq::testing
