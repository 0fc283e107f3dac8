// Tests of the CUDA loader. Without a GPU, only the no-device path runs and
// the rest skip with a message (fail under STFS_GPU_REQUIRE_DEVICE=1); on a
// GPU (scripts/gpu-check.sh) device bytes are copied back and compared with
// the reference slice of the file bytes.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

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

TEST(CudaLoader, NoDeviceIsUnavailableWithAClearMessage) {
  std::string reason;
  if (CudaDeviceCount(&reason) > 0) {
    EXPECT_TRUE(NewCudaLoader(LoaderOptions{}).ok()) << "a device is present, so a loader must be made";
    return;
  }
  EXPECT_FALSE(testing::DeviceRequired()) << "STFS_GPU_REQUIRE_DEVICE=1 but no device: " << reason;
  EXPECT_FALSE(reason.empty());
  auto loader = NewCudaLoader(LoaderOptions{});
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(loader.status().message().rfind("no CUDA device", 0), 0u) << loader.status().message();
}

TEST(CudaLoader, RejectsAMissingDeviceOrdinal) {
  REQUIRE_GPU();
  LoaderOptions o;
  o.device = 1000;
  EXPECT_EQ(NewCudaLoader(o).status().code(), StatusCode::kInvalidArgument);
}

// Loads `items` of `t` to the device with `options` and compares.
void ExpectDeviceSliceMatches(const LoaderOptions& options, const TensorSource& source, const TestTensor& t,
                              const std::vector<SliceItem>& items, cudaStream_t stream) {
  auto made = NewCudaLoader(options);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  Loader& loader = **made;
  auto want = ReferenceSliceOf(t.dtype, t.shape, t.bytes, items);
  ASSERT_TRUE(want.has_value());
  auto batch = loader.Load(source, t.name, items, stream);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::string got(want->bytes.size(), '\0');
  ASSERT_TRUE(loader.engine().CopyToHost(batch->tensors[0].data, got.size(), got.data()).ok());
  EXPECT_EQ(got, want->bytes);
}

TEST(CudaLoader, WholeTensorsRowAndColumnShardsMatchTheFile) {
  REQUIRE_GPU();
  TempDir dir;
  std::vector<TestTensor> tensors = {{"w", DType::BF16, {1000, 768}, ""}, {"odd", DType::U8, {333, 77}, ""}};
  auto source = TensorSource::Open(dir.Write("m.safetensors", BuildSafetensors(tensors)));
  ASSERT_TRUE(source.ok());
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (uint64_t gather : {uint64_t{0}, uint64_t{4096}}) {
    for (uint64_t gap : {uint64_t{0}, uint64_t{1} << 20}) {
      LoaderOptions o;
      o.staging_buffer_bytes = 64 << 10;  // well below each tensor
      o.staging_buffer_count = 4;
      o.max_read_gap_bytes = gap;
      o.gather_kernel_max_width = gather;
      for (const TestTensor& t : tensors) {
        ExpectDeviceSliceMatches(o, **source, t, {}, stream);
        for (int rank = 0; rank < 8; ++rank) {
          ExpectDeviceSliceMatches(o, **source, t, *ShardSlice(t.shape, 0, rank, 8), stream);
          ExpectDeviceSliceMatches(o, **source, t, *ShardSlice(t.shape, -1, rank, 8), stream);
        }
        ExpectDeviceSliceMatches(o, **source, t, {SliceItem::Range(1, std::nullopt, 3), SliceItem::Range(2, 9, 2)},
                                 stream);
      }
    }
  }
  cudaStreamDestroy(stream);
}

TEST(CudaLoader, LoadAllIntoOneAllocation) {
  REQUIRE_GPU();
  TempDir dir;
  std::vector<TestTensor> tensors;
  for (int i = 0; i < 30; ++i) tensors.push_back({"t" + std::to_string(i), DType::F16, {17, 3 + uint64_t(i)}, ""});
  auto source = TensorSource::Open(dir.Write("m.safetensors", BuildSafetensors(tensors)));
  ASSERT_TRUE(source.ok());
  LoaderOptions o;
  o.synchronize = true;
  o.staging_buffer_bytes = 4096;
  auto loader = NewCudaLoader(o);
  ASSERT_TRUE(loader.ok());
  auto all = (*loader)->LoadAll(**source);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string got(all->tensors[i].bytes, '\0');
    ASSERT_TRUE((*loader)->engine().CopyToHost(all->tensors[i].data, got.size(), got.data()).ok());
    EXPECT_EQ(got, tensors[i].bytes) << tensors[i].name;
  }
}

TEST(CudaLoader, OutOfDeviceMemoryIsResourceExhausted) {
  REQUIRE_GPU();
  auto loader = NewCudaLoader(LoaderOptions{});
  ASSERT_TRUE(loader.ok());
  auto huge = (*loader)->Allocate(size_t{1} << 52);
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted) << huge.status().ToString();
  // The loader still works afterwards.
  auto small = (*loader)->Allocate(1024);
  EXPECT_TRUE(small.ok()) << small.status().ToString();
}

TEST(CudaLoader, LoadersReleaseTheirPinnedMemoryAndStreams) {
  REQUIRE_GPU();
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  for (int i = 0; i < 20; ++i) {
    LoaderOptions o;
    o.staging_buffer_bytes = 32 << 20;
    auto loader = NewCudaLoader(o);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    auto buf = (*loader)->Allocate(64 << 20);
    ASSERT_TRUE(buf.ok());
  }
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_LT(free_before - std::min(free_before, free_after), size_t{64} << 20) << "device memory leaked";
}

}  // namespace
}  // namespace stfs::gpu
