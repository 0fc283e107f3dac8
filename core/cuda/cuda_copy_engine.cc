// CudaCopyEngine: the CopyEngine that places staged bytes in GPU memory.
//
// One non-blocking stream and one event per lane (staging buffer). A load
// starts with an event on the caller's stream that every lane waits for, and
// ends with the caller's stream waiting for every lane's event, so loads are
// ordered on the caller's stream like any kernel, while lanes copy in
// parallel. Staging buffers are pinned (cudaHostAlloc, mapped for the gather
// kernel). Every CUDA object it creates is destroyed in its destructor after
// the lanes drain; it never leaves a CUDA error unreported.
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/cuda/copy_engine.h"
#include "core/cuda/loader.h"
#include "core/cuda/strided_gather.h"

namespace stfs::gpu {
namespace {

// Turns a CUDA error into the most specific Status, naming `what`.
Status CudaError(cudaError_t err, const std::string& what) {
  (void)cudaGetLastError();  // clear a non-sticky error so later calls are not blamed
  std::string msg = what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  switch (err) {
    case cudaErrorMemoryAllocation:
      return Status::ResourceExhausted(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      return Status::Unavailable(msg);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidPitchValue:
    case cudaErrorInvalidDevice:
      return Status::InvalidArgument(msg);
    default:
      return Status::Internal(msg);
  }
}

#define STFS_CUDA_RETURN(call, what)                  \
  do {                                                \
    cudaError_t stfs_cuda_err_ = (call);              \
    if (stfs_cuda_err_ != cudaSuccess) return CudaError(stfs_cuda_err_, (what)); \
  } while (0)

class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine(int device, uint64_t gather_max_width)
      : device_(device), gather_max_width_(gather_max_width), name_("cuda:" + std::to_string(device)) {}

  ~CudaCopyEngine() override {
    cudaSetDevice(device_);
    for (cudaStream_t s : streams_) cudaStreamSynchronize(s);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    if (start_event_ != nullptr) cudaEventDestroy(start_event_);
  }

  const std::string& Describe() const override { return name_; }
  bool IsDevice() const override { return true; }

  StatusOr<char*> AllocateStaging(size_t bytes) override {
    STFS_CUDA_RETURN(cudaSetDevice(device_), name_ + ": cudaSetDevice");
    void* p = nullptr;
    STFS_CUDA_RETURN(cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped),
                     name_ + ": pinning a " + std::to_string(bytes) + "-byte staging buffer");
    void* device_view = nullptr;
    cudaError_t err = cudaHostGetDevicePointer(&device_view, p, 0);
    if (err != cudaSuccess) {
      cudaFreeHost(p);
      return CudaError(err, name_ + ": mapping a staging buffer");
    }
    std::lock_guard<std::mutex> lock(mu_);
    device_views_[static_cast<char*>(p)] = static_cast<char*>(device_view);
    return static_cast<char*>(p);
  }

  void FreeStaging(char* buffer) override {
    if (buffer == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      device_views_.erase(buffer);
    }
    cudaFreeHost(buffer);
  }

  StatusOr<void*> AllocateDestination(size_t bytes) override {
    STFS_CUDA_RETURN(cudaSetDevice(device_), name_ + ": cudaSetDevice");
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      size_t free_bytes = 0, total_bytes = 0;
      (void)cudaGetLastError();
      cudaMemGetInfo(&free_bytes, &total_bytes);
      return CudaError(err, name_ + ": allocating " + std::to_string(bytes) + " bytes of device memory (" +
                                std::to_string(free_bytes) + " of " + std::to_string(total_bytes) +
                                " free)");
    }
    return p;
  }

  void FreeDestination(void* buffer) override {
    if (buffer == nullptr) return;
    cudaSetDevice(device_);
    cudaFree(buffer);
  }

  Status SetLanes(int lanes) override {
    STFS_CUDA_RETURN(cudaSetDevice(device_), name_ + ": cudaSetDevice");
    STFS_CUDA_RETURN(cudaEventCreateWithFlags(&start_event_, cudaEventDisableTiming),
                     name_ + ": creating an event");
    for (int i = 0; i < lanes; ++i) {
      cudaStream_t stream = nullptr;
      STFS_CUDA_RETURN(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), name_ + ": creating a stream");
      streams_.push_back(stream);
      cudaEvent_t event = nullptr;
      STFS_CUDA_RETURN(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), name_ + ": creating an event");
      events_.push_back(event);
    }
    return Status::OK();
  }

  Status Begin(void* stream) override {
    STFS_CUDA_RETURN(cudaSetDevice(device_), name_ + ": cudaSetDevice");
    STFS_CUDA_RETURN(cudaEventRecord(start_event_, static_cast<cudaStream_t>(stream)),
                     name_ + ": recording on the caller's stream");
    for (cudaStream_t s : streams_) {
      STFS_CUDA_RETURN(cudaStreamWaitEvent(s, start_event_, 0), name_ + ": ordering a lane after the caller's stream");
    }
    return Status::OK();
  }

  Status Enqueue(int lane, const char* staging, const StagedCopy* copies, size_t count) override {
    STFS_CUDA_RETURN(cudaSetDevice(device_), name_ + ": cudaSetDevice");
    cudaStream_t s = streams_[static_cast<size_t>(lane)];
    const char* device_view = nullptr;
    if (gather_max_width_ > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = device_views_.find(const_cast<char*>(staging));
      if (it != device_views_.end()) device_view = it->second;
    }
    for (size_t i = 0; i < count; ++i) {
      const StagedCopy& c = copies[i];
      void* dst = reinterpret_cast<void*>(c.dst);
      if (c.height <= 1) {
        STFS_CUDA_RETURN(cudaMemcpyAsync(dst, staging + c.staging_offset, c.width, cudaMemcpyDefault, s),
                         name_ + ": copying " + std::to_string(c.width) + " bytes to " + Address(c.dst));
      } else if (device_view != nullptr && c.width <= gather_max_width_) {
        STFS_CUDA_RETURN(LaunchStridedGather(device_view + c.staging_offset, c.src_pitch, dst, c.dst_pitch,
                                             c.width, c.height, s),
                         name_ + ": launching the strided gather");
      } else {
        STFS_CUDA_RETURN(cudaMemcpy2DAsync(dst, c.dst_pitch, staging + c.staging_offset, c.src_pitch, c.width,
                                           c.height, cudaMemcpyDefault, s),
                         name_ + ": 2-D copy of " + std::to_string(c.height) + " rows of " +
                             std::to_string(c.width) + " bytes to " + Address(c.dst));
      }
    }
    STFS_CUDA_RETURN(cudaEventRecord(events_[static_cast<size_t>(lane)], s), name_ + ": recording a lane event");
    return Status::OK();
  }

  Status WaitLane(int lane) override {
    // An event never recorded counts as complete.
    STFS_CUDA_RETURN(cudaEventSynchronize(events_[static_cast<size_t>(lane)]),
                     name_ + ": waiting for lane " + std::to_string(lane));
    return Status::OK();
  }

  Status Finish(void* stream, bool synchronize) override {
    Status first;
    auto note = [&](cudaError_t err, const char* what) {
      if (err != cudaSuccess && first.ok()) first = CudaError(err, name_ + ": " + what);
    };
    note(cudaSetDevice(device_), "cudaSetDevice");
    for (size_t i = 0; i < streams_.size(); ++i) {
      note(cudaEventRecord(events_[i], streams_[i]), "recording a lane event");
      note(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), events_[i], 0),
           "ordering the caller's stream after a lane");
    }
    if (synchronize || !first.ok()) {
      for (cudaEvent_t e : events_) note(cudaEventSynchronize(e), "waiting for the copies");
    }
    return first;
  }

  Status CopyToHost(const void* src, size_t bytes, void* dst) override {
    STFS_CUDA_RETURN(cudaSetDevice(device_), name_ + ": cudaSetDevice");
    STFS_CUDA_RETURN(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), name_ + ": copying back to the host");
    return Status::OK();
  }

 private:
  static std::string Address(uintptr_t p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(p));
    return buf;
  }

  const int device_;
  const uint64_t gather_max_width_;
  const std::string name_;
  std::mutex mu_;  // guards device_views_
  std::unordered_map<char*, char*> device_views_;
  cudaEvent_t start_event_ = nullptr;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace

int CudaDeviceCount(std::string* reason) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    if (reason != nullptr) *reason = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    return 0;
  }
  if (count == 0 && reason != nullptr) *reason = "the CUDA runtime reports 0 devices";
  return count;
}

StatusOr<std::unique_ptr<Loader>> NewCudaLoader(const LoaderOptions& options) {
  std::string reason;
  const int count = CudaDeviceCount(&reason);
  if (count == 0) return Status::Unavailable("no CUDA device (" + reason + ")");
  if (options.device < 0 || options.device >= count) {
    return Status::InvalidArgument("CUDA device " + std::to_string(options.device) + " does not exist (" +
                                   std::to_string(count) + " present)");
  }
  return Loader::Create(std::make_unique<CudaCopyEngine>(options.device, options.gather_kernel_max_width),
                        options);
}

}  // namespace stfs::gpu
