// Stress: 32 threads read random tensors' `data` files and random slice
// views (`slices/<rows>,<cols>/data`) at random offsets and sizes through
// the filesystem core, for a bounded time, and every byte is compared with
// the file. Run on a local file and on the same file served by nginx through
// the remote source with small blocks and a small cache (so blocks are
// evicted, recycled and shared between readers all the time); half the
// reads of `data` borrow the cache blocks (LendData) as FUSE replies do. Under
// ThreadSanitizer (ctest -L tsan) this is the race detector's workload.
//
// STFS_STRESS_SECONDS overrides the time per case (default 8).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/byte_source.h"
#include "core/header.h"
#include "fs/filesystem.h"
#include "tests/test_files.h"
#ifdef STFS_STRESS_REMOTE
#include "core/remote/remote_source.h"
#include "tests/remote/test_servers.h"
#endif

namespace stfs::testing {
namespace {

constexpr int kThreads = 32;

// Returns the number after "name": in a flat JSON object (0 when absent).
uint64_t StatField(const std::string& json, const std::string& name) {
  size_t at = json.find("\"" + name + "\":");
  return at == std::string::npos ? 0 : std::strtoull(json.c_str() + at + name.size() + 3, nullptr, 10);
}

double StressSeconds() {
  const char* env = std::getenv("STFS_STRESS_SECONDS");
  double s = env ? std::atof(env) : 0;
  return s > 0 ? s : 8.0;
}

// 2-D tensors of several element sizes (slices pick rows and columns), a
// 1-D one and one that spans many remote blocks.
std::vector<TestTensor> StressTensors() {
  return {{"f32", DType::F32, {257, 700}, ""},   {"bf16", DType::BF16, {1000, 333}, ""},
          {"u8", DType::U8, {64, 4097}, ""},     {"f64", DType::F64, {31, 129}, ""},
          {"big", DType::F16, {1024, 1536}, ""}, {"vec", DType::I32, {100003}, ""}};
}

class StressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tensors_ = StressTensors();
    file_ = BuildSafetensors(tensors_);
    path_ = dir_.Write("m.safetensors", file_);
  }

  std::unique_ptr<Filesystem> MakeFilesystem(std::unique_ptr<ByteSource> source) {
    StatusOr<Header> header = ReadHeader(*source);
    EXPECT_TRUE(header.ok()) << header.status().ToString();
    if (!header.ok()) return nullptr;
    auto fs = Filesystem::Create(std::move(source), std::move(*header));
    EXPECT_TRUE(fs.ok()) << fs.status().ToString();
    return fs.ok() ? std::move(*fs) : nullptr;
  }

  // One random read: a tensor's data or a slice view's, a random range,
  // compared with the expected bytes. Returns "" or what went wrong.
  std::string OneRead(const Filesystem& fs, std::mt19937_64& rng, std::vector<char>& buf) {
    const TestTensor& t = tensors_[rng() % tensors_.size()];
    StatusOr<NodeAttr> dir = fs.Lookup(kRootInode, t.name);
    if (!dir.ok()) return "lookup " + t.name + ": " + dir.status().ToString();
    std::string expected;
    InodeId data_dir = dir->ino;
    std::string what = t.name;
    if (t.shape.size() == 2 && rng() % 2 == 0) {
      // rows r0:r1:step, columns c0:c1
      const uint64_t rows = t.shape[0], cols = t.shape[1];
      const size_t elem = t.bytes.size() / (rows * cols);
      uint64_t r0 = rng() % rows, r1 = r0 + 1 + rng() % (rows - r0);
      uint64_t step = 1 + rng() % 3;
      uint64_t c0 = rng() % cols, c1 = c0 + 1 + rng() % (cols - c0);
      std::string index = std::to_string(r0) + ":" + std::to_string(r1) + ":" +
                          std::to_string(step) + "," + std::to_string(c0) + ":" +
                          std::to_string(c1);
      for (uint64_t r = r0; r < r1; r += step) {
        expected.append(t.bytes, (r * cols + c0) * elem, (c1 - c0) * elem);
      }
      StatusOr<NodeAttr> slices = fs.Lookup(dir->ino, "slices");
      if (!slices.ok()) return "lookup slices: " + slices.status().ToString();
      StatusOr<NodeAttr> view = fs.Lookup(slices->ino, index);
      if (!view.ok()) return "lookup slice " + index + ": " + view.status().ToString();
      data_dir = view->ino;
      what += "/slices/" + index;
    } else {
      expected = t.bytes;
    }
    StatusOr<NodeAttr> data = fs.Lookup(data_dir, "data");
    if (!data.ok()) return "lookup " + what + "/data: " + data.status().ToString();
    StatusOr<FileHandle> file = fs.Open(data->ino);
    if (!file.ok()) {
      // A slice view evicted between lookup and open: the kernel would look
      // it up again; so do we, next round.
      return file.status().code() == StatusCode::kStale ? "" : "open: " + file.status().ToString();
    }
    if (expected.empty()) return "";
    uint64_t offset = rng() % expected.size();
    size_t length = 1 + rng() % std::min<size_t>(buf.size(), expected.size() - offset + 100);
    StatusOr<size_t> n = ReadOrLend(fs, *file, offset, length, buf, rng() % 2 == 0);
    if (!n.ok()) return "read " + what + ": " + n.status().ToString();
    size_t want = std::min<uint64_t>(length, expected.size() - offset);
    if (*n != want) return what + ": read " + std::to_string(*n) + " of " + std::to_string(want);
    if (expected.compare(offset, want, buf.data(), want) != 0) {
      return what + ": wrong bytes at " + std::to_string(offset) + "+" + std::to_string(want);
    }
    return "";
  }

  // Reads like Filesystem::Read into `buf`; when `lend` and the source lends
  // memory, through LendData instead, holding the pinned blocks a moment
  // (while other threads evict) before copying them out, as a FUSE reply does.
  static StatusOr<size_t> ReadOrLend(const Filesystem& fs, const FileHandle& file, uint64_t offset,
                                     size_t length, std::vector<char>& buf, bool lend) {
    if (lend) {
      StatusOr<PinnedBytes> lent = fs.LendData(file, offset, length);
      if (lent.ok()) {
        std::this_thread::yield();
        size_t n = 0;
        for (const PinnedSpan& span : lent->spans()) {
          std::memcpy(buf.data() + n, span.data, span.length);
          n += span.length;
        }
        return n;
      }
      if (lent.status().code() != StatusCode::kNotSupported) return lent.status();
    }
    return fs.Read(file, offset, length, buf.data());
  }

  // Runs kThreads readers for StressSeconds(); fails on the first mismatch.
  void Run(const Filesystem& fs) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(StressSeconds());
    std::atomic<uint64_t> reads{0};
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::string first_error;
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        std::mt19937_64 rng(std::random_device{}() + i);
        std::vector<char> buf(1 << 20);
        while (!failed.load() && std::chrono::steady_clock::now() < until) {
          std::string error = OneRead(fs, rng, buf);
          reads.fetch_add(1);
          if (!error.empty()) {
            std::lock_guard<std::mutex> lock(mu);
            if (first_error.empty()) first_error = error;
            failed.store(true);
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(first_error, "");
    EXPECT_GT(reads.load(), static_cast<uint64_t>(kThreads));
    std::printf("%llu reads by %d threads\n", static_cast<unsigned long long>(reads.load()),
                kThreads);
  }

  TempDir dir_;
  std::vector<TestTensor> tensors_;
  std::string file_;
  std::string path_;
};

TEST_F(StressTest, LocalFile) {
  StatusOr<std::unique_ptr<ByteSource>> source = OpenLocalFile(path_);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto fs = MakeFilesystem(std::move(*source));
  ASSERT_NE(fs, nullptr);
  Run(*fs);
}

#ifdef STFS_STRESS_REMOTE
TEST_F(StressTest, RemoteObjectOverNginx) {
  std::string error;
  auto nginx = NginxServer::Start(dir_.path(), &error);
  ASSERT_NE(nginx, nullptr) << error;
  RemoteOptions options;
  // Small blocks and a cache that cannot hold the file's blocks (5.2 MiB)
  // beside the connections' receive buffers it also counts (3-8 MiB with
  // 32 threads): constant eviction and reuse. (At 8 MiB a TSan run once
  // held every block it had made, 4.5 MiB, beside 3.4 MiB of buffers:
  // no eviction; jumping reads fetch their own bytes, so fewer blocks are
  // made than before.)
  options.block_size = 64 << 10;
  options.cache_size = 6 << 20;
  options.readahead = 512 << 10;
  options.timeout = std::chrono::seconds(60);
  StatusOr<std::unique_ptr<ByteSource>> source =
      OpenRemoteSource(nginx->Url("/m.safetensors"), options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto fs = MakeFilesystem(std::move(*source));
  ASSERT_NE(fs, nullptr);
  Run(*fs);
  std::string stats = fs->source().StatsJson();
  std::printf("%s", stats.c_str());
  // The cache was really used and really under pressure.
  EXPECT_GT(StatField(stats, "hits"), 0u) << stats;
  EXPECT_GT(StatField(stats, "evictions"), 0u) << stats;
}
#endif

}  // namespace
}  // namespace stfs::testing
