// TaskPool: a few threads that run posted tasks, started on first use.
//
// HttpRangeSource uses one to fetch a gathered read's requests in parallel.
// Tasks must not block for long (each remote fetch ends within its deadline)
// and must not rely on being run: Stop() drops what is still queued, so a
// poster that needs its work done does it itself when no helper took it
// (see ReadManyRuns). Threads start lazily because most sources never see a
// gathered read.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace stfs {

class TaskPool {
 public:
  explicit TaskPool(int threads) : threads_(threads) {}
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;
  ~TaskPool() { Stop(); }

  int threads() const { return threads_; }
  // Queues `task` for a pool thread; false (task dropped) when the pool has
  // no threads, could start none, or is stopped.
  bool Post(std::function<void()> task);
  // Drops queued tasks, waits for running ones and joins the threads.
  // Idempotent; Post fails afterwards.
  void Stop();

 private:
  void Loop();

  const int threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> workers_;         // guarded by mu_ until Stop
};

}  // namespace stfs
