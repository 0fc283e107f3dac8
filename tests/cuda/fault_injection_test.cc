// Errors drain: a load that fails -- a read, a copy or a lane event failing,
// at every step of the load, or finishing failing -- returns only once none
// of its copies can still run. The host engine plays a CUDA stream here
// (asynchronous_finish: without `synchronize`, copies run on after the call),
// so a pipeline that returned without draining would be caught writing the
// caller's destination after the call reported failure. A probe also checks
// that no staging buffer is refilled while copies still read it, and the
// same loader then loads the same batch correctly; its teardown, where a
// fault may still hit, frees no staging buffer under a queued copy.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/byte_source.h"
#include "core/cuda/loader.h"
#include "tests/cuda/reference_slice.h"
#include "tests/test_files.h"

namespace stfs::gpu {
namespace {

using stfs::testing::BuildSafetensors;
using stfs::testing::TempDir;
using stfs::testing::TestTensor;
using testing::ReferenceSliceOf;

// A local file whose reads fail on demand and which reports a read into a
// staging buffer that copies still use.
class FaultySource final : public ByteSource {
 public:
  FaultySource(std::unique_ptr<ByteSource> inner, std::shared_ptr<HostEngineProbe> probe)
      : inner_(std::move(inner)), probe_(std::move(probe)) {}
  StatusOr<size_t> ReadAt(uint64_t offset, size_t length, char* dst) const override {
    if (armed_.load()) {
      if (probe_->StagingBusy(dst)) early_reuse_.fetch_add(1);
      if (reads_.fetch_add(1) == fail_at_.load()) return Status::IOError("injected read failure");
    }
    return inner_->ReadAt(offset, length, dst);
  }
  uint64_t Size() const override { return inner_->Size(); }
  const std::string& Describe() const override { return inner_->Describe(); }

  void Arm(int64_t fail_at) {
    reads_ = 0;
    fail_at_ = fail_at;
    armed_ = true;
  }
  int64_t early_reuse() const { return early_reuse_.load(); }

 private:
  std::unique_ptr<ByteSource> inner_;
  std::shared_ptr<HostEngineProbe> probe_;
  std::atomic<bool> armed_{false};
  std::atomic<int64_t> fail_at_{-1};
  mutable std::atomic<int64_t> reads_{0};
  mutable std::atomic<int64_t> early_reuse_{0};
};

enum class Fault { kRead, kCopy, kEvent, kFinish };

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kRead: return "read";
    case Fault::kCopy: return "copy";
    case Fault::kEvent: return "event";
    case Fault::kFinish: return "finish";
  }
  return "?";
}

class FaultInjection : public ::testing::TestWithParam<Fault> {};

TEST_P(FaultInjection, NothingIsWrittenAfterAFailedLoadReturns) {
  const Fault fault = GetParam();
  TempDir dir;
  std::vector<TestTensor> tensors;
  for (int i = 0; i < 6; ++i) tensors.push_back({"t" + std::to_string(i), DType::BF16, {24, 40}, ""});
  const std::string path = dir.Write("m.safetensors", BuildSafetensors(tensors));

  // The batch: whole tensors and column shards, into one host arena.
  struct Want {
    size_t offset;
    std::string bytes;
  };
  std::vector<LoadRequest> requests;
  std::vector<Want> want;
  size_t arena_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::vector<SliceItem> items;
    if (i % 2 == 1) items = *ShardSlice(tensors[i].shape, -1, static_cast<int>(i % 4), 4);
    auto ref = ReferenceSliceOf(tensors[i].dtype, tensors[i].shape, tensors[i].bytes, items);
    ASSERT_TRUE(ref.has_value());
    requests.push_back({tensors[i].name, items, nullptr, ref->bytes.size()});
    want.push_back({arena_bytes, ref->bytes});
    arena_bytes += ref->bytes.size();
  }

  int failures = 0;
  for (int64_t step = 0; step < 400; ++step) {
    auto probe = std::make_shared<HostEngineProbe>();
    auto inner = OpenLocalFile(path);
    ASSERT_TRUE(inner.ok());
    auto faulty = std::make_unique<FaultySource>(std::move(*inner), probe);
    FaultySource* faulty_ptr = faulty.get();
    auto source = TensorSource::FromSafetensors(std::move(faulty), "");
    ASSERT_TRUE(source.ok()) << source.status().ToString();

    HostEngineOptions host;
    host.copy_delay = std::chrono::microseconds(1500);
    host.asynchronous_finish = true;
    host.probe = probe;
    if (fault == Fault::kCopy) host.faults.fail_enqueue = step;
    if (fault == Fault::kEvent) host.faults.fail_wait = step;
    if (fault == Fault::kFinish) host.faults.fail_finish = step;
    LoaderOptions o;
    o.staging_buffer_bytes = 700;  // many fills per load
    o.staging_buffer_count = 3;
    o.reader_threads = 3;
    auto made = NewHostLoader(o, host);
    ASSERT_TRUE(made.ok());
    std::unique_ptr<Loader> loader = std::move(*made);

    std::string arena(arena_bytes, '\x5a');
    for (size_t k = 0; k < requests.size(); ++k) requests[k].dst = arena.data() + want[k].offset;
    faulty_ptr->Arm(fault == Fault::kRead ? step : -1);
    Status s = loader->LoadBatchInto(**source, requests);
    if (s.ok()) {
      // Past the last step of the load: no fault hit. Done once the load's
      // copies finish (destroying the loader waits for them).
      // A fault may still hit there: the loader's own teardown (an event
      // wait failing while it frees its staging buffers) must drain too.
      loader.reset();
      EXPECT_EQ(probe->freed_while_busy(), 0)
          << FaultName(fault) << " fault at step " << step << ": a staging buffer was freed under a copy";
      for (size_t k = 0; k < requests.size(); ++k) {
        ASSERT_EQ(arena.substr(want[k].offset, want[k].bytes.size()), want[k].bytes);
      }
      EXPECT_EQ(faulty_ptr->early_reuse(), 0);
      break;
    }
    ++failures;
    const int64_t batches_at_return = probe->batches_done();
    const std::string at_return = arena;
    std::this_thread::sleep_for(std::chrono::milliseconds(8));  // > 5 copy delays
    EXPECT_EQ(probe->batches_done(), batches_at_return)
        << FaultName(fault) << " fault at step " << step << ": copies ran after the call returned";
    EXPECT_TRUE(arena == at_return) << FaultName(fault) << " fault at step " << step
                                    << ": the destination changed after the call returned";
    EXPECT_EQ(faulty_ptr->early_reuse(), 0) << "a staging buffer was refilled while copies read it";
    EXPECT_NE(s.message().find("injected"), std::string::npos) << s.ToString();

    // The same loader loads the batch correctly afterwards.
    faulty_ptr->Arm(-1);
    std::string again(arena_bytes, '\0');
    for (size_t k = 0; k < requests.size(); ++k) requests[k].dst = again.data() + want[k].offset;
    Status retry = loader->LoadBatchInto(**source, requests);
    ASSERT_TRUE(retry.ok()) << FaultName(fault) << " step " << step << ": " << retry.ToString();
    loader.reset();
    EXPECT_EQ(probe->freed_while_busy(), 0) << FaultName(fault) << " step " << step;
    for (size_t k = 0; k < requests.size(); ++k) {
      ASSERT_EQ(again.substr(want[k].offset, want[k].bytes.size()), want[k].bytes);
    }
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(failures, 0) << "the fault was never hit";
  if (fault != Fault::kFinish) {
    EXPECT_GT(failures, 3) << "a load should have several steps";
  }
}

// A loader torn down while its copies still run, with every event wait
// failing: it must still free no staging buffer before those copies ran,
// and the destination must end up exact. (Before Pipeline's teardown
// drained, a failed wait let it free buffers under queued copies; the
// allocator's words were then copied into the destination.)
TEST(LoaderTeardown, DrainsEvenWhenEventWaitsFail) {
  TempDir dir;
  std::vector<TestTensor> tensors;
  for (int i = 0; i < 4; ++i) tensors.push_back({"t" + std::to_string(i), DType::F32, {64, 64}, ""});
  const std::string path = dir.Write("m.safetensors", BuildSafetensors(tensors));
  auto source = TensorSource::FromSafetensors(*OpenLocalFile(path), "");
  ASSERT_TRUE(source.ok()) << source.status().ToString();

  auto probe = std::make_shared<HostEngineProbe>();
  HostEngineOptions host;
  host.copy_delay = std::chrono::milliseconds(3);
  host.asynchronous_finish = true;  // copies run on after the call, as on a stream
  host.probe = probe;
  host.faults.waits_fail = std::make_shared<std::atomic<bool>>(false);
  LoaderOptions o;
  o.staging_buffer_bytes = 4096;
  o.staging_buffer_count = 3;
  o.reader_threads = 1;
  auto made = NewHostLoader(o, host);
  ASSERT_TRUE(made.ok());
  std::unique_ptr<Loader> loader = std::move(*made);

  std::string arena(tensors.size() * 64 * 64 * 4, '\x5a');
  std::vector<LoadRequest> requests;
  for (size_t i = 0; i < tensors.size(); ++i) {
    requests.push_back({tensors[i].name, {}, arena.data() + i * 64 * 64 * 4, 64 * 64 * 4});
  }
  ASSERT_TRUE(loader->LoadBatchInto(**source, requests).ok());
  const int64_t batches_at_return = probe->batches_done();
  host.faults.waits_fail->store(true);
  loader.reset();
  EXPECT_EQ(probe->freed_while_busy(), 0) << "staging buffers were freed under queued copies";
  EXPECT_LT(batches_at_return, probe->batches_done()) << "no copy was still queued: the test proves nothing";
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_TRUE(arena.substr(i * 64 * 64 * 4, 64 * 64 * 4) == tensors[i].bytes) << tensors[i].name;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryStep, FaultInjection,
                         ::testing::Values(Fault::kRead, Fault::kCopy, Fault::kEvent, Fault::kFinish),
                         [](const ::testing::TestParamInfo<Fault>& info) { return FaultName(info.param); });

}  // namespace
}  // namespace stfs::gpu
