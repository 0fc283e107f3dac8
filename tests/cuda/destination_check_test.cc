// The destination and stream rules of a loader bound to one device, as
// pure functions (what the CUDA engine decides from cudaPointerGetAttributes
// and cudaStreamGetDevice), and their wiring through the loader, with the
// host engine playing device 0: a refused destination or stream fails the
// whole batch before anything is read or written. Overlapping destinations
// are refused too.
#include "core/cuda/destination_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/cuda/loader.h"
#include "tests/test_files.h"

namespace stfs::gpu {
namespace {

using stfs::testing::BuildSafetensors;
using stfs::testing::TempDir;
using stfs::testing::TestTensor;

bool Mentions(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

TEST(DestinationCheck, DeviceMemoryOfTheLoadersDeviceOrManagedIsAccepted) {
  int x = 0;
  EXPECT_TRUE(CheckDestinationFacts(&x, 4, {PointerKind::kDevice, 1}, 1).ok());
  EXPECT_TRUE(CheckDestinationFacts(&x, 4, {PointerKind::kManaged, -1}, 0).ok());
  EXPECT_TRUE(CheckDestinationFacts(&x, 4, {PointerKind::kManaged, 3}, 0).ok());
}

TEST(DestinationCheck, HostMemoryAndOtherDevicesAreRefusedByName) {
  int x = 0;
  Status host = CheckDestinationFacts(&x, 4, {PointerKind::kUnregistered, -1}, 0);
  EXPECT_EQ(host.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(host, "host memory unknown to CUDA")) << host.message();
  EXPECT_TRUE(Mentions(host, "cuda:0")) << host.message();
  Status pinned = CheckDestinationFacts(&x, 4, {PointerKind::kHost, 0}, 0);
  EXPECT_EQ(pinned.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(pinned, "pinned host memory")) << pinned.message();
  Status other = CheckDestinationFacts(&x, 4, {PointerKind::kDevice, 1}, 0);
  EXPECT_EQ(other.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(other, "device memory of cuda:1")) << other.message();
  EXPECT_TRUE(Mentions(other, "bound to cuda:0")) << other.message();
}

TEST(DestinationCheck, TheAllocationMustHoldTheResult) {
  const uintptr_t base = 0x10000;
  PointerFacts facts{PointerKind::kDevice, 0, base, 1024};
  auto at = [](uintptr_t p) { return reinterpret_cast<const void*>(p); };
  EXPECT_TRUE(CheckDestinationFacts(at(base), 1024, facts, 0).ok());
  EXPECT_TRUE(CheckDestinationFacts(at(base + 1000), 24, facts, 0).ok());
  Status past = CheckDestinationFacts(at(base + 1000), 25, facts, 0);
  EXPECT_EQ(past.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(past, "1024-byte allocation")) << past.message();
  EXPECT_FALSE(CheckDestinationFacts(at(base - 1), 1, facts, 0).ok());
}

TEST(DestinationCheck, StreamsOfOtherDevicesAreRefused) {
  EXPECT_TRUE(CheckStreamDevice(2, 2).ok());
  Status s = CheckStreamDevice(1, 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(s, "stream belongs to cuda:1")) << s.message();
}

class LoaderChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    tensors_ = {{"a", DType::F32, {8, 8}, ""}, {"b", DType::F16, {4, 16}, ""}};
    auto source = TensorSource::Open(dir_.Write("m.safetensors", BuildSafetensors(tensors_)));
    ASSERT_TRUE(source.ok());
    source_ = std::move(*source);
  }
  // A host loader playing cuda:0, where `device_block` is device memory of
  // `block_device` and everything else is plain host memory.
  std::unique_ptr<Loader> Playing(int block_device, int stream_device = 0) {
    HostEngineOptions host;
    host.simulated_device = 0;
    host.stream_device = stream_device;
    const char* lo = block_.data();
    const char* hi = lo + block_.size();
    host.pointer_facts = [=](const void* p) {
      const char* c = static_cast<const char*>(p);
      if (c >= lo && c < hi) return PointerFacts{PointerKind::kDevice, block_device, 0, 0};
      return PointerFacts{PointerKind::kUnregistered, -1, 0, 0};
    };
    auto loader = NewHostLoader(LoaderOptions{}, host);
    EXPECT_TRUE(loader.ok());
    return std::move(*loader);
  }

  TempDir dir_;
  std::vector<TestTensor> tensors_;
  std::unique_ptr<TensorSource> source_;
  std::string block_ = std::string(1024, '\x77');
  std::string plain_ = std::string(256, '\x66');
};

TEST_F(LoaderChecks, ABatchWithOneBadDestinationWritesNothing) {
  auto loader = Playing(0);
  std::vector<LoadRequest> requests = {{"a", {}, block_.data(), 256}, {"b", {}, plain_.data(), 128}};
  Status s = loader->LoadBatchInto(*source_, requests);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(s, "host memory")) << s.message();
  EXPECT_TRUE(Mentions(s, "\"b\"")) << s.message();
  EXPECT_EQ(block_, std::string(1024, '\x77')) << "nothing may be written when any destination is refused";
  EXPECT_EQ(plain_, std::string(256, '\x66'));
  EXPECT_EQ(loader->last_stats().bytes_copied, 0u);
  // The good destination alone loads.
  ASSERT_TRUE(loader->LoadBatchInto(*source_, std::vector<LoadRequest>{requests[0]}).ok());
  EXPECT_EQ(block_.substr(0, 256), tensors_[0].bytes);
}

TEST_F(LoaderChecks, DeviceMemoryOfAnotherDeviceIsRefused) {
  auto loader = Playing(1);
  Status s = loader->LoadInto(*source_, "a", "", block_.data(), 256);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(s, "cuda:1")) << s.message();
  EXPECT_EQ(block_, std::string(1024, '\x77'));
}

TEST_F(LoaderChecks, AStreamOfAnotherDeviceIsRefused) {
  auto loader = Playing(0, /*stream_device=*/1);
  int fake_stream = 0;
  Status s = loader->LoadInto(*source_, "a", "", block_.data(), 256, &fake_stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(s, "stream belongs to cuda:1")) << s.message();
  EXPECT_EQ(block_, std::string(1024, '\x77'));
  EXPECT_TRUE(loader->LoadInto(*source_, "a", "", block_.data(), 256, nullptr).ok());
}

TEST_F(LoaderChecks, OverlappingDestinationsAreRefused) {
  auto loader = Playing(0);
  std::vector<LoadRequest> requests = {{"a", {}, block_.data(), 256}, {"b", {}, block_.data() + 255, 128}};
  Status s = loader->LoadBatchInto(*source_, requests);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(s, "overlap")) << s.message();
  EXPECT_EQ(block_, std::string(1024, '\x77'));
  requests[1].dst = block_.data() + 256;  // adjacent is fine
  ASSERT_TRUE(loader->LoadBatchInto(*source_, requests).ok());
  EXPECT_EQ(block_.substr(0, 256), tensors_[0].bytes);
  EXPECT_EQ(block_.substr(256, 128), tensors_[1].bytes);
}

TEST_F(LoaderChecks, ThePlainHostLoaderHasNoStreams) {
  auto loader = NewHostLoader(LoaderOptions{});
  ASSERT_TRUE(loader.ok());
  int fake_stream = 0;
  std::string out(256, '\0');
  EXPECT_EQ((*loader)->LoadInto(*source_, "a", "", out.data(), 256, &fake_stream).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stfs::gpu
