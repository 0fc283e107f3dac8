// TaskPool (see task_pool.h).
#include "core/remote/task_pool.h"

#include <exception>

namespace stfs {

bool TaskPool::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    try {
      while (static_cast<int>(workers_.size()) < threads_) workers_.emplace_back([this] { Loop(); });
    } catch (const std::exception&) {
      // Fewer threads than asked: those that started serve the queue.
    }
    if (workers_.empty()) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void TaskPool::Stop() {
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
    workers.swap(workers_);
  }
  cv_.notify_all();
  for (std::thread& t : workers) t.join();
}

void TaskPool::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace stfs
