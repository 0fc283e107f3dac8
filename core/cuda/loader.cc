// The loader's public operations (see loader.h): plan each request with the
// core slice planner, lay the results out, and run them through one pipeline.
#include "core/cuda/loader.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/cuda/pipeline.h"

namespace stfs::gpu {
namespace {

constexpr uint64_t kBatchAlignment = 256;

std::string Quoted(std::string_view name) { return "tensor " + QuoteTensorName(name); }

struct PlannedRequest {
  const TensorInfo* tensor;
  SlicePlan plan;
  uintptr_t dst;
  uint32_t request;  // index in the caller's list
};

// Refuses a batch whose destinations overlap: two results would race for
// the same bytes.
Status CheckDisjoint(const TensorSource& source, std::span<const LoadRequest> requests,
                     const std::vector<PlannedRequest>& planned) {
  std::vector<const PlannedRequest*> by_address;
  for (const PlannedRequest& p : planned) {
    if (p.plan.result_bytes > 0) by_address.push_back(&p);
  }
  std::sort(by_address.begin(), by_address.end(),
            [](const PlannedRequest* a, const PlannedRequest* b) { return a->dst < b->dst; });
  for (size_t i = 1; i < by_address.size(); ++i) {
    const PlannedRequest& a = *by_address[i - 1];
    const PlannedRequest& b = *by_address[i];
    if (b.dst - a.dst < a.plan.result_bytes) {
      return Status::InvalidArgument(source.Describe() + ": the destinations of requests " +
                                     std::to_string(a.request) + " (" + Quoted(requests[a.request].name) +
                                     ") and " + std::to_string(b.request) + " (" +
                                     Quoted(requests[b.request].name) + ") overlap");
    }
  }
  return Status::OK();
}

}  // namespace

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    engine_ = std::move(other.engine_);
    other.engine_ = nullptr;
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void* DeviceBuffer::Release() {
  engine_ = nullptr;
  size_ = 0;
  return std::exchange(data_, nullptr);
}

void DeviceBuffer::Reset() {
  if (engine_ != nullptr && data_ != nullptr) engine_->FreeDestination(data_);
  engine_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

Loader::Loader(std::unique_ptr<CopyEngine> engine, const LoaderOptions& options)
    : engine_(std::move(engine)), options_(options) {}

Loader::~Loader() = default;  // pipeline_ (declared after engine_) goes first

StatusOr<std::unique_ptr<Loader>> Loader::Create(std::unique_ptr<CopyEngine> engine,
                                                 const LoaderOptions& options) {
  if (engine == nullptr) return Status::InvalidArgument("no copy engine");
  std::unique_ptr<Loader> loader(new Loader(std::move(engine), options));
  ASSIGN_OR_RETURN(loader->pipeline_, Pipeline::Create(loader->engine_.get(), options));
  return loader;
}

StatusOr<SlicePlan> PlanTensorSlice(const TensorSource& source, std::string_view name,
                                    const std::vector<SliceItem>& slice) {
  ASSIGN_OR_RETURN(const TensorInfo* tensor, source.Get(name));
  StatusOr<SlicePlan> plan = PlanSlice(tensor->dtype, tensor->shape, slice);
  if (!plan.ok()) return plan.status().WithContext(source.Describe() + ": " + Quoted(name));
  Status bounds = CheckPlanBounds(*plan, tensor->byte_size());
  if (!bounds.ok()) return bounds.WithContext(source.Describe() + ": " + Quoted(name));
  return plan;
}

StatusOr<SlicePlan> PlanTensorSlice(const TensorSource& source, std::string_view name,
                                    std::string_view spec) {
  StatusOr<std::vector<SliceItem>> items = ParseSliceSpec(spec);
  if (!items.ok()) return items.status().WithContext("slice \"" + std::string(spec.substr(0, 200)) + "\"");
  return PlanTensorSlice(source, name, *items);
}

Status Loader::LoadInto(const TensorSource& source, std::string_view name,
                        const std::vector<SliceItem>& slice, void* dst, size_t capacity, void* stream) {
  LoadRequest request{std::string(name), slice, dst, capacity};
  return LoadBatchInto(source, std::span<const LoadRequest>(&request, 1), stream);
}

Status Loader::LoadInto(const TensorSource& source, std::string_view name, std::string_view spec,
                        void* dst, size_t capacity, void* stream) {
  StatusOr<std::vector<SliceItem>> items = ParseSliceSpec(spec);
  if (!items.ok()) return items.status().WithContext("slice \"" + std::string(spec.substr(0, 200)) + "\"");
  return LoadInto(source, name, *items, dst, capacity, stream);
}

Status Loader::LoadBatchInto(const TensorSource& source, std::span<const LoadRequest> requests,
                             void* stream) {
  std::vector<PlannedRequest> planned;
  planned.reserve(requests.size());
  for (const LoadRequest& r : requests) {
    ASSIGN_OR_RETURN(SlicePlan plan, PlanTensorSlice(source, r.name, r.slice));
    if (plan.result_bytes > r.capacity) {
      return Status::InvalidArgument(source.Describe() + ": " + Quoted(r.name) + ": the result needs " +
                                     std::to_string(plan.result_bytes) + " bytes but the destination holds " +
                                     std::to_string(r.capacity));
    }
    if (r.dst == nullptr && plan.result_bytes > 0) {
      return Status::InvalidArgument(source.Describe() + ": " + Quoted(r.name) + ": null destination");
    }
    if (plan.result_bytes > 0) {
      Status dst_ok = engine_->CheckDestination(r.dst, plan.result_bytes);
      if (!dst_ok.ok()) return dst_ok.WithContext(source.Describe() + ": " + Quoted(r.name));
    }
    planned.push_back({source.Find(r.name), std::move(plan), reinterpret_cast<uintptr_t>(r.dst),
                       static_cast<uint32_t>(planned.size())});
  }
  RETURN_IF_ERROR(engine_->CheckStream(stream));
  RETURN_IF_ERROR(CheckDisjoint(source, requests, planned));
  // File order lets reads of neighbouring tensors coalesce.
  std::stable_sort(planned.begin(), planned.end(), [&](const PlannedRequest& a, const PlannedRequest& b) {
    return source.FileOffset(*a.tensor) + a.plan.base_offset < source.FileOffset(*b.tensor) + b.plan.base_offset;
  });
  BatchSegments segments;
  for (const PlannedRequest& p : planned) segments.Add(p.plan, source.FileOffset(*p.tensor), p.dst, p.request);

  std::lock_guard<std::mutex> lock(load_mu_);
  stats_ = LoadStats{};
  return pipeline_->Run(source, &segments, stream, &stats_);
}

StatusOr<LoadedBatch> Loader::LoadBatch(const TensorSource& source, std::span<const SliceRequest> requests,
                                        void* stream) {
  LoadedBatch batch;
  std::vector<LoadRequest> loads;
  uint64_t total = 0;
  for (const SliceRequest& r : requests) {
    ASSIGN_OR_RETURN(SlicePlan plan, PlanTensorSlice(source, r.name, r.slice));
    total = (total + kBatchAlignment - 1) / kBatchAlignment * kBatchAlignment;
    LoadedTensor t;
    t.name = r.name;
    t.dtype = plan.dtype;
    t.shape = plan.result_shape;
    t.bytes = plan.result_bytes;
    t.data = reinterpret_cast<void*>(static_cast<uintptr_t>(total));  // offset until allocated
    total += plan.result_bytes;
    batch.tensors.push_back(std::move(t));
    loads.push_back({r.name, r.slice, nullptr, static_cast<size_t>(plan.result_bytes)});
  }
  ASSIGN_OR_RETURN(batch.buffer, Allocate(static_cast<size_t>(std::max<uint64_t>(total, 1))));
  char* base = static_cast<char*>(batch.buffer.data());
  for (size_t i = 0; i < loads.size(); ++i) {
    batch.tensors[i].data = base + reinterpret_cast<uintptr_t>(batch.tensors[i].data);
    loads[i].dst = batch.tensors[i].data;
  }
  RETURN_IF_ERROR(LoadBatchInto(source, loads, stream));
  return batch;
}

StatusOr<LoadedBatch> Loader::Load(const TensorSource& source, std::string_view name,
                                   const std::vector<SliceItem>& slice, void* stream) {
  SliceRequest request{std::string(name), slice};
  return LoadBatch(source, std::span<const SliceRequest>(&request, 1), stream);
}

StatusOr<LoadedBatch> Loader::Load(const TensorSource& source, std::string_view name,
                                   std::string_view spec, void* stream) {
  StatusOr<std::vector<SliceItem>> items = ParseSliceSpec(spec);
  if (!items.ok()) return items.status().WithContext("slice \"" + std::string(spec.substr(0, 200)) + "\"");
  return Load(source, name, *items, stream);
}

StatusOr<LoadedBatch> Loader::LoadAll(const TensorSource& source, void* stream) {
  std::vector<SliceRequest> requests;
  requests.reserve(source.tensors().size());
  for (const TensorInfo& t : source.tensors()) requests.push_back({t.name, {}});
  return LoadBatch(source, requests, stream);
}

StatusOr<DeviceBuffer> Loader::Allocate(size_t bytes) {
  ASSIGN_OR_RETURN(void* data, engine_->AllocateDestination(bytes));
  return DeviceBuffer(engine_, data, bytes);
}

void Loader::Free(void* data) {
  if (data != nullptr) engine_->FreeDestination(data);
}

LoadStats Loader::last_stats() const {
  std::lock_guard<std::mutex> lock(load_mu_);
  return stats_;
}

StatusOr<std::unique_ptr<Loader>> NewHostLoader(const LoaderOptions& options, const HostEngineOptions& host) {
  return Loader::Create(NewHostCopyEngine(host), options);
}

StatusOr<std::vector<SliceItem>> ShardSlice(const std::vector<uint64_t>& shape, int dim, int rank, int world) {
  const int ndim = static_cast<int>(shape.size());
  if (ndim == 0) return Status::InvalidArgument("a scalar has no dimension to shard");
  const int d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= ndim) {
    return Status::InvalidArgument("shard dimension " + std::to_string(dim) + " is outside a " +
                                   std::to_string(ndim) + "-d shape");
  }
  if (world < 1 || rank < 0 || rank >= world) {
    return Status::InvalidArgument("shard rank " + std::to_string(rank) + " of world " +
                                   std::to_string(world) + " is not valid");
  }
  const uint64_t size = shape[static_cast<size_t>(d)];
  const uint64_t part = (size + static_cast<uint64_t>(world) - 1) / static_cast<uint64_t>(world);
  const uint64_t start = std::min(size, part * static_cast<uint64_t>(rank));
  const uint64_t stop = std::min(size, start + part);
  std::vector<SliceItem> items(static_cast<size_t>(d), SliceItem::All());
  items.push_back(SliceItem::Range(static_cast<int64_t>(start), static_cast<int64_t>(stop)));
  return items;
}

}  // namespace stfs::gpu
