// Tests of the C ABI (stfs_gpu.h) as a C caller sees it: codes, messages,
// listing, loads through the host loader, and the no-device path.
#include "core/cuda/stfs_gpu.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/cuda/reference_slice.h"
#include "tests/test_files.h"

namespace {

using stfs::DType;
using stfs::testing::BuildSafetensors;
using stfs::testing::TempDir;
using stfs::testing::TestTensor;

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tensors_ = {{"emb", DType::BF16, {40, 24}, ""}, {std::string("n\0ul", 4), DType::F32, {5}, ""}};
    path_ = dir_.Write("m.safetensors", BuildSafetensors(tensors_));
    ASSERT_EQ(stfs_gpu_source_open(path_.c_str(), &source_), STFS_GPU_OK) << stfs_gpu_last_error();
    stfs_gpu_options options;
    stfs_gpu_options_init(&options);
    options.staging_buffer_bytes = 512;
    options.staging_buffer_count = 2;
    ASSERT_EQ(stfs_gpu_loader_create_host(&options, &loader_), STFS_GPU_OK) << stfs_gpu_last_error();
  }
  void TearDown() override {
    stfs_gpu_loader_destroy(loader_);
    stfs_gpu_source_close(source_);
  }

  TempDir dir_;
  std::vector<TestTensor> tensors_;
  std::string path_;
  stfs_gpu_source* source_ = nullptr;
  stfs_gpu_loader* loader_ = nullptr;
};

TEST_F(CApiTest, ListsTensors) {
  size_t count = 0;
  ASSERT_EQ(stfs_gpu_source_tensor_count(source_, &count), STFS_GPU_OK);
  ASSERT_EQ(count, 2u);
  stfs_gpu_tensor_info info;
  ASSERT_EQ(stfs_gpu_source_tensor(source_, 0, &info), STFS_GPU_OK);
  EXPECT_EQ(std::string(info.name, info.name_len), "emb");
  EXPECT_STREQ(info.dtype, "BF16");
  ASSERT_EQ(info.ndim, 2u);
  EXPECT_EQ(info.shape[0], 40u);
  EXPECT_EQ(info.shape[1], 24u);
  EXPECT_EQ(info.byte_size, 40u * 24u * 2u);
  size_t index = 99;
  ASSERT_EQ(stfs_gpu_source_find(source_, "n\0ul", 4, &index), STFS_GPU_OK) << stfs_gpu_last_error();
  EXPECT_EQ(index, 1u);
  EXPECT_EQ(stfs_gpu_source_find(source_, "n", 1, &index), STFS_GPU_NOT_FOUND);
  EXPECT_NE(std::string(stfs_gpu_last_error()).find("\"n\""), std::string::npos) << stfs_gpu_last_error();
  EXPECT_EQ(stfs_gpu_source_tensor(source_, 2, &info), STFS_GPU_OUT_OF_RANGE);
}

TEST_F(CApiTest, LoadsSlicesIntoCallerAndLibraryMemory) {
  uint64_t shape[4] = {0};
  uint32_t ndim = 0;
  uint64_t bytes = 0;
  ASSERT_EQ(stfs_gpu_slice_shape(source_, 0, "::3, 8:16", shape, 4, &ndim, &bytes), STFS_GPU_OK);
  ASSERT_EQ(ndim, 2u);
  EXPECT_EQ(shape[0], 14u);
  EXPECT_EQ(shape[1], 8u);
  ASSERT_EQ(bytes, 14u * 8u * 2u);

  auto want = stfs::gpu::testing::ReferenceSliceOf(
      DType::BF16, {40, 24}, tensors_[0].bytes,
      {stfs::SliceItem::Range(std::nullopt, std::nullopt, 3), stfs::SliceItem::Range(8, 16)});
  ASSERT_TRUE(want.has_value());
  std::string got(bytes, '\0');
  uint64_t written = 0;
  ASSERT_EQ(stfs_gpu_load(loader_, source_, 0, "::3, 8:16", got.data(), got.size(), nullptr, &written),
            STFS_GPU_OK)
      << stfs_gpu_last_error();
  EXPECT_EQ(written, bytes);
  EXPECT_EQ(got, want->bytes);

  void* data = nullptr;
  ASSERT_EQ(stfs_gpu_load_alloc(loader_, source_, 1, nullptr, nullptr, &data, &written), STFS_GPU_OK);
  ASSERT_EQ(written, 20u);
  std::string whole(20, '\0');
  ASSERT_EQ(stfs_gpu_copy_to_host(loader_, data, 20, whole.data()), STFS_GPU_OK);
  EXPECT_EQ(whole, tensors_[1].bytes);
  EXPECT_EQ(stfs_gpu_free(loader_, data), STFS_GPU_OK);

  stfs_gpu_stats stats;
  ASSERT_EQ(stfs_gpu_last_stats(loader_, &stats), STFS_GPU_OK);
  EXPECT_EQ(stats.bytes_copied, 20u);
}

TEST_F(CApiTest, LoadsABatch) {
  std::string a(40 * 12 * 2, '\0'), b(20, '\0');
  stfs_gpu_request requests[2] = {{1, "", b.data(), b.size()}, {0, ":, 12:", a.data(), a.size()}};
  ASSERT_EQ(stfs_gpu_load_batch(loader_, source_, requests, 2, nullptr), STFS_GPU_OK) << stfs_gpu_last_error();
  EXPECT_EQ(b, tensors_[1].bytes);
  for (int r = 0; r < 40; ++r) ASSERT_EQ(a.substr(r * 24, 24), tensors_[0].bytes.substr(r * 48 + 24, 24));
  requests[1].slice = "1:2:0";
  EXPECT_EQ(stfs_gpu_load_batch(loader_, source_, requests, 2, nullptr), STFS_GPU_INVALID_ARGUMENT);
  EXPECT_NE(std::string(stfs_gpu_last_error()).find("step"), std::string::npos) << stfs_gpu_last_error();
}

TEST_F(CApiTest, DefaultsBindToTheCurrentDeviceAndBatchesAreChecked) {
  stfs_gpu_options options;
  stfs_gpu_options_init(&options);
  EXPECT_EQ(options.device, -1) << "a loader binds to the caller's current device by default";
  // Overlapping destinations and a stream for the host loader are refused.
  std::string a(40 * 24 * 2, '\x11');
  stfs_gpu_request overlap[2] = {{0, "", a.data(), a.size()}, {1, "", a.data() + 100, 20}};
  EXPECT_EQ(stfs_gpu_load_batch(loader_, source_, overlap, 2, nullptr), STFS_GPU_INVALID_ARGUMENT);
  EXPECT_NE(std::string(stfs_gpu_last_error()).find("overlap"), std::string::npos) << stfs_gpu_last_error();
  EXPECT_NE(std::string(stfs_gpu_last_error()).find("\"n\\x00ul\""), std::string::npos)
      << "a NUL in a name is escaped, not the end of the message: " << stfs_gpu_last_error();
  EXPECT_EQ(a, std::string(40 * 24 * 2, '\x11')) << "a refused batch writes nothing";
  int not_a_stream = 0;
  EXPECT_EQ(stfs_gpu_load(loader_, source_, 0, "", a.data(), a.size(), &not_a_stream, nullptr),
            STFS_GPU_INVALID_ARGUMENT);
}

TEST_F(CApiTest, ErrorsCarryCodesAndMessages) {
  std::string buf(10, '\0');
  EXPECT_EQ(stfs_gpu_load(loader_, source_, 0, "", buf.data(), buf.size(), nullptr, nullptr),
            STFS_GPU_INVALID_ARGUMENT);
  EXPECT_NE(std::string(stfs_gpu_last_error()).find("emb"), std::string::npos) << stfs_gpu_last_error();
  EXPECT_EQ(stfs_gpu_load(loader_, source_, 0, "40", buf.data(), buf.size(), nullptr, nullptr),
            STFS_GPU_INVALID_ARGUMENT);
  EXPECT_EQ(stfs_gpu_load(loader_, source_, 0, "1,,2", buf.data(), buf.size(), nullptr, nullptr),
            STFS_GPU_INVALID_ARGUMENT);
  EXPECT_EQ(stfs_gpu_load(nullptr, source_, 0, "", buf.data(), buf.size(), nullptr, nullptr),
            STFS_GPU_INVALID_ARGUMENT);
  EXPECT_EQ(stfs_gpu_load(loader_, nullptr, 0, "", buf.data(), buf.size(), nullptr, nullptr),
            STFS_GPU_INVALID_ARGUMENT);
  stfs_gpu_source* missing = reinterpret_cast<stfs_gpu_source*>(0x1);
  EXPECT_EQ(stfs_gpu_source_open((dir_.path() + "/absent").c_str(), &missing), STFS_GPU_NOT_FOUND);
  EXPECT_EQ(missing, nullptr);
  EXPECT_NE(std::string(stfs_gpu_last_error()).find("absent"), std::string::npos);
  EXPECT_EQ(stfs_gpu_source_open(nullptr, &missing), STFS_GPU_INVALID_ARGUMENT);
  EXPECT_STREQ(stfs_gpu_code_name(STFS_GPU_NO_DEVICE), "NO_DEVICE");
  EXPECT_STREQ(stfs_gpu_code_name(12345), "UNKNOWN");
  EXPECT_EQ(stfs_gpu_abi_version(), STFS_GPU_ABI_VERSION);
  stfs_gpu_source_close(nullptr);
  stfs_gpu_loader_destroy(nullptr);
}

TEST(CApiDevice, NoDeviceIsAClearErrorElseALoader) {
  stfs_gpu_loader* loader = reinterpret_cast<stfs_gpu_loader*>(0x1);
  const int devices = stfs_gpu_device_count();
  const int rc = stfs_gpu_loader_create(nullptr, &loader);
  if (devices == 0) {
    EXPECT_EQ(rc, STFS_GPU_NO_DEVICE);
    EXPECT_EQ(loader, nullptr);
    EXPECT_EQ(std::string(stfs_gpu_last_error()).rfind("no CUDA device", 0), 0u) << stfs_gpu_last_error();
  } else {
    ASSERT_EQ(rc, STFS_GPU_OK) << stfs_gpu_last_error();
    ASSERT_NE(loader, nullptr);
    stfs_gpu_loader_destroy(loader);
  }
}

}  // namespace
