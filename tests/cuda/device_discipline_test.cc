// Device discipline on a real GPU: a loader is bound to one device, leaves
// the caller's current device as it found it, orders its copies on the
// caller's (non-default) stream, refuses streams of other devices and
// destinations that are host memory, another device's memory or too small
// an allocation -- writing nothing and leaving the CUDA context healthy --
// and loads many destinations in one batch and every dtype byte-exact.
// Skips without a device (fails under STFS_GPU_REQUIRE_DEVICE=1); the
// two-device cases check what one device allows when there is only one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/loader.h"
#include "tests/cuda/device_test_util.h"
#include "tests/cuda/reference_slice.h"
#include "tests/test_files.h"

namespace stfs::gpu {
namespace {

using stfs::testing::BuildSafetensors;
using stfs::testing::TempDir;
using stfs::testing::TestTensor;
using testing::ReferenceSliceOf;

int Devices() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

int CurrentDevice() {
  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  return d;
}

std::string DeviceBytes(const void* p, size_t n) {
  std::string out(n, '\0');
  EXPECT_EQ(cudaMemcpy(out.data(), p, n, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

class DeviceDiscipline : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    tensors_ = {{"w", DType::BF16, {256, 384}, ""}, {"b", DType::F32, {384}, ""}};
    auto source = TensorSource::Open(dir_.Write("m.safetensors", BuildSafetensors(tensors_)));
    ASSERT_TRUE(source.ok());
    source_ = std::move(*source);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }
  void TearDown() override {
    if (Devices() == 0) return;  // skipped (or failed) for want of a device
    // Whatever a test did, the context must still work.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
  std::unique_ptr<Loader> MakeLoader(int device, bool synchronize = false) {
    LoaderOptions o;
    o.device = device;
    o.synchronize = synchronize;
    o.staging_buffer_bytes = 64 << 10;
    o.staging_buffer_count = 4;
    auto loader = NewCudaLoader(o);
    EXPECT_TRUE(loader.ok()) << loader.status().ToString();
    return loader.ok() ? std::move(*loader) : nullptr;
  }

  TempDir dir_;
  std::vector<TestTensor> tensors_;
  std::unique_ptr<TensorSource> source_;
};

TEST_F(DeviceDiscipline, TheCallersCurrentDeviceIsRestored) {
  const int last = Devices() - 1;
  ASSERT_EQ(cudaSetDevice(last), cudaSuccess);
  {
    auto loader = MakeLoader(0);  // another device when there are two
    ASSERT_NE(loader, nullptr);
    EXPECT_EQ(CurrentDevice(), last) << "creating a loader changed the current device";
    auto batch = loader->Load(*source_, "w", ":, 0:100");
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    EXPECT_EQ(CurrentDevice(), last) << "a load changed the current device";
    cudaPointerAttributes attr{};
    ASSERT_EQ(cudaPointerGetAttributes(&attr, batch->tensors[0].data), cudaSuccess);
    EXPECT_EQ(attr.device, 0) << "the loader's memory must be on its own device";
  }
  EXPECT_EQ(CurrentDevice(), last) << "destroying a loader changed the current device";
}

TEST_F(DeviceDiscipline, ALoaderDefaultsToTheCurrentDevice) {
  const int last = Devices() - 1;
  ASSERT_EQ(cudaSetDevice(last), cudaSuccess);
  auto loader = MakeLoader(-1);
  ASSERT_NE(loader, nullptr);
  EXPECT_EQ(loader->options().device, last);
  auto buffer = loader->Allocate(4096);
  ASSERT_TRUE(buffer.ok());
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, buffer->data()), cudaSuccess);
  EXPECT_EQ(attr.device, last);
}

TEST_F(DeviceDiscipline, TwoLoadersOnTwoDevices) {
  if (Devices() < 2) {
    std::printf("one device: two loaders on device 0 instead of one per device\n");
  }
  const int second = Devices() >= 2 ? 1 : 0;
  auto a = MakeLoader(0);
  auto b = MakeLoader(second);
  ASSERT_TRUE(a && b);
  auto wa = a->Load(*source_, "w", "0:128");
  auto wb = b->Load(*source_, "w", "128:256");
  ASSERT_TRUE(wa.ok() && wb.ok());
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(second), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::string& w = tensors_[0].bytes;
  EXPECT_EQ(DeviceBytes(wa->tensors[0].data, w.size() / 2), w.substr(0, w.size() / 2));
  EXPECT_EQ(DeviceBytes(wb->tensors[0].data, w.size() / 2), w.substr(w.size() / 2));
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, wb->tensors[0].data), cudaSuccess);
  EXPECT_EQ(attr.device, second);
}

TEST_F(DeviceDiscipline, LoadsAreOrderedOnANonDefaultStream) {
  auto loader = MakeLoader(0);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const size_t n = tensors_[0].bytes.size();
  void* dst = nullptr;
  ASSERT_EQ(cudaMalloc(&dst, n), cudaSuccess);
  for (int round = 0; round < 5; ++round) {
    // Queued before the load on the same stream: the load must land after.
    ASSERT_EQ(cudaMemsetAsync(dst, 0x3c, n, stream), cudaSuccess);
    ASSERT_TRUE(loader->LoadInto(*source_, "w", "", dst, n, stream).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(DeviceBytes(dst, n), tensors_[0].bytes) << "round " << round;
  }
  cudaFree(dst);
  cudaStreamDestroy(stream);
}

TEST_F(DeviceDiscipline, AStreamOfAnotherDeviceIsRefused) {
  if (Devices() < 2) {
    std::printf("one device: no stream of another device to refuse; checking a destroyed-handle-free path\n");
    auto loader = MakeLoader(0);
    EXPECT_TRUE(loader->Load(*source_, "b", "", cudaStreamPerThread).ok());
    return;
  }
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t other;
  ASSERT_EQ(cudaStreamCreate(&other), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  auto loader = MakeLoader(0);
  void* dst = nullptr;
  ASSERT_EQ(cudaMalloc(&dst, 4096), cudaSuccess);
  ASSERT_EQ(cudaMemset(dst, 0x11, 4096), cudaSuccess);
  Status s = loader->LoadInto(*source_, "b", "", dst, 4096, other);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("stream belongs to cuda:1"), std::string::npos) << s.message();
  EXPECT_EQ(DeviceBytes(dst, 4096), std::string(4096, '\x11')) << "a refused load wrote bytes";
  cudaFree(dst);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStreamDestroy(other);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST_F(DeviceDiscipline, HostAndWrongDeviceDestinationsAreRefused) {
  auto loader = MakeLoader(0, /*synchronize=*/true);
  const size_t n = tensors_[1].bytes.size();
  std::string plain(n, '\x22');
  Status s = loader->LoadInto(*source_, "b", "", plain.data(), n);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("host memory"), std::string::npos) << s.message();
  EXPECT_EQ(plain, std::string(n, '\x22'));

  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, n), cudaSuccess);
  std::memset(pinned, 0x33, n);
  s = loader->LoadInto(*source_, "b", "", pinned, n);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("pinned host memory"), std::string::npos) << s.message();
  EXPECT_EQ(std::string(static_cast<char*>(pinned), n), std::string(n, '\x33'));
  cudaFreeHost(pinned);

  // A result that would run past the end of its allocation, though the
  // stated capacity holds it (2 MiB: the driver's allocation granularity,
  // so the reported extent is exactly what was asked for).
  char* block = nullptr;
  const size_t block_bytes = size_t{2} << 20;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&block), block_bytes), cudaSuccess);
  s = loader->LoadInto(*source_, "b", "", block + block_bytes - n / 2, n);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("allocation"), std::string::npos) << s.message();
  ASSERT_TRUE(loader->LoadInto(*source_, "b", "", block + block_bytes - n, n).ok());
  EXPECT_EQ(DeviceBytes(block + block_bytes - n, n), tensors_[1].bytes);
  cudaFree(block);

  // Managed memory is accepted.
  void* managed = nullptr;
  ASSERT_EQ(cudaMallocManaged(&managed, n), cudaSuccess);
  ASSERT_TRUE(loader->LoadInto(*source_, "b", "", managed, n).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(std::string(static_cast<char*>(managed), n), tensors_[1].bytes);
  cudaFree(managed);

  if (Devices() >= 2) {
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    void* other = nullptr;
    ASSERT_EQ(cudaMalloc(&other, n), cudaSuccess);
    ASSERT_EQ(cudaMemset(other, 0x44, n), cudaSuccess);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    s = loader->LoadInto(*source_, "b", "", other, n);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("device memory of cuda:1"), std::string::npos) << s.message();
    EXPECT_EQ(DeviceBytes(other, n), std::string(n, '\x44'));
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    cudaFree(other);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  } else {
    std::printf("one device: no other device's memory to refuse\n");
  }
}

TEST_F(DeviceDiscipline, ManyDestinationsInOneBatch) {
  // 48 tensors; each rank-3 column shard and row shard goes to its own
  // allocation or to adjacent / interleaved places in one arena.
  TempDir dir;
  std::vector<TestTensor> tensors;
  for (int i = 0; i < 48; ++i) {
    tensors.push_back({"t" + std::to_string(i), i % 2 ? DType::BF16 : DType::F32, {40, 24 + uint64_t(i)}, ""});
  }
  auto source = TensorSource::Open(dir.Write("many.safetensors", BuildSafetensors(tensors)));
  ASSERT_TRUE(source.ok());
  std::vector<std::string> want;
  std::vector<LoadRequest> requests;
  for (const TestTensor& t : tensors) {
    auto items = *ShardSlice(t.shape, t.name.back() % 2 ? 0 : -1, 3, 8);
    want.push_back(ReferenceSliceOf(t.dtype, t.shape, t.bytes, items)->bytes);
    requests.push_back({t.name, items, nullptr, want.back().size()});
  }
  size_t arena_bytes = 0;
  for (const std::string& w : want) arena_bytes += w.size();
  char* arena = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&arena), arena_bytes), cudaSuccess);
  std::vector<void*> own;
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  size_t cursor = 0;
  for (size_t k : order) {
    if (k % 3 == 0) {
      void* p = nullptr;
      ASSERT_EQ(cudaMalloc(&p, want[k].size()), cudaSuccess);
      own.push_back(p);
      requests[k].dst = p;
    } else {
      requests[k].dst = arena + cursor;  // packed, in shuffled order
      cursor += want[k].size();
    }
  }
  auto loader = MakeLoader(0, /*synchronize=*/true);
  LoaderOptions o;
  o.device = 0;
  o.synchronize = true;
  o.staging_buffer_bytes = 8 << 10;  // many fills, 2-D copies split across buffers
  auto small = NewCudaLoader(o);
  ASSERT_TRUE(small.ok());
  for (Loader* l : {loader.get(), small->get()}) {
    ASSERT_EQ(cudaMemset(arena, 0, arena_bytes), cudaSuccess);
    Status s = l->LoadBatchInto(**source, requests);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (size_t k = 0; k < requests.size(); ++k) {
      ASSERT_EQ(DeviceBytes(requests[k].dst, want[k].size()), want[k]) << tensors[k].name;
    }
  }
  for (void* p : own) cudaFree(p);
  cudaFree(arena);
}

TEST_F(DeviceDiscipline, EveryDtype) {
  TempDir dir;
  std::vector<TestTensor> tensors;
  for (DType d : AllDTypes()) {
    tensors.push_back({std::string(DTypeName(d)), d, {12, DTypeBits(d) % 8 ? uint64_t{16} : uint64_t{10}}, ""});
  }
  auto source = TensorSource::Open(dir.Write("dtypes.safetensors", BuildSafetensors(tensors)));
  ASSERT_TRUE(source.ok());
  auto loader = MakeLoader(0, /*synchronize=*/true);
  for (const TestTensor& t : tensors) {
    for (auto items : {std::vector<SliceItem>{}, *ShardSlice(t.shape, 0, 1, 4), *ShardSlice(t.shape, -1, 1, 2)}) {
      auto want = ReferenceSliceOf(t.dtype, t.shape, t.bytes, items);
      ASSERT_TRUE(want.has_value());
      auto batch = loader->Load(**source, t.name, items);
      ASSERT_TRUE(batch.ok()) << t.name << ": " << batch.status().ToString();
      EXPECT_EQ(DeviceBytes(batch->tensors[0].data, want->bytes.size()), want->bytes) << t.name;
    }
  }
}

}  // namespace
}  // namespace stfs::gpu
