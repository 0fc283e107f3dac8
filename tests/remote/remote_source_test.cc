// The remote source against a real nginx on 127.0.0.1: request counts for
// the header, byte-exact reads, what the cache and read-ahead fetch, the
// validator, redirects, hf:// and the stats.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "core/header.h"
#include "core/pinned_read.h"
#include "core/remote/curl_buffers.h"
#include "core/remote/http_range_source.h"
#include "tests/remote/remote_test_util.h"

namespace stfs {
namespace {

using testing::CheckRead;
using testing::FileWithTensorSizes;
using testing::LoggedRequest;
using testing::ParseRangeHeader;
using testing::TestTensor;

class RemoteSource : public testing::NginxTest {
 protected:
  // Serves `file` as NAME and opens it with room for four 1 MiB blocks and
  // no read-ahead, so that a few reads evict.
  std::unique_ptr<ByteSource> OpenWithSmallCache(const std::string& name, const std::string& file) {
    root_.Write(name, file);
    RemoteOptions options = TestOptions();
    options.cache_size = 4 << 20;
    options.readahead = 0;
    return Open(nginx_->Url("/" + name), options);
  }

  // Serves one tensor of `mib` MiB as NAME (its bytes in file_), opens it
  // with the test options (source_) and returns where its data starts, or 0.
  uint64_t OpenOneTensor(const std::string& name, uint64_t mib) {
    file_ = FileWithTensorSizes({mib << 20});
    root_.Write(name, file_);
    source_ = Open(nginx_->Url("/" + name), TestOptions());
    if (source_ == nullptr) return 0;
    StatusOr<Header> header = ReadHeader(*source_);
    EXPECT_TRUE(header.ok()) << header.status().ToString();
    return header.ok() ? header->data_start() : 0;
  }

  std::string file_;
  std::unique_ptr<ByteSource> source_;
};

TEST_F(RemoteSource, SmallHeaderCostsOneRequest) {
  std::vector<TestTensor> tensors;
  std::string file = FileWithTensorSizes({300000, 5000, 0, 123457}, &tensors);
  root_.Write("m.safetensors", file);
  auto source = Open(nginx_->Url("/m.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->Size(), file.size());
  StatusOr<Header> header = ReadHeader(*source);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->tensors.size(), 4u);
  std::vector<LoggedRequest> log = Logged();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].range, "bytes=0-99999");
  EXPECT_EQ(log[0].status, 206);
}

TEST_F(RemoteSource, LargeHeaderCostsExactlyTwoRequests) {
  std::vector<uint64_t> sizes(4000, 3);  // ~300 KB of header JSON
  std::string file = FileWithTensorSizes(sizes);
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  ASSERT_GT(8 + n, 100000u);
  root_.Write("big-header.safetensors", file);
  auto source = Open(nginx_->Url("/big-header.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  StatusOr<Header> header = ReadHeader(*source);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->tensors.size(), 4000u);
  std::vector<LoggedRequest> log = Logged();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].range, "bytes=0-99999");
  EXPECT_EQ(log[1].range, "bytes=100000-" + std::to_string(8 + n - 1));
}

TEST_F(RemoteSource, ObjectSmallerThanFirstRequestNeedsNoOther) {
  std::vector<TestTensor> tensors;
  std::string file = FileWithTensorSizes({1000, 7, 30000}, &tensors);
  ASSERT_LT(file.size(), 100000u);
  root_.Write("small.safetensors", file);
  auto source = Open(nginx_->Url("/small.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->Size(), file.size());
  ASSERT_TRUE(ReadHeader(*source).ok());
  for (uint64_t off = 0; off < file.size(); off += 999) {
    ASSERT_EQ(CheckRead(*source, file, off, 4096), "");
  }
  EXPECT_EQ(Logged().size(), 1u);
}

TEST_F(RemoteSource, RandomReadsAreByteExact) {
  std::string file = FileWithTensorSizes({7 << 20, 13 << 20, 333333});
  root_.Write("r.safetensors", file);
  auto source = Open(nginx_->Url("/r.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 200; ++i) {
    uint64_t off = rng() % (file.size() + 10);
    size_t len = 1 + rng() % (3 << 20);
    ASSERT_EQ(CheckRead(*source, file, off, len), "") << "read " << i;
  }
  // Reads at block edges and at the very end.
  for (uint64_t off : {uint64_t{0}, uint64_t{(1 << 20) - 1}, uint64_t{1 << 20},
                       uint64_t{file.size() - 1}, uint64_t{file.size()}}) {
    ASSERT_EQ(CheckRead(*source, file, off, 2 << 20), "");
  }
}

TEST_F(RemoteSource, ConcurrentReadersAreByteExact) {
  std::string file = FileWithTensorSizes({24 << 20, 5 << 20});
  root_.Write("c.safetensors", file);
  RemoteOptions options = TestOptions();
  options.cache_size = 8 << 20;  // small: readers evict each other's blocks
  auto source = Open(nginx_->Url("/c.safetensors"), options);
  ASSERT_NE(source, nullptr);
  std::atomic<int> failures{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(std::random_device{}() + t);
      for (int i = 0; i < 60; ++i) {
        uint64_t off = rng() % file.size();
        size_t len = 1 + rng() % (1 << 20);
        std::string err = CheckRead(*source, file, off, len);
        if (!err.empty()) {
          ADD_FAILURE() << err;
          failures.fetch_add(1);
          return;
        }
      }
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_EQ(failures.load(), 0);
  nlohmann::json stats = nlohmann::json::parse(source->StatsJson());
  EXPECT_LE(stats["cache_bytes"].get<uint64_t>(), (8u << 20) + 8u * (2u << 20));
}

TEST_F(RemoteSource, ReadingOneTensorFetchesOnlyItsBlocks) {
  std::vector<TestTensor> tensors;
  std::string file = FileWithTensorSizes({(3 << 20) + 17, (9 << 20) + 5, 6 << 20}, &tensors);
  root_.Write("t.safetensors", file);
  auto source = Open(nginx_->Url("/t.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  StatusOr<Header> header = ReadHeader(*source);
  ASSERT_TRUE(header.ok());
  const TensorInfo& t = header->tensors[1];
  uint64_t begin = header->data_start() + t.begin;
  uint64_t end = header->data_start() + t.end;
  nginx_->ClearLog();
  // A sequential reader, the way the kernel reads a FUSE file.
  for (uint64_t off = begin; off < end; off += 131072) {
    ASSERT_EQ(CheckRead(*source, file, off, std::min<uint64_t>(131072, end - off)), "");
  }
  const uint64_t block = 1 << 20;
  uint64_t lo = begin / block * block;
  uint64_t hi = (end + block - 1) / block * block;
  uint64_t fetched = 0;
  for (const LoggedRequest& r : Logged()) {
    uint64_t a, b;
    ASSERT_TRUE(ParseRangeHeader(r.range, &a, &b)) << r.range;
    EXPECT_GE(a, lo);
    EXPECT_LE(b, hi);
    fetched += r.bytes;
  }
  EXPECT_LE(fetched, hi - lo);
  EXPECT_GE(fetched, end - begin);
  nlohmann::json stats = nlohmann::json::parse(source->StatsJson());
  EXPECT_GT(stats["readahead_blocks"].get<uint64_t>(), 0u) << stats.dump();
  EXPECT_EQ(stats["bytes_read"].get<uint64_t>(), 8 + header->header_size + (end - begin));
}

TEST_F(RemoteSource, RandomReaderFetchesOnlyTouchedBlocks) {
  std::string file = FileWithTensorSizes({64 << 20});
  root_.Write("rr.safetensors", file);
  auto source = Open(nginx_->Url("/rr.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  nginx_->ClearLog();
  std::set<uint64_t> blocks;
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 12; ++i) {
    uint64_t off = (1 << 20) + rng() % (file.size() - (2 << 20));
    ASSERT_EQ(CheckRead(*source, file, off, 4096), "");
    for (uint64_t b = off >> 20; b <= (off + 4095) >> 20; ++b) blocks.insert(b);
  }
  std::vector<LoggedRequest> log = Logged();
  std::set<uint64_t> fetched;
  for (const LoggedRequest& r : log) {
    uint64_t a, b;
    ASSERT_TRUE(ParseRangeHeader(r.range, &a, &b));
    for (uint64_t x = a >> 20; x < (b + (1 << 20) - 1) >> 20; ++x) fetched.insert(x);
  }
  EXPECT_EQ(fetched, blocks);
}

TEST_F(RemoteSource, LargeRandomReadsFetchOnlyTheirOwnBytes) {
  std::string file = FileWithTensorSizes({64 << 20});
  root_.Write("rr.safetensors", file);
  RemoteOptions options = TestOptions();
  options.block_size = 4 << 20;
  auto source = Open(nginx_->Url("/rr.safetensors"), options);
  ASSERT_NE(source, nullptr);
  nginx_->ClearLog();
  // Unaligned reads 5 MiB apart (farther than a stream's slack), in random
  // order, each as one 1 MiB read and as a 512 KiB + 512 KiB pair (the way
  // the kernel splits a pread).
  std::vector<uint64_t> offsets;
  for (uint64_t i = 0; i < 12; ++i) offsets.push_back((1 << 20) + i * (5 << 20) + i * 77777);
  std::shuffle(offsets.begin(), offsets.end(), std::mt19937_64(std::random_device{}()));
  uint64_t read = 0;
  for (size_t i = 0; i < offsets.size(); ++i) {
    if (i % 2 == 0) {
      ASSERT_EQ(CheckRead(*source, file, offsets[i], 1 << 20), "");
    } else {
      ASSERT_EQ(CheckRead(*source, file, offsets[i], 512 << 10), "");
      ASSERT_EQ(CheckRead(*source, file, offsets[i] + (512 << 10), 512 << 10), "");
    }
    read += 1 << 20;
  }
  uint64_t fetched = 0;
  for (const LoggedRequest& r : Logged()) fetched += r.bytes;
  EXPECT_EQ(fetched, read);  // whole 4 MiB blocks would be 5-8x
  // Small random reads still share blocks: two 4 KiB reads in one block, one fetch.
  nginx_->ClearLog();
  ASSERT_EQ(CheckRead(*source, file, (40 << 20) + 10, 4096), "");
  ASSERT_EQ(CheckRead(*source, file, (40 << 20) + 100000, 4096), "");
  EXPECT_EQ(Logged().size(), 1u);
}

TEST_F(RemoteSource, ReadersOfOneBlockShareOneFetch) {
  std::string file = FileWithTensorSizes({8 << 20});
  root_.Write("s.safetensors", file);
  RemoteOptions options = TestOptions();
  options.readahead = 0;
  auto source = Open(nginx_->Url("/s.safetensors"), options);
  ASSERT_NE(source, nullptr);
  nginx_->ClearLog();
  std::vector<std::thread> readers;
  for (int t = 0; t < 12; ++t) {
    readers.emplace_back(
        [&, t] { EXPECT_EQ(CheckRead(*source, file, (3 << 20) + t * 1000, 5000), ""); });
  }
  for (auto& r : readers) r.join();
  std::vector<LoggedRequest> log = Logged();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].range, "bytes=3145728-4194303");
}

TEST_F(RemoteSource, CachedBytesAreNotFetchedAgainUntilEvicted) {
  std::string file = FileWithTensorSizes({12 << 20});
  auto source = OpenWithSmallCache("e.safetensors", file);
  ASSERT_NE(source, nullptr);
  nginx_->ClearLog();
  ASSERT_EQ(CheckRead(*source, file, 1 << 20, 100), "");
  ASSERT_EQ(CheckRead(*source, file, (1 << 20) + 5000, 100), "");
  EXPECT_EQ(Logged().size(), 1u);
  for (int b = 3; b < 10; ++b) ASSERT_EQ(CheckRead(*source, file, uint64_t(b) << 20, 10), "");
  nlohmann::json stats = nlohmann::json::parse(source->StatsJson());
  EXPECT_LE(stats["cache_bytes"].get<uint64_t>(), 4u << 20);
  EXPECT_GT(stats["evictions"].get<uint64_t>(), 0u);
  ASSERT_EQ(CheckRead(*source, file, 1 << 20, 100), "");  // evicted: fetched again
  EXPECT_EQ(Logged().size(), 9u);
}

// libcurl frees each transfer's receive buffer when the transfer ends; the
// pool (core/remote/curl_buffers.h) gives it to the next transfer instead, so
// one range request after another touches no fresh memory for it.
TEST_F(RemoteSource, SuccessiveFetchesReuseTheReceiveBuffer) {
  std::string file = FileWithTensorSizes({12 << 20});
  auto source = OpenWithSmallCache("buffers.safetensors", file);
  ASSERT_NE(source, nullptr);
  nginx_->ClearLog();
  const uint64_t before = CurlBuffersReused();
  for (int b = 1; b < 10; ++b) ASSERT_EQ(CheckRead(*source, file, uint64_t(b) << 20, 100), "");
  const uint64_t fetches = Logged().size();
  EXPECT_EQ(fetches, 9u);
  EXPECT_GE(CurlBuffersReused() - before, fetches);
}

TEST_F(RemoteSource, PinnedReadsLendCacheBlocksUntilDropped) {
  std::string file = FileWithTensorSizes({12 << 20});
  auto source = OpenWithSmallCache("p.safetensors", file);
  ASSERT_NE(source, nullptr);
  const auto* lender = dynamic_cast<const PinnedReadable*>(source.get());
  ASSERT_NE(lender, nullptr);
  auto joined = [](const PinnedBytes& bytes) {
    std::string out;
    for (const PinnedSpan& span : bytes.spans()) out.append(span.data, span.length);
    return out;
  };
  // Across blocks 1 and 2, short enough to go through the cache (a large
  // read starting no stream fetches exactly its bytes, past the cache).
  const uint64_t offset = (2 << 20) - 50000;
  const size_t length = 100000;
  StatusOr<PinnedBytes> lent = lender->ReadPinned(offset, length, ReadHint{});
  ASSERT_TRUE(lent.ok()) << lent.status().ToString();
  EXPECT_EQ(lent->spans().size(), 2u);  // the two blocks' own memory, not a copy
  ASSERT_EQ(joined(*lent), file.substr(offset, length));
  // Cycle every other block through the cache: the lent ones stay put.
  for (int b = 3; b < 12; ++b) ASSERT_EQ(CheckRead(*source, file, uint64_t(b) << 20, 10), "");
  EXPECT_EQ(joined(*lent), file.substr(offset, length));
  nlohmann::json stats = nlohmann::json::parse(source->StatsJson());
  EXPECT_LE(stats["cache_bytes"].get<uint64_t>() + stats["cache_other_bytes"].get<uint64_t>(),
            4u << 20);
  // Dropped, they are unpinned: evicted like any block, so fetched again.
  lent = PinnedBytes();
  for (int b = 3; b < 12; ++b) ASSERT_EQ(CheckRead(*source, file, uint64_t(b) << 20, 10), "");
  nginx_->ClearLog();
  ASSERT_EQ(CheckRead(*source, file, 1 << 20, 10), "");
  ASSERT_EQ(Logged().size(), 1u);
  EXPECT_EQ(Logged()[0].range, "bytes=1048576-2097151");
  // Header bytes are never in blocks: lent as a copy, still exact.
  StatusOr<PinnedBytes> head = lender->ReadPinned(0, 64, ReadHint{});
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(joined(*head), file.substr(0, 64));
}

// Reads [offset, +length) through `source`'s pinned reads with `hint` and
// compares with `file`; returns "" or a description.
std::string CheckHintedRead(const ByteSource& source, const std::string& file, uint64_t offset,
                            size_t length, const ReadHint& hint) {
  const auto* lender = dynamic_cast<const PinnedReadable*>(&source);
  if (lender == nullptr) return "the source lends no memory";
  StatusOr<PinnedBytes> lent = lender->ReadPinned(offset, length, hint);
  if (!lent.ok()) return lent.status().ToString();
  std::string got;
  for (const PinnedSpan& span : lent->spans()) got.append(span.data, span.length);
  return got == file.substr(offset, length) ? "" : "wrong bytes at " + std::to_string(offset);
}

// The highest byte any logged request asked for, plus one.
uint64_t FetchedUpTo(const std::vector<LoggedRequest>& log) {
  uint64_t most = 0;
  for (const LoggedRequest& r : log) {
    uint64_t a, b;
    if (ParseRangeHeader(r.range, &a, &b)) most = std::max(most, b);
  }
  return most;
}

TEST_F(RemoteSource, TwoStreamsReadingOneTensorEachGetReadahead) {
  const uint64_t data = OpenOneTensor("two.safetensors", 32);
  ASSERT_NE(data, 0u);
  const std::string& file = file_;
  const ByteSource& source = *source_;
  // Stream 1 scans from the start, stream 2 from 16 MiB on, in turns.
  for (uint64_t off = 0; off < (6 << 20); off += 131072) {
    ASSERT_EQ(CheckHintedRead(source, file, data + off, 131072, ReadHint{1, file.size()}), "");
    ASSERT_EQ(CheckHintedRead(source, file, data + (16 << 20) + off, 131072,
                              ReadHint{2, file.size()}),
              "");
  }
  std::vector<LoggedRequest> log = Logged();
  auto fetched_past = [&](uint64_t from, uint64_t to) {
    for (const LoggedRequest& r : log) {
      uint64_t a, b;
      if (ParseRangeHeader(r.range, &a, &b) && a >= from && a < to) return true;
    }
    return false;
  };
  // Each stream's read-ahead fetched blocks past what it had read.
  EXPECT_TRUE(fetched_past(data + (6 << 20), data + (16 << 20)));
  EXPECT_TRUE(fetched_past(data + (22 << 20), data + (32 << 20)));
}

TEST_F(RemoteSource, ARandomReaderBesideAScanGetsNoReadahead) {
  const uint64_t data = OpenOneTensor("mixed.safetensors", 40);
  ASSERT_NE(data, 0u);
  const std::string& file = file_;
  const ByteSource& source = *source_;
  const uint64_t region = (data + (24 << 20)) / (1 << 20) * (1 << 20);  // a block boundary
  std::mt19937_64 rng(42);
  // Stream 1 scans 8 MiB; stream 2 reads 16 KiB pieces of one 144 KiB
  // region in random order, three per scan read: by offset alone, its
  // reads would continue one another and earn read-ahead.
  for (uint64_t off = 0; off < (8 << 20); off += 131072) {
    ASSERT_EQ(CheckHintedRead(source, file, data + off, 131072, ReadHint{1, file.size()}), "");
    for (int i = 0; i < 3; ++i) {
      uint64_t at = region + (rng() % 9) * 16384;
      ASSERT_EQ(CheckHintedRead(source, file, at, 16384, ReadHint{2, file.size()}), "");
    }
  }
  std::vector<LoggedRequest> log = Logged();
  for (const LoggedRequest& r : log) {
    uint64_t a, b;
    ASSERT_TRUE(ParseRangeHeader(r.range, &a, &b));
    if (a >= region) {
      EXPECT_EQ(b, region + (1 << 20)) << r.range;  // the region's own block only
    }
  }
  EXPECT_GT(FetchedUpTo(log), data + (8 << 20));  // the scan was read ahead
}

TEST_F(RemoteSource, ReadaheadStopsAtTheReadersFence) {
  const uint64_t data = OpenOneTensor("fence.safetensors", 32);
  ASSERT_NE(data, 0u);
  const std::string& file = file_;
  const ByteSource& source = *source_;
  // The reader's file ends at a block boundary well inside the tensor (a
  // part of it, say): everything it reads lies before, so nothing past is fetched.
  const uint64_t fence = (data + (6 << 20)) / (1 << 20) * (1 << 20);
  for (uint64_t off = data; off < fence; off += 131072) {
    size_t length = static_cast<size_t>(std::min<uint64_t>(131072, fence - off));
    ASSERT_EQ(CheckHintedRead(source, file, off, length, ReadHint{1, fence}), "");
  }
  std::vector<LoggedRequest> log = Logged();
  EXPECT_EQ(FetchedUpTo(log), fence);
  nlohmann::json stats = nlohmann::json::parse(source.StatsJson());
  EXPECT_GT(stats["readahead_blocks"].get<uint64_t>(), 0u) << stats.dump();
}

TEST_F(RemoteSource, AStreamStartingMidBlockFetchesEachOfItsBytesOnce) {
  const uint64_t data = OpenOneTensor("mid.safetensors", 32);
  ASSERT_NE(data, 0u);
  const std::string& file = file_;
  const ByteSource& source = *source_;
  // A part that starts in the middle of a block and ends at a block edge,
  // scanned in 128 KiB reads: the bytes before it are not its own, and the
  // bytes it read exactly (before it earned whole blocks) are not fetched again.
  const uint64_t start = (data + (3 << 20)) / (1 << 20) * (1 << 20) + (640 << 10);
  const uint64_t fence = start - (640 << 10) + (10 << 20);
  for (uint64_t off = start; off < fence; off += 131072) {
    size_t length = static_cast<size_t>(std::min<uint64_t>(131072, fence - off));
    ASSERT_EQ(CheckHintedRead(source, file, off, length, ReadHint{1, fence}), "");
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const LoggedRequest& r : Logged()) {
    uint64_t a, b;
    ASSERT_TRUE(ParseRangeHeader(r.range, &a, &b)) << r.range;
    if (b <= kProbeBytes) continue;  // the first request (header)
    EXPECT_GE(a, start) << r.range;
    EXPECT_LE(b, fence) << r.range;
    ranges.emplace_back(a, b);
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t fetched = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    fetched += ranges[i].second - ranges[i].first;
    if (i > 0) {
      EXPECT_LE(ranges[i - 1].second, ranges[i].first) << "fetched twice near " << ranges[i].first;
    }
  }
  EXPECT_EQ(fetched, fence - start);
}

TEST_F(RemoteSource, SendsIfMatchWithTheFirstETag) {
  std::string file = FileWithTensorSizes({3 << 20});
  root_.Write("v.safetensors", file);
  auto source = Open(nginx_->Url("/v.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  ASSERT_EQ(CheckRead(*source, file, 2 << 20, 10), "");
  std::vector<LoggedRequest> log = Logged();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].if_match, "-");
  nlohmann::json stats = nlohmann::json::parse(source->StatsJson());
  std::string etag = stats["etag"];
  ASSERT_FALSE(etag.empty());
  EXPECT_EQ(log[1].if_match, etag);
}

// Replaces the served file with other bytes and another mtime (nginx's ETag
// is mtime-size), the way an object store replaces an object.
void ReplaceFile(const testing::TempDir& root, const std::string& name, const std::string& bytes) {
  std::string tmp = root.Write(name + ".new", bytes);
  timespec times[2] = {{0, UTIME_OMIT}, {time(nullptr) + 3600, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, tmp.c_str(), times, 0), 0);
  ASSERT_EQ(std::rename(tmp.c_str(), (root.path() + "/" + name).c_str()), 0);
}

TEST_F(RemoteSource, ReplacedObjectFailsWithStaleAndKeepsServingCachedBytes) {
  std::string file = FileWithTensorSizes({6 << 20});
  root_.Write("x.safetensors", file);
  RemoteOptions options = TestOptions();
  options.readahead = 0;
  auto source = Open(nginx_->Url("/x.safetensors"), options);
  ASSERT_NE(source, nullptr);
  ASSERT_EQ(CheckRead(*source, file, 1 << 20, 1000), "");
  ReplaceFile(root_, "x.safetensors", FileWithTensorSizes({6 << 20}));
  std::string buf(1000, '\0');
  StatusOr<size_t> n = source->ReadAt(4 << 20, 1000, buf.data());
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kStale) << n.status().ToString();
  EXPECT_EQ(Logged().back().status, 412);
  // Bytes already cached are of the version first seen, and still served.
  EXPECT_EQ(CheckRead(*source, file, (1 << 20) + 10, 1000), "");
  n = source->ReadAt(5 << 20, 10, buf.data());
  EXPECT_EQ(n.status().code(), StatusCode::kStale);
  EXPECT_TRUE(nlohmann::json::parse(source->StatsJson())["stale"].get<bool>());
}

TEST_F(RemoteSource, RemovedObjectFailsWithStale) {
  std::string file = FileWithTensorSizes({3 << 20});
  std::string path = root_.Write("gone.safetensors", file);
  auto source = Open(nginx_->Url("/gone.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  ASSERT_EQ(::unlink(path.c_str()), 0);
  std::string buf(100, '\0');
  StatusOr<size_t> n = source->ReadAt(2 << 20, 100, buf.data());
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kStale) << n.status().ToString();
  EXPECT_NE(n.status().message().find("404"), std::string::npos);
}

TEST_F(RemoteSource, MissingObjectIsNotFound) {
  StatusOr<std::unique_ptr<ByteSource>> source =
      OpenRemoteSource(nginx_->Url("/absent.safetensors?token=sekrit"), TestOptions());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kNotFound);
  EXPECT_NE(source.status().message().find("/absent.safetensors"), std::string::npos);
  EXPECT_EQ(source.status().message().find("sekrit"), std::string::npos);
  EXPECT_NE(source.status().message().find("404"), std::string::npos);
}

TEST_F(RemoteSource, EmptyObjectHasSizeZeroAndIsRefusedByTheHeaderCheck) {
  root_.Write("empty.safetensors", "");
  auto source = Open(nginx_->Url("/empty.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->Size(), 0u);
  StatusOr<Header> header = ReadHeader(*source);
  EXPECT_FALSE(header.ok());
}

TEST_F(RemoteSource, FollowsRedirectOnceThenReadsTheTargetDirectly) {
  std::string file = FileWithTensorSizes({4 << 20});
  root_.Write("f.safetensors", file);
  auto source = Open(nginx_->Url("/redirect/f.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  ASSERT_EQ(CheckRead(*source, file, 3 << 20, 5000), "");
  ASSERT_EQ(CheckRead(*source, file, 1 << 20, 5000), "");
  std::vector<LoggedRequest> log = Logged();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0].uri, "/redirect/f.safetensors");
  EXPECT_EQ(log[0].status, 302);
  for (size_t i = 1; i < log.size(); ++i) EXPECT_EQ(log[i].uri, "/f.safetensors");
}

TEST_F(RemoteSource, RedirectLoopIsBounded) {
  RemoteOptions options = TestOptions();
  options.max_redirects = 4;
  StatusOr<std::unique_ptr<ByteSource>> source = OpenRemoteSource(nginx_->Url("/loop/x"), options);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kIOError);
  EXPECT_NE(source.status().message().find("redirects"), std::string::npos);
  EXPECT_EQ(Logged().size(), 5u);
}

TEST_F(RemoteSource, HubLocationResolvesWithTokenAtTheEndpoint) {
  std::string file = FileWithTensorSizes({2 << 20, 1 << 20});
  root_.Write("model.safetensors", file);
  RemoteOptions options = TestOptions();
  options.hub_endpoint = nginx_->Url("/hub");
  options.hub_token = "hf_testtoken";
  auto source = Open("hf://org/repo/model.safetensors", options);
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->Describe(), "hf://org/repo/model.safetensors");
  ASSERT_TRUE(ReadHeader(*source).ok());
  ASSERT_EQ(CheckRead(*source, file, 1 << 20, 1 << 20), "");
  std::vector<LoggedRequest> log = Logged();
  ASSERT_GE(log.size(), 3u);
  EXPECT_EQ(log[0].uri, "/hub/org/repo/resolve/main/model.safetensors");
  for (const LoggedRequest& r : log) EXPECT_EQ(r.authorization, "Bearer hf_testtoken") << r.uri;
}

TEST_F(RemoteSource, ExtraHeadersAreSentAndCredentialsNeverDescribed) {
  std::string file = FileWithTensorSizes({1 << 20});
  root_.Write("h.safetensors", file);
  RemoteOptions options = TestOptions();
  options.headers.push_back("X-Test: present");
  std::string url =
      "http://user:pa55@127.0.0.1:" + std::to_string(nginx_->port()) + "/h.safetensors?sig=SECRET";
  auto source = Open(url, options);
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->Describe(), nginx_->Url("/h.safetensors"));
  EXPECT_EQ(source->StatsJson().find("SECRET"), std::string::npos);
  EXPECT_EQ(source->StatsJson().find("pa55"), std::string::npos);
  std::vector<LoggedRequest> log = Logged();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].x_test, "present");
  EXPECT_EQ(log[0].authorization.rfind("Basic ", 0), 0u);  // user:pa55 from the URL
}

TEST_F(RemoteSource, ReportsLastModifiedAndNoFileDescriptor) {
  std::string path = root_.Write("m.safetensors", FileWithTensorSizes({1000}));
  timespec times[2] = {{0, UTIME_OMIT}, {1700000000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  auto source = Open(nginx_->Url("/m.safetensors"), TestOptions());
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->ModificationTime().tv_sec, 1700000000);
  EXPECT_EQ(source->FileDescriptor(), -1);
}

TEST_F(RemoteSource, StatsAreOneJsonObjectWithTheDocumentedFields) {
  std::string file = FileWithTensorSizes({5 << 20});
  root_.Write("st.safetensors", file);
  RemoteOptions options = TestOptions();
  options.readahead = 0;
  auto source = Open(nginx_->Url("/st.safetensors"), options);
  ASSERT_NE(source, nullptr);
  ASSERT_EQ(CheckRead(*source, file, 2 << 20, 100), "");
  ASSERT_EQ(CheckRead(*source, file, 2 << 20, 100), "");
  std::string text = source->StatsJson();
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(text.find('\n'), text.size() - 1);
  nlohmann::json s = nlohmann::json::parse(text);
  ASSERT_TRUE(s.is_object());
  for (const char* key : {"type",
                          "url",
                          "size",
                          "block_size",
                          "cache_size",
                          "cache_bytes",
                          "cache_blocks",
                          "readahead_max",
                          "reads",
                          "bytes_read",
                          "prefix_reads",
                          "hits",
                          "waits",
                          "misses",
                          "readahead_blocks",
                          "readahead_unused",
                          "evictions",
                          "recycled",
                          "requests",
                          "bytes_fetched",
                          "retries",
                          "failures",
                          "resolves",
                          "read_errors",
                          "in_flight",
                          "stale",
                          "etag"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
  EXPECT_EQ(s["size"].get<uint64_t>(), file.size());
  EXPECT_EQ(s["misses"].get<uint64_t>(), 1u);
  EXPECT_EQ(s["hits"].get<uint64_t>(), 1u);
  EXPECT_EQ(s["requests"].get<uint64_t>(), 2u);
  EXPECT_EQ(s["bytes_fetched"].get<uint64_t>(), 100000u + (1u << 20));
  EXPECT_EQ(s["cache_bytes"].get<uint64_t>(), 1u << 20);
}

TEST_F(RemoteSource, HttpsIsVerifiedAgainstTheGivenCaFile) {
  std::string file = FileWithTensorSizes({2 << 20, 1000});
  root_.Write("tls.safetensors", file);
  RemoteOptions options = TestOptions();
  options.ca_file = testing::TestCertificate();
  auto source = Open(nginx_->TlsUrl("/tls.safetensors"), options);
  ASSERT_NE(source, nullptr);
  ASSERT_TRUE(ReadHeader(*source).ok());
  EXPECT_EQ(CheckRead(*source, file, 12345, 2 << 20), "");
}

TEST_F(RemoteSource, HttpsWithAnUntrustedCertificateIsRefused) {
  root_.Write("tls.safetensors", FileWithTensorSizes({1000}));
  StatusOr<std::unique_ptr<ByteSource>> source =
      OpenRemoteSource(nginx_->TlsUrl("/tls.safetensors"), TestOptions());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kIOError);
  EXPECT_NE(source.status().message().find("certificate"), std::string::npos)
      << source.status().message();
  EXPECT_TRUE(Logged().empty());  // no HTTP request was ever sent
}

TEST(RemoteSourceOpen, RefusedConnectionFailsAtOnce) {
  // Port 1 (tcpmux) has no listener on any machine these tests run on.
  RemoteOptions options;
  options.retry_delay = std::chrono::milliseconds(2000);  // would show if it retried
  auto start = std::chrono::steady_clock::now();
  StatusOr<std::unique_ptr<ByteSource>> source =
      OpenRemoteSource("http://127.0.0.1:1/model.safetensors", options);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kIOError);
  EXPECT_NE(source.status().message().find("http://127.0.0.1:1/model.safetensors"),
            std::string::npos);
  EXPECT_LT(seconds, 1.5);
}

TEST_F(RemoteSource, RefusesACacheThatCannotHoldTwoBlocks) {
  RemoteOptions options = TestOptions();
  options.cache_size = 1 << 20;
  options.block_size = 1 << 20;
  StatusOr<std::unique_ptr<ByteSource>> source = OpenRemoteSource(nginx_->Url("/x"), options);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stfs
