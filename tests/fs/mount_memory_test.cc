// Real mounts, daemon memory: what clients do must not grow the daemon.
// Open directory handles share one listing; slice views stay under their
// cap however many are looked up, and evicted ones come back on the next
// path walk (the kernel retries after ESTALE). RSS is the daemon's VmRSS.
//
// Through the kernel these tests look up 100,000 slice views (1,000,000
// take minutes on a loaded 2-core machine and a gigabyte of kernel dentries);
// tests/fs/slice_views_test.cc does 1,000,000 in-process.
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/fs/mount_harness.h"

namespace stfs::testing {
namespace {

using Mount = MountTest;

// VmRSS of the one daemon serving `mnt`, in bytes (0 when not found).
uint64_t DaemonRss(const std::string& mnt) {
  // Beside the daemon, libfuse's auto_unmount helper (fusermount3) names
  // the mount point too.
  std::vector<int> pids;
  for (int pid : ProcessesWithArgument(mnt)) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name == "stfs") pids.push_back(pid);
  }
  EXPECT_EQ(pids.size(), 1u) << "daemons for " << mnt;
  if (pids.size() != 1) return 0;
  std::ifstream status("/proc/" + std::to_string(pids[0]) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

double MiB(uint64_t before, uint64_t after) {
  return (static_cast<double>(after) - static_cast<double>(before)) / (1 << 20);
}

TEST_F(Mount, TwoThousandOpenRootHandlesOnAHundredThousandTensorsAddLittle) {
  constexpr int kTensors = 100000;
  constexpr int kHandles = 2000;
  rlimit files;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  if (files.rlim_cur < kHandles + 100) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, kHandles + 100);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &files), 0);
  }
  if (files.rlim_cur < kHandles + 100) GTEST_SKIP() << "RLIMIT_NOFILE hard limit " << files.rlim_max << " too low";
  std::vector<TestTensor> tensors;
  tensors.reserve(kTensors);
  for (int i = 0; i < kTensors; ++i) tensors.push_back({"model.layers." + std::to_string(i) + ".w", DType::U8, {1}, ""});
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  ASSERT_EQ(ListDir(mnt).size(), static_cast<size_t>(kTensors) + 2);  // warm: one full listing first
  const uint64_t before = DaemonRss(mnt);
  std::vector<int> fds;
  std::vector<char> buf(1 << 16);
  for (int i = 0; i < kHandles; ++i) {
    int fd = ::open(mnt.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    fds.push_back(fd);
    // Read the first entries through each handle, as `ls` would.
    ASSERT_GT(::syscall(SYS_getdents64, fd, buf.data(), buf.size()), 0) << std::strerror(errno);
  }
  const uint64_t after = DaemonRss(mnt);
  std::printf("daemon RSS: %.1f MiB with one listing, %+.1f MiB with %d more open root handles\n",
              static_cast<double>(before) / (1 << 20), MiB(before, after), kHandles);
  EXPECT_LT(after, before + (16u << 20)) << "open directory handles grew the daemon by " << MiB(before, after)
                                         << " MiB";
  for (int fd : fds) ::close(fd);
  EXPECT_EQ(ReadWholeFile(mnt + "/model.layers.99999.w/data"), tensors.back().bytes);
}

TEST_F(Mount, AHundredThousandSliceLookupsStayUnderTheCapAndStillWork) {
  std::vector<TestTensor> tensors = {{"w", DType::U8, {1000, 100}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  const std::string slices = mnt + "/w/slices/";
  struct stat st;
  ASSERT_EQ(::stat((slices + "0,0").c_str(), &st), 0);
  const uint64_t before = DaemonRss(mnt);
  for (int i = 0; i < 100000; ++i) {
    std::string spec = std::to_string(i / 100) + "," + std::to_string(i % 100);
    ASSERT_EQ(::stat((slices + spec).c_str(), &st), 0) << spec << ": " << std::strerror(errno);
  }
  const uint64_t after = DaemonRss(mnt);
  std::printf("daemon RSS: %+.1f MiB after 100,000 slice lookups\n", MiB(before, after));
  EXPECT_LT(after, before + (64u << 20)) << "slice lookups grew the daemon by " << MiB(before, after) << " MiB";
  // The daemon says how many views it holds: no more than the default cap.
  nlohmann::json stats = nlohmann::json::parse(ReadWholeFile(mnt + "/__stats__"), nullptr, false);
  ASSERT_TRUE(stats.is_object());
  EXPECT_EQ(stats["fs"]["slice_views"], 65536) << stats.dump();
  // The first views were evicted long ago (the default cap is 65536); paths
  // to them still work, and so do new ones.
  for (const char* spec : {"0,0", "0,1", "999,99", "5:7,3", "-1,:"}) {
    std::string expected;
    if (std::string(spec) == "0,0") expected = tensors[0].bytes.substr(0, 1);
    if (std::string(spec) == "0,1") expected = tensors[0].bytes.substr(1, 1);
    if (std::string(spec) == "999,99") expected = tensors[0].bytes.substr(99999, 1);
    if (std::string(spec) == "5:7,3") expected = tensors[0].bytes.substr(503, 1) + tensors[0].bytes.substr(603, 1);
    if (std::string(spec) == "-1,:") expected = tensors[0].bytes.substr(99900, 100);
    EXPECT_EQ(ReadWholeFile(slices + spec + "/data"), expected) << spec;
  }
}

TEST_F(Mount, EvictedSliceViewsComeBackOnTheNextPathWalk) {
  std::vector<TestTensor> tensors = {{"w", DType::U16, {300, 2}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)), {"-o", "max_slice_views=4"});
  ASSERT_FALSE(mnt.empty());
  const std::string slices = mnt + "/w/slices/";
  // An open file pins its view through any number of evictions.
  int pinned = ::open((slices + "7/data").c_str(), O_RDONLY);
  ASSERT_GE(pinned, 0) << std::strerror(errno);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 300; ++i) {
      std::string spec = std::to_string(i);
      EXPECT_EQ(ReadWholeFile(slices + spec + "/data"), tensors[0].bytes.substr(i * 4, 4)) << spec;
    }
  }
  char buf[8];
  ASSERT_EQ(::pread(pinned, buf, sizeof buf, 0), 4);
  EXPECT_EQ(std::string(buf, 4), tensors[0].bytes.substr(28, 4));
  ::close(pinned);
  EXPECT_EQ(ReadWholeFile(slices + "7/shape"), "[2]\n");
  // 8 was evicted long ago: its listing still holds its names, and what
  // they name is served.
  EXPECT_EQ(ListDir(slices + "8"), (std::vector<std::string>{"data", "data.npy", "dtype", "shape"}));
  struct stat data_st;
  ASSERT_EQ(::stat((slices + "8/data").c_str(), &data_st), 0) << std::strerror(errno);
  EXPECT_EQ(data_st.st_size, 4);
  EXPECT_EQ(ReadWholeFile(slices + "8/data"), tensors[0].bytes.substr(32, 4));
  // Spellings of one selection share one directory.
  struct stat a, b;
  ASSERT_EQ(::stat((slices + "0:4").c_str(), &a), 0);
  ASSERT_EQ(::stat((slices + ":4:1").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
}

}  // namespace
}  // namespace stfs::testing
