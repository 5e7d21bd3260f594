// util/thread_pool.h — a fixed number of threads that run posted tasks in arrival order.
//
// For work that blocks, such as a store call that waits on the network, and must not hold up
// the thread that hands it out. The destructor runs every task already posted, then joins.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "util/mutex.h"

namespace kvq::util {

class ThreadPool {
 public:
  // REQUIRES: threads > 0.
  explicit ThreadPool(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void post(std::function<void()> task) KVQ_EXCLUDES(mu_);

 private:
  void run() KVQ_EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> tasks_ KVQ_GUARDED_BY(mu_);
  bool stopping_ KVQ_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace kvq::util
