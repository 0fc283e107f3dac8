// HostCopyEngine: the CopyEngine for machines without a GPU.
//
// Copies run on one worker thread in submission order, like a stream, so
// the pipeline's buffer reuse is exercised for real: a buffer refilled
// before WaitLane returned would be copied with the wrong bytes. It must
// never copy synchronously inside Enqueue (that would hide such bugs).
// Tests make it inject faults (HostEngineFaults), report which staging
// buffers are busy (HostEngineProbe), and play a device for the destination
// and stream rules (HostEngineOptions::simulated_device).
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/cuda/copy_engine.h"

namespace stfs::gpu {
namespace {

std::atomic<int64_t> g_live_allocations{0};

constexpr size_t kPage = 4096;

void* AllocatePages(size_t bytes) {
  size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  if (rounded == 0) rounded = kPage;
  void* p = std::aligned_alloc(kPage, rounded);
  if (p != nullptr) g_live_allocations.fetch_add(1);
  return p;
}

void FreePages(void* p) {
  if (p == nullptr) return;
  std::free(p);
  g_live_allocations.fetch_sub(1);
}

class HostCopyEngine final : public CopyEngine {
 public:
  explicit HostCopyEngine(const HostEngineOptions& options)
      : options_(options), worker_([this] { Work(); }) {}

  ~HostCopyEngine() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    worker_.join();
  }

  const std::string& Describe() const override { return name_; }
  bool IsDevice() const override { return false; }

  StatusOr<char*> AllocateStaging(size_t bytes) override {
    void* p = AllocatePages(bytes);
    if (p == nullptr) {
      return Status::ResourceExhausted("host: cannot allocate a staging buffer of " +
                                       std::to_string(bytes) + " bytes");
    }
    if (options_.probe) options_.probe->AddStaging(static_cast<char*>(p), bytes);
    return static_cast<char*>(p);
  }
  void FreeStaging(char* buffer) override {
    if (options_.probe && buffer != nullptr) options_.probe->RemoveStaging(buffer);
    FreePages(buffer);
  }

  StatusOr<void*> AllocateDestination(size_t bytes) override {
    void* p = AllocatePages(bytes);
    if (p == nullptr) {
      return Status::ResourceExhausted("host: out of memory allocating " + std::to_string(bytes) +
                                       " bytes");
    }
    return p;
  }
  void FreeDestination(void* buffer) override { FreePages(buffer); }

  Status CheckDestination(const void* dst, uint64_t bytes) override {
    if (options_.simulated_device < 0 || !options_.pointer_facts) return Status::OK();
    return CheckDestinationFacts(dst, bytes, options_.pointer_facts(dst), options_.simulated_device);
  }

  Status CheckStream(void* stream) override {
    if (stream == nullptr) return Status::OK();
    if (options_.simulated_device < 0) {
      return Status::InvalidArgument("the host loader has no streams; pass none (a null stream)");
    }
    return CheckStreamDevice(options_.stream_device, options_.simulated_device);
  }

  Status SetLanes(int lanes) override {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.assign(static_cast<size_t>(lanes), 0);
    return Status::OK();
  }

  Status Begin(void*) override { return Status::OK(); }

  Status Enqueue(int lane, const char* staging, const StagedCopy* copies, size_t count) override {
    const bool fail = Hit(options_.faults.fail_enqueue, enqueue_calls_);
    if (fail) count /= 2;  // a copy engine that failed half-way: some copies are in flight
    Job job{lane, staging, std::vector<StagedCopy>(copies, copies + count)};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (lane < 0 || static_cast<size_t>(lane) >= pending_.size()) {
        return Status::Internal("host engine: no lane " + std::to_string(lane));
      }
      ++pending_[static_cast<size_t>(lane)];
      if (options_.probe) options_.probe->MarkBusy(staging, +1);
      jobs_.push_back(std::move(job));
    }
    work_cv_.notify_one();
    if (fail) return Status::Internal("host engine: injected copy failure");
    return Status::OK();
  }

  Status WaitLane(int lane) override {
    const bool all_fail = options_.faults.waits_fail && options_.faults.waits_fail->load();
    if (Hit(options_.faults.fail_wait, wait_calls_) || all_fail) {
      return Status::Internal("host engine: injected event failure on lane " + std::to_string(lane));
    }
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_[static_cast<size_t>(lane)] == 0; });
    return Status::OK();
  }

  Status Finish(void*, bool synchronize) override {
    // Host memory has no stream to order against: finishing means done,
    // unless a test asked for CUDA's behaviour (copies run on after the
    // call unless `synchronize`).
    if (synchronize || !options_.asynchronous_finish) {
      std::unique_lock<std::mutex> lock(mu_);
      done_cv_.wait(lock, [&] { return AllLanesIdle(); });
    }
    if (Hit(options_.faults.fail_finish, finish_calls_)) {
      return Status::Internal("host engine: injected failure finishing a load");
    }
    return Status::OK();
  }

  void Drain() override {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return AllLanesIdle(); });
  }

  Status CopyToHost(const void* src, size_t bytes, void* dst) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return Status::OK();
  }

 private:
  struct Job {
    int lane;
    const char* staging;
    std::vector<StagedCopy> copies;
  };

  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      work_cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping with nothing left
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      if (options_.copy_delay.count() > 0) std::this_thread::sleep_for(options_.copy_delay);
      for (const StagedCopy& c : job.copies) {
        char* dst = reinterpret_cast<char*>(c.dst);
        const char* src = job.staging + c.staging_offset;
        for (uint64_t r = 0; r < c.height; ++r) {
          std::memcpy(dst + r * c.dst_pitch, src + r * c.src_pitch, c.width);
        }
      }
      lock.lock();
      if (options_.probe) {
        options_.probe->MarkBusy(job.staging, -1);
        options_.probe->BatchDone();
      }
      --pending_[static_cast<size_t>(job.lane)];
      done_cv_.notify_all();
    }
  }

  bool AllLanesIdle() const {  // mu_ held
    for (int64_t n : pending_) {
      if (n != 0) return false;
    }
    return true;
  }

  // True when this call (counted in `calls`) is the one to fail.
  static bool Hit(int64_t at, std::atomic<int64_t>& calls) { return calls.fetch_add(1) == at && at >= 0; }

  const HostEngineOptions options_;
  std::atomic<int64_t> enqueue_calls_{0};
  std::atomic<int64_t> wait_calls_{0};
  std::atomic<int64_t> finish_calls_{0};
  const std::string name_ = "host";
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<Job> jobs_;
  std::vector<int64_t> pending_;
  bool stopping_ = false;
  std::thread worker_;  // last: starts after the fields it uses exist
};

}  // namespace

std::unique_ptr<CopyEngine> NewHostCopyEngine(const HostEngineOptions& options) {
  return std::make_unique<HostCopyEngine>(options);
}

int64_t HostEngineLiveAllocations() { return g_live_allocations.load(); }

bool HostEngineProbe::StagingBusy(const void* p) const {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(mu_);
  for (const Buffer& b : buffers_) {
    if (c >= b.begin && c < b.begin + b.bytes) return b.busy > 0;
  }
  return false;
}

int64_t HostEngineProbe::batches_done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_done_;
}

void HostEngineProbe::AddStaging(const char* buffer, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  buffers_.push_back({buffer, bytes, 0});
}

int64_t HostEngineProbe::freed_while_busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return freed_while_busy_;
}

void HostEngineProbe::RemoveStaging(const char* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(buffers_, [&](const Buffer& b) {
    if (b.begin != buffer) return false;
    if (b.busy > 0) ++freed_while_busy_;
    return true;
  });
}

void HostEngineProbe::MarkBusy(const char* buffer, int delta) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Buffer& b : buffers_) {
    if (b.begin == buffer) b.busy += delta;
  }
}

void HostEngineProbe::BatchDone() {
  std::lock_guard<std::mutex> lock(mu_);
  ++batches_done_;
}

}  // namespace stfs::gpu
