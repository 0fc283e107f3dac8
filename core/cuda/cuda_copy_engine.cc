// CudaCopyEngine: the CopyEngine that places staged bytes in GPU memory.
//
// Bound to one device. One non-blocking stream and one event per lane
// (staging buffer). A load starts with an event on the caller's stream that
// every lane waits for, and ends with the caller's stream waiting for every
// lane's event, so loads are ordered on the caller's stream like any kernel,
// while lanes copy in parallel. Staging buffers are pinned (cudaHostAlloc,
// mapped for the gather kernel). Lane events use blocking sync, so a thread
// waiting for a lane sleeps instead of spinning a core.
//
// Device discipline: every method runs inside a DeviceScope, which makes the
// engine's device current on the calling thread (reader threads included)
// and restores the caller's device on the way out. Destinations are checked
// with cudaPointerGetAttributes (and the driver's allocation range) and
// streams with cudaStreamGetDevice before a load writes anything
// (destination_check.h holds the rules). After an error, Finish drains every
// lane, falling back to cudaStreamSynchronize when an event could not be
// recorded. Every CUDA object it creates is destroyed in its destructor after
// the lanes drain.
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/cuda/copy_engine.h"
#include "core/cuda/destination_check.h"
#include "core/cuda/loader.h"
#include "core/cuda/strided_gather.h"

namespace stfs::gpu {
namespace {

// The oldest Linux driver for each CUDA major (NVIDIA's compatibility table).
int MinimumDriverFor(int cuda_major) {
  switch (cuda_major) {
    case 11: return 450;
    case 12: return 525;
    case 13: return 580;
    default: return 0;
  }
}

std::string DriverTooOld() {
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  const int major = CUDART_VERSION / 1000, minor = CUDART_VERSION % 1000 / 10;
  std::string needs = "stfs-gpu uses the CUDA " + std::to_string(major) + "." + std::to_string(minor) +
                      " runtime, which needs a driver for CUDA >= " + std::to_string(major) + ".0";
  if (MinimumDriverFor(major) > 0) needs += " (Linux driver >= " + std::to_string(MinimumDriverFor(major)) + ")";
  if (driver == 0) return "no CUDA driver found (libcuda.so.1): " + needs;
  return "CUDA driver too old: " + needs + "; the installed driver supports CUDA " + std::to_string(driver / 1000) +
         "." + std::to_string(driver % 1000 / 10);
}

// Turns a CUDA error into the most specific Status, naming `what`.
Status CudaError(cudaError_t err, const std::string& what) {
  (void)cudaGetLastError();  // clear a non-sticky error so later calls are not blamed
  std::string msg = what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  switch (err) {
    case cudaErrorMemoryAllocation:
      return Status::ResourceExhausted(msg);
    case cudaErrorInsufficientDriver:
      return Status::Unavailable(what + ": " + DriverTooOld());
    case cudaErrorNoDevice:
    case cudaErrorDevicesUnavailable:
      return Status::Unavailable(msg);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidPitchValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidResourceHandle:
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

// Makes `device` current on this thread for the scope's life and restores
// the thread's previous device after.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    cudaError_t err = cudaGetDevice(&saved_);
    if (err == cudaSuccess && saved_ == device) return;
    if (err == cudaSuccess) err = cudaSetDevice(device);
    if (err != cudaSuccess) {
      status_ = CudaError(err, "cuda:" + std::to_string(device) + ": making the device current");
      return;
    }
    restore_ = true;
  }
  ~DeviceScope() {
    if (restore_) (void)cudaSetDevice(saved_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  const Status& status() const { return status_; }

 private:
  int saved_ = 0;
  bool restore_ = false;
  Status status_;
};

// cuMemGetAddressRange through the runtime's driver entry point, so the
// library needs no link to libcuda; nullptr when the driver lacks it.
using GetAddressRangeFn = int (*)(unsigned long long* base, size_t* size, unsigned long long ptr);
GetAddressRangeFn AddressRangeFunction() {
  static const GetAddressRangeFn fn = [] {
    void* f = nullptr;
#if CUDART_VERSION >= 12000
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault,
                                                             &found);
#else
    const cudaError_t err = cudaGetDriverEntryPoint("cuMemGetAddressRange", &f, cudaEnableDefault, &found);
#endif
    const bool ok = err == cudaSuccess && found == cudaDriverEntryPointSuccess && f != nullptr;
#else
    const cudaError_t err = cudaGetDriverEntryPoint("cuMemGetAddressRange", &f, cudaEnableDefault);
    const bool ok = err == cudaSuccess && f != nullptr;
#endif
    if (!ok) {
      (void)cudaGetLastError();
      return GetAddressRangeFn{nullptr};
    }
    return reinterpret_cast<GetAddressRangeFn>(f);
  }();
  return fn;
}

class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine(int device, uint64_t gather_max_width)
      : device_(device), gather_max_width_(gather_max_width), name_("cuda:" + std::to_string(device)) {}

  ~CudaCopyEngine() override {
    DeviceScope scope(device_);
    for (cudaStream_t s : streams_) cudaStreamSynchronize(s);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    if (start_event_ != nullptr) cudaEventDestroy(start_event_);
  }

  const std::string& Describe() const override { return name_; }
  bool IsDevice() const override { return true; }

  StatusOr<char*> AllocateStaging(size_t bytes) override {
    DeviceScope scope(device_);
    RETURN_IF_ERROR(scope.status());
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
    DeviceScope scope(device_);
    cudaFreeHost(buffer);
  }

  StatusOr<void*> AllocateDestination(size_t bytes) override {
    DeviceScope scope(device_);
    RETURN_IF_ERROR(scope.status());
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
    DeviceScope scope(device_);
    cudaFree(buffer);
  }

  Status CheckDestination(const void* dst, uint64_t bytes) override {
    DeviceScope scope(device_);
    RETURN_IF_ERROR(scope.status());
    PointerFacts facts;
    cudaPointerAttributes attr{};
    cudaError_t err = cudaPointerGetAttributes(&attr, dst);
    if (err == cudaErrorInvalidValue) {
      (void)cudaGetLastError();  // older runtimes: a pointer CUDA never saw
      attr.type = cudaMemoryTypeUnregistered;
    } else if (err != cudaSuccess) {
      return CudaError(err, name_ + ": asking CUDA what the destination is");
    }
    switch (attr.type) {
      case cudaMemoryTypeHost: facts.kind = PointerKind::kHost; break;
      case cudaMemoryTypeDevice: facts.kind = PointerKind::kDevice; break;
      case cudaMemoryTypeManaged: facts.kind = PointerKind::kManaged; break;
      default: facts.kind = PointerKind::kUnregistered; break;
    }
    facts.device = attr.device;
    if (facts.kind == PointerKind::kDevice && facts.device == device_) {
      if (GetAddressRangeFn range = AddressRangeFunction()) {
        unsigned long long base = 0;
        size_t size = 0;
        if (range(&base, &size, reinterpret_cast<uintptr_t>(dst)) == 0) {
          facts.range_start = static_cast<uintptr_t>(base);
          facts.range_bytes = size;
        }
      }
    }
    return CheckDestinationFacts(dst, bytes, facts, device_);
  }

  Status CheckStream(void* stream) override {
    // The null, legacy and per-thread handles name the current device's
    // default stream, which is the loader's own while its calls run.
    if (stream == nullptr || stream == static_cast<void*>(cudaStreamLegacy) ||
        stream == static_cast<void*>(cudaStreamPerThread)) {
      return Status::OK();
    }
    DeviceScope scope(device_);
    RETURN_IF_ERROR(scope.status());
#if CUDART_VERSION >= 12080
    int stream_device = -1;
    STFS_CUDA_RETURN(cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &stream_device),
                     name_ + ": asking which device the stream belongs to");
    return CheckStreamDevice(stream_device, device_);
#else
    // Runtimes before 12.8 cannot say; Begin's cudaEventRecord of an event
    // of this device on the stream then refuses a stream of another device
    // (cudaErrorInvalidResourceHandle -> InvalidArgument) before any copy.
    return Status::OK();
#endif
  }

  Status SetLanes(int lanes) override {
    DeviceScope scope(device_);
    RETURN_IF_ERROR(scope.status());
    STFS_CUDA_RETURN(cudaEventCreateWithFlags(&start_event_, cudaEventDisableTiming),
                     name_ + ": creating an event");
    for (int i = 0; i < lanes; ++i) {
      cudaStream_t stream = nullptr;
      STFS_CUDA_RETURN(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), name_ + ": creating a stream");
      streams_.push_back(stream);
      cudaEvent_t event = nullptr;
      STFS_CUDA_RETURN(cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventBlockingSync),
                       name_ + ": creating an event");
      events_.push_back(event);
    }
    return Status::OK();
  }

  Status Begin(void* stream) override {
    DeviceScope scope(device_);
    RETURN_IF_ERROR(scope.status());
    STFS_CUDA_RETURN(cudaEventRecord(start_event_, static_cast<cudaStream_t>(stream)),
                     name_ + ": recording on the caller's stream");
    for (cudaStream_t s : streams_) {
      STFS_CUDA_RETURN(cudaStreamWaitEvent(s, start_event_, 0), name_ + ": ordering a lane after the caller's stream");
    }
    return Status::OK();
  }

  Status Enqueue(int lane, const char* staging, const StagedCopy* copies, size_t count) override {
    DeviceScope scope(device_);
    RETURN_IF_ERROR(scope.status());
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
        STFS_CUDA_RETURN(cudaMemcpyAsync(dst, staging + c.staging_offset, c.width, cudaMemcpyHostToDevice, s),
                         name_ + ": copying " + std::to_string(c.width) + " bytes to " + Address(c.dst));
      } else if (device_view != nullptr && c.width <= gather_max_width_) {
        STFS_CUDA_RETURN(LaunchStridedGather(device_view + c.staging_offset, c.src_pitch, dst, c.dst_pitch,
                                             c.width, c.height, s),
                         name_ + ": launching the strided gather");
      } else {
        STFS_CUDA_RETURN(cudaMemcpy2DAsync(dst, c.dst_pitch, staging + c.staging_offset, c.src_pitch, c.width,
                                           c.height, cudaMemcpyHostToDevice, s),
                         name_ + ": 2-D copy of " + std::to_string(c.height) + " rows of " +
                             std::to_string(c.width) + " bytes to " + Address(c.dst));
      }
    }
    STFS_CUDA_RETURN(cudaEventRecord(events_[static_cast<size_t>(lane)], s), name_ + ": recording a lane event");
    return Status::OK();
  }

  Status WaitLane(int lane) override {
    DeviceScope scope(device_);
    RETURN_IF_ERROR(scope.status());
    // An event never recorded counts as complete. Blocking sync: sleeps.
    STFS_CUDA_RETURN(cudaEventSynchronize(events_[static_cast<size_t>(lane)]),
                     name_ + ": waiting for lane " + std::to_string(lane));
    return Status::OK();
  }

  Status Finish(void* stream, bool synchronize) override {
    Status first;
    auto note = [&](cudaError_t err, const char* what) {
      if (err != cudaSuccess && first.ok()) first = CudaError(err, name_ + ": " + what);
      return err == cudaSuccess;
    };
    DeviceScope scope(device_);
    if (!scope.status().ok()) first = scope.status();
    for (size_t i = 0; i < streams_.size(); ++i) {
      const bool recorded = note(cudaEventRecord(events_[i], streams_[i]), "recording a lane event");
      if (recorded) {
        note(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), events_[i], 0),
             "ordering the caller's stream after a lane");
      }
      if (synchronize) {
        // Drain: whatever failed, nothing queued on this lane may still run
        // once we return.
        if (!recorded || !note(cudaEventSynchronize(events_[i]), "waiting for the copies")) {
          note(cudaStreamSynchronize(streams_[i]), "draining a lane");
        }
      }
    }
    return first;
  }

  void Drain() override {
    DeviceScope scope(device_);
    // A lane's stream holds only our copies: synchronizing it waits for all
    // of them, whether or not the lane's event was recorded.
    for (cudaStream_t s : streams_) (void)cudaStreamSynchronize(s);
  }

  Status CopyToHost(const void* src, size_t bytes, void* dst) override {
    DeviceScope scope(device_);
    RETURN_IF_ERROR(scope.status());
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
    if (reason != nullptr) {
      *reason = err == cudaErrorInsufficientDriver
                    ? DriverTooOld()
                    : std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    }
    return 0;
  }
  if (count == 0 && reason != nullptr) *reason = "the CUDA runtime reports 0 devices";
  return count;
}

StatusOr<std::unique_ptr<Loader>> NewCudaLoader(const LoaderOptions& options) {
  std::string reason;
  const int count = CudaDeviceCount(&reason);
  if (count == 0) return Status::Unavailable("no CUDA device (" + reason + ")");
  LoaderOptions bound = options;
  if (bound.device < 0) {
    // Bound to the caller's current device at creation.
    STFS_CUDA_RETURN(cudaGetDevice(&bound.device), "asking for the current CUDA device");
  }
  if (bound.device >= count) {
    return Status::InvalidArgument("CUDA device " + std::to_string(bound.device) + " does not exist (" +
                                   std::to_string(count) + " present)");
  }
  return Loader::Create(std::make_unique<CudaCopyEngine>(bound.device, bound.gather_kernel_max_width), bound);
}

}  // namespace stfs::gpu
