// HttpRangeSource::ReadRuns over a real nginx (and the fault proxy): random
// run sets are byte-exact whatever the cache holds, requests run in
// parallel, a fault fails the read with a Status, Shutdown ends it, and rank
// parts read through ReadSliceRange fetch about their own bytes (a column
// part <= 1.1x, a contiguous one <= 1.1x plus a block) by bytes_fetched
// when requests cost nothing (request_cost=0); with the default cost a part
// of short runs is fetched in whole blocks (about a request per block, never
// past the part's end, and the node's next rank finds them cached) while a
// part of long runs stays exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <thread>

#include "core/header.h"
#include "core/slice_reader.h"
#include "core/tensor_parts.h"
#include "tests/remote/remote_test_util.h"

namespace stfs {
namespace {

using testing::FaultProxy;
using testing::FileWithTensorSizes;

constexpr uint64_t kMiB = 1 << 20;

nlohmann::json Stats(const ByteSource& source) { return nlohmann::json::parse(source.StatsJson()); }
uint64_t Fetched(const ByteSource& source) { return Stats(source)["bytes_fetched"].get<uint64_t>(); }
uint64_t Requests(const ByteSource& source) { return Stats(source)["requests"].get<uint64_t>(); }

// Random runs inside [0, size): short and long, close and far, sorted or not.
std::vector<std::pair<uint64_t, size_t>> RandomRuns(std::mt19937_64& rng, uint64_t size) {
  std::vector<std::pair<uint64_t, size_t>> runs;
  uint64_t at = rng() % (size / 2);
  const size_t count = 2 + rng() % 40;
  for (size_t i = 0; i < count && at < size; ++i) {
    const int kind = static_cast<int>(rng() % 4);
    const uint64_t longest[] = {64, 20000, 300000, 3 * kMiB};
    size_t length = 1 + rng() % longest[kind];
    length = static_cast<size_t>(std::min<uint64_t>(length, size - at));
    runs.emplace_back(at, length);
    const int gap_kind = static_cast<int>(rng() % 3);
    at += length + (gap_kind == 0 ? 0 : gap_kind == 1 ? rng() % 5000 : rng() % (2 * kMiB));
  }
  if (rng() % 4 == 0) std::shuffle(runs.begin(), runs.end(), rng);
  return runs;
}

// Reads `runs` with ReadRuns; returns "" or what differs from `file`.
std::string CheckRuns(const ByteSource& source, const std::string& file,
                      const std::vector<std::pair<uint64_t, size_t>>& runs, const ReadHint& hint = {}) {
  std::vector<std::string> bufs;
  std::vector<ByteRun> byte_runs;
  bufs.reserve(runs.size());
  for (const auto& [offset, length] : runs) {
    bufs.emplace_back(length, '\xAB');
    byte_runs.push_back(ByteRun{offset, length, bufs.back().data()});
  }
  Status status = source.ReadRuns(byte_runs, hint);
  if (!status.ok()) return status.ToString();
  for (size_t i = 0; i < runs.size(); ++i) {
    if (bufs[i] != file.substr(runs[i].first, runs[i].second)) {
      return "run " + std::to_string(i) + " (" + std::to_string(runs[i].second) + " bytes at " +
             std::to_string(runs[i].first) + ") differs";
    }
  }
  return "";
}

class RemoteRuns : public testing::NginxTest {
 protected:
  void SetUp() override {
    NginxTest::SetUp();
    if (HasFatalFailure()) return;
    file_ = FileWithTensorSizes({(9 << 20) + 5, 16 << 20, 3 << 20});
    root_.Write("f.safetensors", file_);
  }
  // Fetches exactly, whatever a request costs.
  static RemoteOptions ExactOptions() {
    RemoteOptions options = TestOptions();
    options.request_cost = 0;
    return options;
  }
  std::string file_;
};

TEST_F(RemoteRuns, RandomRunSetsAreByteExactWithAndWithoutCachedBlocks) {
  auto source = Open(nginx_->Url("/f.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 60; ++iter) {
    if (iter % 10 == 5) {
      // Put some blocks in the cache (and a read-ahead in flight) first.
      std::string buf(kMiB, '\0');
      const uint64_t at = rng() % (file_.size() - 8 * kMiB);
      for (uint64_t off = at; off < at + 8 * kMiB; off += kMiB) ASSERT_TRUE(source->ReadAt(off, kMiB, buf.data()).ok());
    }
    ASSERT_EQ(CheckRuns(*source, file_, RandomRuns(rng, file_.size())), "") << "iteration " << iter;
  }
  // Runs in the header, empty runs, and one run past the end (an error naming the source).
  ASSERT_EQ(CheckRuns(*source, file_, {{0, 8}, {8, 100}, {5000, 0}, {file_.size() - 10, 10}}), "");
  char byte;
  const ByteRun past{file_.size() - 1, 2, &byte};
  Status status = source->ReadRuns(std::span<const ByteRun>(&past, 1), ReadHint{});
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("f.safetensors"), std::string::npos) << status.ToString();
  nlohmann::json stats = Stats(*source);
  EXPECT_GT(stats["run_fetches"].get<uint64_t>(), 0u);
  EXPECT_EQ(stats["in_flight"].get<uint64_t>(), 0u);
}

TEST_F(RemoteRuns, RequestsOfOneReadRunInParallelUpToTheConnections) {
  RemoteOptions options = TestOptions();
  options.connections = 3;
  std::atomic<int> now{0}, most{0};
  std::atomic<bool> held{false};
  options.before_fetch_for_tests = [&](uint64_t, uint64_t) {
    const int n = ++now;
    int seen = most.load();
    while (n > seen && !most.compare_exchange_weak(seen, n)) {
    }
    // The first fetch waits (up to 10 s) until another one runs beside it:
    // with parallel requests that happens at once, without never.
    if (!held.exchange(true)) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (most.load() < 2 && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    --now;
  };
  auto source = Open(nginx_->Url("/f.safetensors"), options);
  ASSERT_NE(source, nullptr);
  std::vector<std::pair<uint64_t, size_t>> runs;  // 24 runs of 10 KiB, 1 MiB apart: 24 requests
  for (uint64_t i = 0; i < 24; ++i) runs.emplace_back(200000 + i * kMiB, 10240);
  ASSERT_EQ(CheckRuns(*source, file_, runs), "");
  EXPECT_EQ(Stats(*source)["run_fetches"].get<uint64_t>(), 24u);
  EXPECT_GE(most.load(), 2);
  EXPECT_LE(most.load(), 3);
}

TEST_F(RemoteRuns, ConcurrentReadersOfRunsAreByteExact) {
  auto source = Open(nginx_->Url("/f.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<std::thread> readers;
  std::vector<std::string> errors(6);
  for (int t = 0; t < 6; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      for (int iter = 0; iter < 15 && errors[t].empty(); ++iter) {
        if (t % 2 == 0) {
          errors[t] = CheckRuns(*source, file_, RandomRuns(rng, file_.size()));
        } else {
          errors[t] = testing::CheckRead(*source, file_, rng() % file_.size(), 1 + rng() % (2 * kMiB));
        }
      }
    });
  }
  for (std::thread& r : readers) r.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(Stats(*source)["in_flight"].get<uint64_t>(), 0u);
}

class RemoteRunFaults : public RemoteRuns {
 protected:
  void SetUp() override {
    RemoteRuns::SetUp();
    if (HasFatalFailure()) return;
    std::string error;
    proxy_ = FaultProxy::Start(nginx_->Url(""), &error);
    ASSERT_NE(proxy_, nullptr) << error;
  }
  std::unique_ptr<FaultProxy> proxy_;
};

std::vector<std::pair<uint64_t, size_t>> SpreadRuns() {
  std::vector<std::pair<uint64_t, size_t>> runs;
  for (uint64_t i = 0; i < 20; ++i) runs.emplace_back(300000 + i * 1300000, 9000);
  return runs;
}

TEST_F(RemoteRunFaults, AFaultAmongTheRequestsFailsTheReadAndTheSourceRecovers) {
  RemoteOptions options = TestOptions();
  options.retries = 0;
  auto source = Open(proxy_->Url("/f.safetensors"), options);
  ASSERT_NE(source, nullptr);
  for (const char* fault : {"fault=reset_mid&every=7", "fault=short_body&every=5", "fault=status&status=500&every=9",
                            "fault=wrong_range&every=6"}) {
    SCOPED_TRACE(fault);
    proxy_->Set(fault);
    const std::string result = CheckRuns(*source, file_, SpreadRuns());
    EXPECT_NE(result, "");
    EXPECT_EQ(result.find("differs"), std::string::npos) << result;  // an error, not wrong bytes
  }
  proxy_->Set("fault=none");
  EXPECT_EQ(CheckRuns(*source, file_, SpreadRuns()), "");
}

TEST_F(RemoteRunFaults, AFaultWhileFetchingWholeBlocksFailsTheReadAndTheSourceRecovers) {
  RemoteOptions options = TestOptions();  // the default request_cost: 1 KiB runs go in blocks
  options.retries = 0;
  auto source = Open(proxy_->Url("/f.safetensors"), options);
  ASSERT_NE(source, nullptr);
  std::vector<std::pair<uint64_t, size_t>> runs;  // 8 MiB of rows of 1 KiB, 8 KiB apart
  for (uint64_t i = 0; i < 1024; ++i) runs.emplace_back(300000 + i * 8192, 1024);
  for (const char* fault : {"fault=reset_mid&every=2", "fault=short_body&every=1", "fault=status&status=500&every=1",
                            "fault=wrong_range&every=1"}) {
    SCOPED_TRACE(fault);
    proxy_->Set(fault);
    const std::string result = CheckRuns(*source, file_, runs);
    EXPECT_NE(result, "");
    EXPECT_EQ(result.find("differs"), std::string::npos) << result;  // an error, not wrong bytes
  }
  proxy_->Set("fault=none");
  const uint64_t requests_before = Requests(*source);
  EXPECT_EQ(CheckRuns(*source, file_, runs), "");  // no failed block stays behind
  EXPECT_LE(Requests(*source) - requests_before, 10u);
  EXPECT_EQ(Stats(*source)["in_flight"].get<uint64_t>(), 0u);
}

TEST_F(RemoteRunFaults, ShutdownEndsAReadWhoseRequestsHang) {
  auto source = Open(proxy_->Url("/f.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  proxy_->Set("fault=hang&seconds=30");
  std::string result;
  std::thread reader([&] { result = CheckRuns(*source, file_, SpreadRuns()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  source->Shutdown();
  reader.join();  // within about a second of Shutdown (RangeFetcher polls the cancel flag)
  EXPECT_NE(result.find("shut down"), std::string::npos) << result;
}

// Reads rank part `world`/`rank` of tensor 1 (16 MiB, seen as a U8 matrix of
// `cols` columns) like the kernel does (128 KiB requests in order, one stream,
// fenced at the part's end) and returns bytes fetched / part bytes.
double PartAmplification(const ByteSource& source, const std::string& file, uint64_t cols, uint64_t world,
                         const char* rank, uint64_t* part_bytes) {
  StatusOr<Header> header = ReadHeader(source);
  EXPECT_TRUE(header.ok());
  const TensorInfo& t = header->tensors[1];
  const uint64_t start = header->data_start() + t.begin;
  const uint64_t rows = t.byte_size() / cols;
  StatusOr<PartSpec> spec = ParsePartRank(world, rank);
  EXPECT_TRUE(spec.ok());
  StatusOr<SlicePlan> plan = PlanPart(DType::U8, {rows, cols}, *spec);
  EXPECT_TRUE(plan.ok());
  std::string got(plan->result_bytes, '\0');
  const uint64_t before = Fetched(source);
  const ReadHint hint{42, SliceSourceEnd(start, *plan)};
  for (uint64_t off = 0; off < got.size(); off += 128 << 10) {
    StatusOr<size_t> n = ReadSliceRange(source, start, *plan, off, 128 << 10, got.data() + off, hint);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
  }
  std::string expected;
  for (const ByteWindow& w : plan->Windows()) expected += file.substr(start + w.offset, w.length);
  EXPECT_TRUE(got == expected) << rank << " differs";
  *part_bytes = got.size();
  return static_cast<double>(Fetched(source) - before) / static_cast<double>(got.size());
}

TEST_F(RemoteRuns, AColumnPartFetchesAtMostATenthMoreThanItsBytesWhenRequestsCostNothing) {
  for (uint64_t cols : {64ull << 10, 16ull << 10}) {  // runs of 8 KiB 56 KiB apart; 2 KiB 14 KiB apart
    SCOPED_TRACE("cols " + std::to_string(cols));
    auto source = Open(nginx_->Url("/f.safetensors"), ExactOptions());
    ASSERT_NE(source, nullptr);
    uint64_t part = 0;
    const double amplification = PartAmplification(*source, file_, cols, 8, "3@1", &part);
    EXPECT_EQ(part, 2 * kMiB);
    EXPECT_LE(amplification, 1.1);
    std::printf("column part of %llu-byte rows: %.3fx fetched\n", static_cast<unsigned long long>(cols), amplification);
  }
}

TEST_F(RemoteRuns, AContiguousPartFetchesAtMostATenthAndABlockMore) {
  auto source = Open(nginx_->Url("/f.safetensors"), ExactOptions());
  ASSERT_NE(source, nullptr);
  uint64_t part = 0;
  // parts/2/0: the first 8 MiB of the tensor; unfenced read-ahead ran ~4 MiB past it.
  const double amplification = PartAmplification(*source, file_, 4096, 2, "0", &part);
  EXPECT_EQ(part, 8 * kMiB);
  const double block = static_cast<double>(TestOptions().block_size);
  EXPECT_LE(amplification * static_cast<double>(part), 1.1 * static_cast<double>(part) + block);
  std::printf("contiguous part: %.3fx fetched\n", amplification);
}

TEST_F(RemoteRuns, AColumnPartOfShortRunsIsFetchedInWholeBlocksNeverPastItsEnd) {
  RemoteOptions options = TestOptions();  // the default request_cost; 1 MiB blocks
  std::atomic<uint64_t> furthest{0};
  options.before_fetch_for_tests = [&](uint64_t offset, uint64_t length) {
    uint64_t seen = furthest.load();
    while (offset + length > seen && !furthest.compare_exchange_weak(seen, offset + length)) {
    }
  };
  auto source = Open(nginx_->Url("/f.safetensors"), options);
  ASSERT_NE(source, nullptr);
  StatusOr<Header> header = ReadHeader(*source);
  ASSERT_TRUE(header.ok());
  const TensorInfo& t = header->tensors[1];
  const uint64_t start = header->data_start() + t.begin;
  // Tensor 1 as 2048 rows of 8 KiB; parts/8/3@1 is 1 KiB of each row (7 KiB apart).
  const uint64_t requests_before = Requests(*source);
  uint64_t part = 0;
  const double amplification = PartAmplification(*source, file_, 8 << 10, 8, "3@1", &part);
  ASSERT_EQ(part, 2 * kMiB);
  const uint64_t requests = Requests(*source) - requests_before;
  const uint64_t block = options.block_size;
  const uint64_t blocks_spanned = (start + t.byte_size()) / block - start / block + 1;
  std::printf("column part of 1 KiB runs: %.3fx fetched in %llu requests (%llu blocks spanned)\n",
              amplification, static_cast<unsigned long long>(requests),
              static_cast<unsigned long long>(blocks_spanned));
  // About a request per block (the block at the part's end goes exact: a few
  // more), against 2048 exact requests; the bound: 1.1x plus a block
  // per run.
  EXPECT_LE(requests, blocks_spanned + 8);
  EXPECT_LE(amplification * static_cast<double>(part), static_cast<double>(blocks_spanned * block));
  // Nothing fetched at or past the part's last byte's block end.
  StatusOr<PartSpec> spec = ParsePartRank(8, "3@1");
  ASSERT_TRUE(spec.ok());
  StatusOr<SlicePlan> plan = PlanPart(DType::U8, {2048, 8 << 10}, *spec);
  ASSERT_TRUE(plan.ok());
  EXPECT_LE(furthest.load(), SliceSourceEnd(start, *plan));
  // The node's next rank (its own file, fenced at its own end) finds the
  // blocks its runs share with rank 3 in the cache: only the last block's
  // pieces (past rank 3's fence, so fetched exactly then) are fetched again.
  const uint64_t fetched_before = Fetched(*source);
  ASSERT_LT(PartAmplification(*source, file_, 8 << 10, 8, "2@1", &part), 1.0);
  EXPECT_LE(Fetched(*source) - fetched_before, block);
}

TEST_F(RemoteRuns, BlocksWithoutRoomInTheCacheAreFetchedExactlyAndByteExact) {
  RemoteOptions options = TestOptions();
  // 1 MiB for 256 KiB blocks and the connections' 256 KiB receive buffers.
  options.cache_size = 1 << 20;
  options.block_size = 256 << 10;
  options.readahead = 0;
  auto source = Open(nginx_->Url("/f.safetensors"), options);
  ASSERT_NE(source, nullptr);
  uint64_t part = 0;
  // Reads of 128 KiB of a part of 1 KiB runs span 1 MiB of rows, 4 blocks:
  // some find no room and go exact (or as one span); every byte is checked.
  PartAmplification(*source, file_, 8 << 10, 8, "3@1", &part);
  EXPECT_EQ(part, 2 * kMiB);
  nlohmann::json stats = Stats(*source);
  EXPECT_GT(stats["no_room"].get<uint64_t>(), 0u);
  EXPECT_EQ(stats["in_flight"].get<uint64_t>(), 0u);
}

TEST_F(RemoteRuns, APartOfLongRunsStaysExact) {
  auto source = Open(nginx_->Url("/f.safetensors"), TestOptions());  // the default request_cost
  ASSERT_NE(source, nullptr);
  uint64_t part = 0;
  // 32 rows of 512 KiB; parts/8/3@1: runs of 64 KiB 448 KiB apart.
  const double amplification = PartAmplification(*source, file_, 512 << 10, 8, "3@1", &part);
  EXPECT_EQ(part, 2 * kMiB);
  EXPECT_LE(amplification, 1.1);
  EXPECT_GE(Stats(*source)["run_fetches"].get<uint64_t>(), 32u);
}

}  // namespace
}  // namespace stfs
