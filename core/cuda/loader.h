// stfs::gpu::Loader: put tensors, or the slice of them a rank owns, into GPU
// memory straight from a safetensors source.
//
//   ASSIGN_OR_RETURN(auto source, gpu::TensorSource::Open("model.safetensors"));
//   ASSIGN_OR_RETURN(auto loader, gpu::NewCudaLoader(gpu::LoaderOptions{}));
//   ASSIGN_OR_RETURN(auto w, loader->Load(*source, "lm_head.weight", ":, 0:512", stream));
//
// Host memory stays bounded by the staging budget (staging_buffer_count x
// staging_buffer_bytes of pinned memory, allocated once per loader) whatever
// the tensor size: the full tensor is never built on the host. Loads are
// stream-ordered: they start after work already queued on `stream`, and the
// bytes are ready once `stream` reaches the point where the call returned
// (or at return, with LoaderOptions::synchronize). One load runs at a time
// per loader; concurrent calls wait for each other.
//
// Device discipline (CUDA loader): a loader is bound to one device
// (LoaderOptions::device; -1 = the caller's current device when the loader is
// made). Its calls make that device current while they run and restore the
// caller's current device before returning; its reader threads set it
// themselves. A stream of another device is refused (InvalidArgument), and
// so is any destination that is not device memory of the loader's device or
// managed memory, before anything is read or written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/cuda/copy_engine.h"
#include "core/cuda/tensor_source.h"
#include "core/slice_plan.h"
#include "core/status.h"

namespace stfs::gpu {

struct LoaderOptions {
  // Pinned staging budget: count x bytes, allocated when the loader is made.
  size_t staging_buffer_bytes = 16 << 20;
  int staging_buffer_count = 8;
  // Threads reading the source into staging buffers (pread); 0 picks
  // min(staging_buffer_count, hardware threads, 8).
  int reader_threads = 0;
  // Reads through holes up to this size instead of issuing one read per run:
  // a narrow column shard then reads covering rows once and places columns
  // with 2-D copies. 0 reads exactly the slice's bytes, one read per run.
  uint64_t max_read_gap_bytes = 32 << 10;
  // Opens local files with O_DIRECT (cold files: no page-cache pollution);
  // reads are then 4 KiB-aligned. Not every filesystem allows it (tmpfs).
  bool direct_io = false;
  // Blocks until the bytes are in place before returning.
  bool synchronize = false;
  // CUDA device ordinal the loader is bound to (the CUDA loader only); -1:
  // the calling thread's current device when the loader is made.
  int device = -1;
  // 2-D copies of rows at most this wide go through a gather kernel that
  // reads pinned memory directly, instead of cudaMemcpy2DAsync; 0 disables.
  uint64_t gather_kernel_max_width = 0;
};

// What the last load did, for benchmarks and tests.
struct LoadStats {
  uint64_t fills = 0;         // staging buffers filled
  uint64_t reads = 0;         // preads issued
  uint64_t bytes_read = 0;    // bytes read from the source (covering reads count gaps)
  uint64_t copies = 0;        // copies queued (1-D and 2-D)
  uint64_t copies_2d = 0;
  uint64_t bytes_copied = 0;  // bytes placed in the destination
};

// Memory the library allocated for a result (device memory for the CUDA
// loader); freed on destruction. It shares ownership of the engine that
// allocated it, so it stays valid after its loader is gone.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::shared_ptr<CopyEngine> engine, void* data, size_t size)
      : engine_(std::move(engine)), data_(data), size_(size) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // Gives up ownership; free the pointer with Loader::Free.
  void* Release();
  void Reset();

 private:
  std::shared_ptr<CopyEngine> engine_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// One tensor (or slice of one) to load into caller memory.
struct LoadRequest {
  std::string name;
  std::vector<SliceItem> slice;  // empty: the whole tensor
  void* dst = nullptr;
  size_t capacity = 0;           // bytes available at dst
};

// One tensor (or slice of one) to load into library memory.
struct SliceRequest {
  std::string name;
  std::vector<SliceItem> slice;
};

// Where a loaded result lives.
struct LoadedTensor {
  std::string name;
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;  // the result's shape
  void* data = nullptr;         // inside the owning buffer
  uint64_t bytes = 0;
};

// Results that share one library allocation.
struct LoadedBatch {
  DeviceBuffer buffer;
  std::vector<LoadedTensor> tensors;  // in request order
};

class Pipeline;

// Plans a slice of tensor `name` of `source` with the core planner and checks
// the plan stays inside the tensor; errors name the source and the tensor.
StatusOr<SlicePlan> PlanTensorSlice(const TensorSource& source, std::string_view name,
                                    const std::vector<SliceItem>& slice);
// Same, with the slice as numpy index text (":, 0:512"; "" = everything).
StatusOr<SlicePlan> PlanTensorSlice(const TensorSource& source, std::string_view name,
                                    std::string_view spec);

class Loader {
 public:
  // Makes a loader over `engine`, allocating the staging budget.
  static StatusOr<std::unique_ptr<Loader>> Create(std::unique_ptr<CopyEngine> engine,
                                                  const LoaderOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Loads a slice of `name` (empty slice: the whole tensor) into `dst`,
  // which must hold the result's bytes. `stream` must belong to the
  // loader's device and `dst` be memory the engine accepts (see above).
  Status LoadInto(const TensorSource& source, std::string_view name,
                  const std::vector<SliceItem>& slice, void* dst, size_t capacity,
                  void* stream = nullptr);
  Status LoadInto(const TensorSource& source, std::string_view name, std::string_view spec,
                  void* dst, size_t capacity, void* stream = nullptr);

  // Loads a slice into memory the library allocates.
  StatusOr<LoadedBatch> Load(const TensorSource& source, std::string_view name,
                             const std::vector<SliceItem>& slice, void* stream = nullptr);
  StatusOr<LoadedBatch> Load(const TensorSource& source, std::string_view name,
                             std::string_view spec, void* stream = nullptr);

  // Loads many requests through one pipeline (reads of neighbouring
  // tensors coalesce). Destinations must not overlap one another.
  Status LoadBatchInto(const TensorSource& source, std::span<const LoadRequest> requests,
                       void* stream = nullptr);
  // Loads many slices into one library allocation, each result at a
  // 256-byte aligned offset.
  StatusOr<LoadedBatch> LoadBatch(const TensorSource& source,
                                  std::span<const SliceRequest> requests, void* stream = nullptr);
  // Loads every tensor of the source (LoadBatch of all, whole).
  StatusOr<LoadedBatch> LoadAll(const TensorSource& source, void* stream = nullptr);

  // Allocates / frees destination memory through the engine.
  StatusOr<DeviceBuffer> Allocate(size_t bytes);
  void Free(void* data);

  CopyEngine& engine() { return *engine_; }
  const LoaderOptions& options() const { return options_; }
  LoadStats last_stats() const;

 private:
  Loader(std::unique_ptr<CopyEngine> engine, const LoaderOptions& options);

  std::shared_ptr<CopyEngine> engine_;
  LoaderOptions options_;
  std::unique_ptr<Pipeline> pipeline_;
  mutable std::mutex load_mu_;  // one load at a time
  LoadStats stats_;
};

// Makes a loader whose destinations are host memory (no GPU needed).
StatusOr<std::unique_ptr<Loader>> NewHostLoader(const LoaderOptions& options,
                                                const HostEngineOptions& host = {});

// Makes a loader on CUDA device `options.device`. Unavailable ("no CUDA
// device ...") when the driver or a device is missing.
StatusOr<std::unique_ptr<Loader>> NewCudaLoader(const LoaderOptions& options);

// Returns how many CUDA devices are usable; 0 when there is no driver or no
// device, with the runtime's reason in `reason` when given.
int CudaDeviceCount(std::string* reason = nullptr);

// Returns the slice selecting rank `rank` of `world` near-equal parts of
// dimension `dim` (negative counts from the end) of `shape`, as torch.chunk
// splits: parts of ceil(size / world), the last ones shorter or empty.
StatusOr<std::vector<SliceItem>> ShardSlice(const std::vector<uint64_t>& shape, int dim,
                                            int rank, int world);

}  // namespace stfs::gpu
