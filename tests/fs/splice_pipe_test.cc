// SplicePipe: exact bytes from a file, EIO when the file ends early.
#include "fs/splice_pipe.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "tests/test_files.h"

namespace stfs {
namespace {

std::string Drain(int fd, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, out.data() + got, n - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

TEST(SplicePipe, FillsExactBytesFromAnOffset) {
  testing::TempDir dir;
  std::string bytes = testing::RandomBytes(3 << 20);
  int fd = ::open(dir.Write("f", bytes).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  SplicePipe pipe;
  ASSERT_GE(pipe.capacity(), size_t{kSpliceableReadBytes});
  ASSERT_TRUE(pipe.Fill(fd, 12345, kSpliceableReadBytes));
  EXPECT_EQ(Drain(pipe.read_end(), kSpliceableReadBytes), bytes.substr(12345, kSpliceableReadBytes));
  ASSERT_TRUE(pipe.Fill(fd, 7, 100));
  EXPECT_EQ(Drain(pipe.read_end(), 100), bytes.substr(7, 100));
  ::close(fd);
}

TEST(SplicePipe, ShortFileIsEioAndResetEmptiesThePipe) {
  testing::TempDir dir;
  std::string bytes = testing::RandomBytes(5000);
  int fd = ::open(dir.Write("f", bytes).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  SplicePipe pipe;
  EXPECT_FALSE(pipe.Fill(fd, 1000, 8000));
  EXPECT_EQ(errno, EIO);
  pipe.Reset();
  ASSERT_TRUE(pipe.Fill(fd, 0, 10));
  EXPECT_EQ(Drain(pipe.read_end(), 10), bytes.substr(0, 10));
  EXPECT_FALSE(pipe.Fill(fd, 0, pipe.capacity() + 1));
  ::close(fd);
}

}  // namespace
}  // namespace stfs
