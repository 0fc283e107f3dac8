// The C ABI (stfs_gpu.h) over stfs::gpu. Every entry point catches
// everything: no C++ exception may cross into C, Python or Rust callers.
#include "core/cuda/stfs_gpu.h"

#include <array>
#include <exception>
#include <new>
#include <string>

#include "core/cuda/loader.h"

struct stfs_gpu_source {
  std::unique_ptr<stfs::gpu::TensorSource> source;
};

struct stfs_gpu_loader {
  std::unique_ptr<stfs::gpu::Loader> loader;
};

namespace {

using stfs::Status;
using stfs::StatusCode;

thread_local std::string g_last_error;

static_assert(static_cast<int>(StatusCode::kInvalidArgument) == STFS_GPU_INVALID_ARGUMENT);
static_assert(static_cast<int>(StatusCode::kIOError) == STFS_GPU_IO_ERROR);
static_assert(static_cast<int>(StatusCode::kResourceExhausted) == STFS_GPU_RESOURCE_EXHAUSTED);
static_assert(static_cast<int>(StatusCode::kInternal) == STFS_GPU_INTERNAL);

int Fail(int code, std::string message) {
  g_last_error = std::move(message);
  return code;
}

int Report(const Status& status) {
  if (status.ok()) return STFS_GPU_OK;
  return Fail(static_cast<int>(status.code()), status.message());
}

// Runs `body` (returning an stfs_gpu_code), turning exceptions into codes.
template <typename Body>
int Guard(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(STFS_GPU_RESOURCE_EXHAUSTED, "out of host memory");
  } catch (const std::exception& e) {
    return Fail(STFS_GPU_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail(STFS_GPU_INTERNAL, "internal error: unknown exception");
  }
}

const char* DTypeCString(stfs::DType dtype) {
  static const std::array<std::string, stfs::kDTypeCount> names = [] {
    std::array<std::string, stfs::kDTypeCount> out;
    for (stfs::DType d : stfs::AllDTypes()) out[static_cast<size_t>(d)] = std::string(stfs::DTypeName(d));
    return out;
  }();
  return names[static_cast<size_t>(dtype)].c_str();
}

stfs::gpu::LoaderOptions ToLoaderOptions(const stfs_gpu_options* c) {
  stfs_gpu_options defaults;
  stfs_gpu_options_init(&defaults);
  if (c == nullptr) c = &defaults;
  stfs::gpu::LoaderOptions o;
  o.staging_buffer_bytes = static_cast<size_t>(c->staging_buffer_bytes);
  o.staging_buffer_count = c->staging_buffer_count;
  o.reader_threads = c->reader_threads;
  o.max_read_gap_bytes = c->max_read_gap_bytes;
  o.direct_io = c->direct_io != 0;
  o.synchronize = c->synchronize != 0;
  o.device = c->device;
  o.gather_kernel_max_width = c->gather_kernel_max_width;
  return o;
}

// Checks the handles and index every load takes.
int CheckTensor(const stfs_gpu_source* source, size_t index) {
  if (source == nullptr) return Fail(STFS_GPU_INVALID_ARGUMENT, "null source");
  if (index >= source->source->tensors().size()) {
    return Fail(STFS_GPU_OUT_OF_RANGE, source->source->Describe() + ": tensor index " + std::to_string(index) +
                                           " (it has " + std::to_string(source->source->tensors().size()) +
                                           " tensors)");
  }
  return STFS_GPU_OK;
}

const char* SliceText(const char* slice) { return slice == nullptr ? "" : slice; }

}  // namespace

extern "C" {

const char* stfs_gpu_last_error(void) { return g_last_error.c_str(); }

const char* stfs_gpu_code_name(int code) {
  switch (code) {
    case STFS_GPU_OK: return "OK";
    case STFS_GPU_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case STFS_GPU_NOT_FOUND: return "NOT_FOUND";
    case STFS_GPU_CORRUPTION: return "CORRUPTION";
    case STFS_GPU_IO_ERROR: return "IO_ERROR";
    case STFS_GPU_STALE: return "STALE";
    case STFS_GPU_UNAVAILABLE: return "UNAVAILABLE";
    case STFS_GPU_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case STFS_GPU_NOT_SUPPORTED: return "NOT_SUPPORTED";
    case STFS_GPU_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case STFS_GPU_INTERNAL: return "INTERNAL";
    case STFS_GPU_NO_DEVICE: return "NO_DEVICE";
    default: return "UNKNOWN";
  }
}

int stfs_gpu_abi_version(void) { return STFS_GPU_ABI_VERSION; }

int stfs_gpu_device_count(void) {
  int count = 0;
  Guard([&]() -> int {
    std::string reason;
    count = stfs::gpu::CudaDeviceCount(&reason);
    if (count == 0) g_last_error = "no CUDA device (" + reason + ")";
    return STFS_GPU_OK;
  });
  return count;
}

void stfs_gpu_options_init(stfs_gpu_options* options) {
  if (options == nullptr) return;
  const stfs::gpu::LoaderOptions d;
  options->staging_buffer_bytes = d.staging_buffer_bytes;
  options->staging_buffer_count = d.staging_buffer_count;
  options->reader_threads = d.reader_threads;
  options->max_read_gap_bytes = d.max_read_gap_bytes;
  options->direct_io = d.direct_io ? 1 : 0;
  options->synchronize = d.synchronize ? 1 : 0;
  options->device = d.device;
  options->gather_kernel_max_width = d.gather_kernel_max_width;
}

int stfs_gpu_source_open(const char* location, stfs_gpu_source** out) {
  return Guard([&]() -> int {
    if (location == nullptr || out == nullptr) return Fail(STFS_GPU_INVALID_ARGUMENT, "null argument");
    *out = nullptr;
    auto source = stfs::gpu::TensorSource::Open(location);
    if (!source.ok()) return Report(source.status());
    *out = new stfs_gpu_source{std::move(*source)};
    return STFS_GPU_OK;
  });
}

void stfs_gpu_source_close(stfs_gpu_source* source) {
  Guard([&]() -> int {
    delete source;
    return STFS_GPU_OK;
  });
}

int stfs_gpu_source_tensor_count(const stfs_gpu_source* source, size_t* out) {
  return Guard([&]() -> int {
    if (source == nullptr || out == nullptr) return Fail(STFS_GPU_INVALID_ARGUMENT, "null argument");
    *out = source->source->tensors().size();
    return STFS_GPU_OK;
  });
}

int stfs_gpu_source_tensor(const stfs_gpu_source* source, size_t index, stfs_gpu_tensor_info* out) {
  return Guard([&]() -> int {
    if (int rc = CheckTensor(source, index); rc != STFS_GPU_OK) return rc;
    if (out == nullptr) return Fail(STFS_GPU_INVALID_ARGUMENT, "null argument");
    const stfs::TensorInfo& t = source->source->tensors()[index];
    out->name = t.name.data();
    out->name_len = t.name.size();
    out->dtype = DTypeCString(t.dtype);
    out->ndim = static_cast<uint32_t>(t.shape.size());
    out->shape = t.shape.data();
    out->byte_size = t.byte_size();
    return STFS_GPU_OK;
  });
}

int stfs_gpu_source_find(const stfs_gpu_source* source, const char* name, size_t name_len, size_t* index) {
  return Guard([&]() -> int {
    if (source == nullptr || index == nullptr || (name == nullptr && name_len > 0)) {
      return Fail(STFS_GPU_INVALID_ARGUMENT, "null argument");
    }
    std::string_view key(name == nullptr ? "" : name, name_len);
    auto t = source->source->Get(key);
    if (!t.ok()) return Report(t.status());
    *index = static_cast<size_t>(*t - source->source->tensors().data());
    return STFS_GPU_OK;
  });
}

int stfs_gpu_slice_shape(const stfs_gpu_source* source, size_t index, const char* slice, uint64_t* out_shape,
                         uint32_t max_dims, uint32_t* out_ndim, uint64_t* out_bytes) {
  return Guard([&]() -> int {
    if (int rc = CheckTensor(source, index); rc != STFS_GPU_OK) return rc;
    auto plan = stfs::gpu::PlanTensorSlice(*source->source, source->source->tensors()[index].name, SliceText(slice));
    if (!plan.ok()) return Report(plan.status());
    if (out_shape != nullptr) {
      for (uint32_t i = 0; i < max_dims && i < plan->result_shape.size(); ++i) out_shape[i] = plan->result_shape[i];
    }
    if (out_ndim != nullptr) *out_ndim = static_cast<uint32_t>(plan->result_shape.size());
    if (out_bytes != nullptr) *out_bytes = plan->result_bytes;
    return STFS_GPU_OK;
  });
}

int stfs_gpu_loader_create(const stfs_gpu_options* options, stfs_gpu_loader** out) {
  return Guard([&]() -> int {
    if (out == nullptr) return Fail(STFS_GPU_INVALID_ARGUMENT, "null argument");
    *out = nullptr;
    std::string reason;
    if (stfs::gpu::CudaDeviceCount(&reason) == 0) return Fail(STFS_GPU_NO_DEVICE, "no CUDA device (" + reason + ")");
    auto loader = stfs::gpu::NewCudaLoader(ToLoaderOptions(options));
    if (!loader.ok()) return Report(loader.status());
    *out = new stfs_gpu_loader{std::move(*loader)};
    return STFS_GPU_OK;
  });
}

int stfs_gpu_loader_create_host(const stfs_gpu_options* options, stfs_gpu_loader** out) {
  return Guard([&]() -> int {
    if (out == nullptr) return Fail(STFS_GPU_INVALID_ARGUMENT, "null argument");
    *out = nullptr;
    auto loader = stfs::gpu::NewHostLoader(ToLoaderOptions(options));
    if (!loader.ok()) return Report(loader.status());
    *out = new stfs_gpu_loader{std::move(*loader)};
    return STFS_GPU_OK;
  });
}

void stfs_gpu_loader_destroy(stfs_gpu_loader* loader) {
  Guard([&]() -> int {
    delete loader;
    return STFS_GPU_OK;
  });
}

int stfs_gpu_load(stfs_gpu_loader* loader, const stfs_gpu_source* source, size_t index, const char* slice,
                  void* dst, uint64_t capacity, void* stream, uint64_t* out_bytes) {
  return Guard([&]() -> int {
    if (loader == nullptr) return Fail(STFS_GPU_INVALID_ARGUMENT, "null loader");
    if (int rc = CheckTensor(source, index); rc != STFS_GPU_OK) return rc;
    const std::string& name = source->source->tensors()[index].name;
    auto plan = stfs::gpu::PlanTensorSlice(*source->source, name, SliceText(slice));
    if (!plan.ok()) return Report(plan.status());
    Status s = loader->loader->LoadInto(*source->source, name, SliceText(slice), dst,
                                        static_cast<size_t>(capacity), stream);
    if (!s.ok()) return Report(s);
    if (out_bytes != nullptr) *out_bytes = plan->result_bytes;
    return STFS_GPU_OK;
  });
}

int stfs_gpu_load_alloc(stfs_gpu_loader* loader, const stfs_gpu_source* source, size_t index, const char* slice,
                        void* stream, void** out_data, uint64_t* out_bytes) {
  return Guard([&]() -> int {
    if (loader == nullptr || out_data == nullptr) return Fail(STFS_GPU_INVALID_ARGUMENT, "null argument");
    *out_data = nullptr;
    if (int rc = CheckTensor(source, index); rc != STFS_GPU_OK) return rc;
    auto batch = loader->loader->Load(*source->source, source->source->tensors()[index].name, SliceText(slice), stream);
    if (!batch.ok()) return Report(batch.status());
    if (out_bytes != nullptr) *out_bytes = batch->tensors[0].bytes;
    *out_data = batch->buffer.Release();
    return STFS_GPU_OK;
  });
}

int stfs_gpu_free(stfs_gpu_loader* loader, void* data) {
  return Guard([&]() -> int {
    if (loader == nullptr) return Fail(STFS_GPU_INVALID_ARGUMENT, "null loader");
    loader->loader->Free(data);
    return STFS_GPU_OK;
  });
}

int stfs_gpu_load_batch(stfs_gpu_loader* loader, const stfs_gpu_source* source, const stfs_gpu_request* requests,
                        size_t count, void* stream) {
  return Guard([&]() -> int {
    if (loader == nullptr || source == nullptr || (requests == nullptr && count > 0)) {
      return Fail(STFS_GPU_INVALID_ARGUMENT, "null argument");
    }
    std::vector<stfs::gpu::LoadRequest> loads;
    loads.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const stfs_gpu_request& r = requests[i];
      if (int rc = CheckTensor(source, r.tensor_index); rc != STFS_GPU_OK) return rc;
      auto items = stfs::ParseSliceSpec(SliceText(r.slice));
      if (!items.ok()) {
        return Report(items.status().WithContext("request " + std::to_string(i) + ": slice \"" +
                                                 std::string(SliceText(r.slice)).substr(0, 200) + "\""));
      }
      loads.push_back({source->source->tensors()[r.tensor_index].name, std::move(*items), r.dst,
                       static_cast<size_t>(r.capacity)});
    }
    return Report(loader->loader->LoadBatchInto(*source->source, loads, stream));
  });
}

int stfs_gpu_last_stats(const stfs_gpu_loader* loader, stfs_gpu_stats* out) {
  return Guard([&]() -> int {
    if (loader == nullptr || out == nullptr) return Fail(STFS_GPU_INVALID_ARGUMENT, "null argument");
    const stfs::gpu::LoadStats s = loader->loader->last_stats();
    *out = stfs_gpu_stats{s.fills, s.reads, s.bytes_read, s.copies, s.copies_2d, s.bytes_copied};
    return STFS_GPU_OK;
  });
}

int stfs_gpu_copy_to_host(stfs_gpu_loader* loader, const void* src, uint64_t bytes, void* dst) {
  return Guard([&]() -> int {
    if (loader == nullptr || ((src == nullptr || dst == nullptr) && bytes > 0)) {
      return Fail(STFS_GPU_INVALID_ARGUMENT, "null argument");
    }
    return Report(loader->loader->engine().CopyToHost(src, static_cast<size_t>(bytes), dst));
  });
}

}  // extern "C"
