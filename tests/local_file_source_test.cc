// LocalFileSource: pread semantics, concurrency, shrinking files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "core/byte_source.h"
#include "tests/test_files.h"

namespace stfs {
namespace {

using testing::RandomBytes;
using testing::TempDir;

TEST(LocalFileSource, ReadsExactBytesAndStopsAtEnd) {
  TempDir dir;
  std::string bytes = RandomBytes(10000);
  auto source = OpenLocalFile(dir.Write("f", bytes));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->Size(), 10000u);
  std::string buf(4000, '\0');
  auto n = (*source)->ReadAt(9000, 4000, buf.data());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1000u);
  EXPECT_EQ(buf.substr(0, 1000), bytes.substr(9000));
  n = (*source)->ReadAt(10000, 10, buf.data());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  EXPECT_GE((*source)->FileDescriptor(), 0);
}

TEST(LocalFileSource, MissingFileIsNotFoundNamingThePath) {
  auto source = OpenLocalFile("/nonexistent/stfs/file.safetensors");
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kNotFound);
  EXPECT_NE(source.status().message().find("/nonexistent/stfs/file.safetensors"), std::string::npos);
}

TEST(LocalFileSource, DirectoryIsRefused) {
  TempDir dir;
  auto source = OpenLocalFile(dir.path());
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find("directory"), std::string::npos);
}

TEST(LocalFileSource, FileShrunkUnderUsIsAnErrorNotACrash) {
  TempDir dir;
  std::string path = dir.Write("f", RandomBytes(8192));
  auto source = OpenLocalFile(path);
  ASSERT_TRUE(source.ok());
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  std::string buf(8192, '\0');
  auto n = (*source)->ReadAt(0, 8192, buf.data());
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kIOError);
  EXPECT_NE(n.status().message().find("shrank"), std::string::npos);
}

TEST(LocalFileSource, ConcurrentReadersGetExactBytes) {
  TempDir dir;
  std::string bytes = RandomBytes(1 << 20);
  auto source = OpenLocalFile(dir.Write("f", bytes));
  ASSERT_TRUE(source.ok());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::string buf(65536, '\0');
      for (int i = 0; i < 200; ++i) {
        uint64_t off = rng() % bytes.size();
        size_t len = rng() % buf.size();
        auto n = (*source)->ReadAt(off, len, buf.data());
        size_t want = std::min<uint64_t>(len, bytes.size() - off);
        if (!n.ok() || *n != want || buf.compare(0, want, bytes, off, want) != 0) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ReadExactly, ShortSourceIsAnErrorNamingTheSource) {
  TempDir dir;
  std::string path = dir.Write("f", RandomBytes(10));
  auto source = OpenLocalFile(path);
  ASSERT_TRUE(source.ok());
  char buf[20];
  Status s = ReadExactly(**source, 5, 20, buf);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos);
}

}  // namespace
}  // namespace stfs
