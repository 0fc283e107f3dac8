// Real mounts, reading: dd with skip/count, a python3 reader (plain reads and
// mmap), C++ mmap, reads at and past the end, 8 concurrent readers at random
// offsets with both read replies, the kernel read-ahead setting, and the
// real-world fixtures byte for byte.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "tests/fs/mount_harness.h"

namespace stfs::testing {
namespace {

using Mount = MountTest;

constexpr uint64_t kMiB = 1 << 20;

// A file with one few-MiB tensor between two small ones, so that `data`
// starts at an offset that is not page-aligned in the source.
std::vector<TestTensor> FewMiBTensors(uint64_t big_bytes) {
  return {{"head", DType::U8, {13}, ""}, {"big", DType::U8, {big_bytes}, ""}, {"tail", DType::I16, {3}, ""}};
}

TEST_F(Mount, DdWithSkipAndCountMatchesTheFile) {
  std::vector<TestTensor> tensors = FewMiBTensors(5 * kMiB + 777);
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  const std::string& want = tensors[1].bytes;
  struct Case { uint64_t bs, skip, count; };
  for (Case c : {Case{kMiB, 2, 2}, Case{kMiB, 4, 10}, Case{kMiB, 0, 1}, Case{4096, 3, 5}, Case{512, 10241, 3},
                 Case{65536, 79, 2}, Case{1, 1000, 10}}) {
    SCOPED_TRACE("bs=" + std::to_string(c.bs) + " skip=" + std::to_string(c.skip) + " count=" + std::to_string(c.count));
    std::string out = dir_.path() + "/dd.out";
    CommandResult r = RunCommand({"dd", "if=" + mnt + "/big/data", "of=" + out, "bs=" + std::to_string(c.bs),
                                  "skip=" + std::to_string(c.skip), "count=" + std::to_string(c.count), "status=none"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    uint64_t begin = std::min<uint64_t>(c.bs * c.skip, want.size());
    uint64_t end = std::min<uint64_t>(c.bs * (c.skip + c.count), want.size());
    std::string got = ReadWholeFile(out);
    EXPECT_EQ(got.size(), end - begin);
    EXPECT_TRUE(got == want.substr(begin, end - begin)) << "dd output differs from the file";
  }
}

TEST_F(Mount, PythonReaderWithReadAndMmapMatchesTheFile) {
  std::vector<TestTensor> tensors = FewMiBTensors(3 * kMiB + 5);
  tensors.push_back({"odd/name%", DType::F64, {2, 3}, ""});
  tensors.push_back({"", DType::BF16, {}, ""});
  tensors.push_back({"empty", DType::F32, {0, 7}, ""});
  std::string src = WriteSource(BuildSafetensors(tensors, R"({"format":"pt"})"));
  std::string mnt = MountFile(src);
  ASSERT_FALSE(mnt.empty());
  CommandResult py = RunCommand({"python3", HelperScript("verify_mount.py"), src, mnt}, 60000);
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
  EXPECT_NE(py.out.find("ok: 6 tensors"), std::string::npos) << py.out;
}

TEST_F(Mount, MmapOfDataMatchesTheFile) {
  std::vector<TestTensor> tensors = FewMiBTensors(2 * kMiB + 4095);
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  const std::string& want = tensors[1].bytes;
  int fd = ::open((mnt + "/big/data").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  void* map = ::mmap(nullptr, want.size(), PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
  EXPECT_EQ(std::memcmp(map, want.data(), want.size()), 0);
  ::munmap(map, want.size());
  const long page = ::sysconf(_SC_PAGESIZE);
  map = ::mmap(nullptr, static_cast<size_t>(page), PROT_READ, MAP_PRIVATE, fd, 3 * page);
  ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
  EXPECT_EQ(std::memcmp(map, want.data() + 3 * page, static_cast<size_t>(page)), 0);
  ::munmap(map, static_cast<size_t>(page));
  ::close(fd);
}

TEST_F(Mount, ReadsAtAndPastTheEndReturnNothing) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {10}, ""}, {"e", DType::U8, {0}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  char buf[64];
  int fd = ::open((mnt + "/w/data").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::pread(fd, buf, sizeof buf, 40), 0);
  EXPECT_EQ(::pread(fd, buf, sizeof buf, 41), 0);
  EXPECT_EQ(::pread(fd, buf, sizeof buf, 1 << 30), 0);
  ASSERT_EQ(::pread(fd, buf, sizeof buf, 30), 10);  // a read crossing the end is short
  EXPECT_EQ(std::string(buf, 10), tensors[0].bytes.substr(30));
  ::close(fd);
  fd = ::open((mnt + "/e/data").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::pread(fd, buf, sizeof buf, 0), 0);
  ::close(fd);
  fd = ::open((mnt + "/w/dtype").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pread(fd, buf, sizeof buf, 1), 3);
  EXPECT_EQ(std::string(buf, 3), "32\n");
  EXPECT_EQ(::pread(fd, buf, sizeof buf, 4), 0);
  ::close(fd);
}

// Mount options for each way of answering reads.
class MountReadReply : public MountTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(MountReadReply, EightConcurrentReadersAtRandomOffsetsAreByteExact) {
  std::vector<TestTensor> tensors = FewMiBTensors(6 * kMiB + 12345);
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)), {"-o", std::string("read_reply=") + GetParam()});
  ASSERT_FALSE(mnt.empty());
  const std::string& want = tensors[1].bytes;
  const std::string path = mnt + "/big/data";
  int shared_fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(shared_fd, 0);
  std::atomic<int> mismatches{0}, errors{0}, reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      // Half the readers share one descriptor, half open their own.
      int fd = t % 2 == 0 ? shared_fd : ::open(path.c_str(), O_RDONLY);
      if (fd < 0) { errors++; return; }
      std::mt19937_64 rng(static_cast<uint64_t>(t) * 7919 + 1);
      std::vector<char> buf(3 * kMiB / 2);
      for (int i = 0; i < 120; ++i) {
        // Evict the page cache now and then so the daemon serves reads, not the kernel.
        if (i % 8 == 0) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        uint64_t off = rng() % (want.size() + 4096);
        size_t len = 1 + rng() % buf.size();
        ssize_t n = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
        reads++;
        if (n < 0) { errors++; continue; }
        uint64_t expect = off >= want.size() ? 0 : std::min<uint64_t>(len, want.size() - off);
        if (static_cast<uint64_t>(n) != expect || std::memcmp(buf.data(), want.data() + std::min<uint64_t>(off, want.size()), expect) != 0) {
          mismatches++;
        }
      }
      if (fd != shared_fd) ::close(fd);
    });
  }
  for (std::thread& th : threads) th.join();
  ::close(shared_fd);
  EXPECT_EQ(reads.load(), 8 * 120);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  // The small neighbours are still right after all that.
  ExpectTensorServed(mnt, tensors[0]);
  ExpectTensorServed(mnt, tensors[2]);
}

TEST_P(MountReadReply, SourceShrunkUnderTheMountIsEioAndTheMountStaysUp) {
  std::vector<TestTensor> tensors = FewMiBTensors(3 * kMiB);
  std::string source = WriteSource(BuildSafetensors(tensors));
  std::string mnt = MountFile(source, {"-o", std::string("read_reply=") + GetParam()});
  ASSERT_FALSE(mnt.empty());
  struct stat st;
  ASSERT_EQ(::stat(source.c_str(), &st), 0);
  // Cut the file in the middle of the big tensor.
  ASSERT_EQ(::truncate(source.c_str(), st.st_size - static_cast<off_t>(2 * kMiB)), 0);
  int fd = ::open((mnt + "/big/data").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<char> buf(tensors[1].bytes.size());
  ssize_t total = 0;
  int error = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf.data() + total, buf.size() - static_cast<size_t>(total));
    if (n < 0) { error = errno; break; }
    if (n == 0) break;
    total += n;
  }
  ::close(fd);
  EXPECT_EQ(error, EIO) << "read " << total << " bytes, then " << (error ? std::strerror(error) : "end of file");
  // Whatever was returned before the error is the file's bytes, and the size never changed.
  EXPECT_EQ(std::memcmp(buf.data(), tensors[1].bytes.data(), static_cast<size_t>(total)), 0);
  ASSERT_EQ(::stat((mnt + "/big/data").c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), tensors[1].bytes.size());
  // The mount still answers; the first tensor still reads.
  ExpectTensorServed(mnt, tensors[0]);
}

INSTANTIATE_TEST_SUITE_P(Mount, MountReadReply, ::testing::Values("pread", "splice"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

TEST_F(Mount, ReadaheadOfTheMountIsRaised) {
  std::vector<TestTensor> tensors = {{"w", DType::F32, {4}, ""}};
  std::string src = WriteSource(BuildSafetensors(tensors));
  auto readahead_of = [](const std::string& mnt) {
    std::string device = MountDevice(mnt);
    EXPECT_FALSE(device.empty()) << mnt;
    std::ifstream in("/sys/class/bdi/" + device + "/read_ahead_kb");
    long kb = -1;
    in >> kb;
    return kb;
  };
  std::string by_default = MountFile(src);
  ASSERT_FALSE(by_default.empty());
  EXPECT_EQ(readahead_of(by_default), 4096);
  std::string chosen = MountFile(src, {"-o", "readahead_kb=1024"});
  ASSERT_FALSE(chosen.empty());
  EXPECT_EQ(readahead_of(chosen), 1024);
}

TEST_F(Mount, StatsFileCountsBytesServed) {
  std::vector<TestTensor> tensors = FewMiBTensors(kMiB);
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  auto bytes_read = [&] {
    nlohmann::json stats = nlohmann::json::parse(ReadWholeFile(mnt + "/__stats__"), nullptr, false);
    EXPECT_TRUE(stats.is_object());
    return stats.is_object() ? stats["fs"]["bytes_read"].get<uint64_t>() : 0;
  };
  uint64_t before = bytes_read();
  EXPECT_EQ(ReadWholeFile(mnt + "/big/data"), tensors[1].bytes);
  EXPECT_GE(bytes_read() - before, kMiB);
}

// A tensor entry of a fixture's header, parsed here with nlohmann (not core).
struct FixtureTensor {
  std::string name, dtype, shape;
  uint64_t begin = 0, end = 0;
};

TEST_F(Mount, RealFixturesAreByteExact) {
  const std::string dir = RealFixturesDir();
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) GTEST_SKIP() << "real fixtures not found at " << dir << " (../shared/fixtures/real)";
  std::vector<std::string> files;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > 12 && name.substr(name.size() - 12) == ".safetensors") files.push_back(dir + "/" + name);
  }
  ::closedir(d);
  if (files.empty()) GTEST_SKIP() << "no .safetensors files in " << dir;
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    std::string bytes = ReadWholeFile(file);
    ASSERT_GE(bytes.size(), 8u);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
    std::vector<TestTensor> tensors;
    std::vector<FixtureTensor> entries;
    for (const auto& [name, info] : header.items()) {
      if (name == "__metadata__") continue;
      FixtureTensor t{name, info["dtype"].get<std::string>(), info["shape"].dump(), info["data_offsets"][0].get<uint64_t>(),
                      info["data_offsets"][1].get<uint64_t>()};
      entries.push_back(t);
    }
    std::string mnt = MountFile(file);
    ASSERT_FALSE(mnt.empty());
    std::vector<std::string> want_root = {"__metadata__", "__stats__"};
    for (const FixtureTensor& t : entries) want_root.push_back(ExpectedDirName(t.name));
    std::sort(want_root.begin(), want_root.end());
    EXPECT_EQ(ListDir(mnt), want_root);
    for (const FixtureTensor& t : entries) {
      std::string tdir = mnt + "/" + ExpectedDirName(t.name);
      EXPECT_EQ(ReadWholeFile(tdir + "/dtype"), t.dtype + "\n") << t.name;
      EXPECT_EQ(ReadWholeFile(tdir + "/shape"), t.shape + "\n") << t.name;
      EXPECT_TRUE(ReadWholeFile(tdir + "/data") == bytes.substr(8 + n + t.begin, t.end - t.begin)) << t.name;
    }
    nlohmann::json metadata = header.contains("__metadata__") && !header["__metadata__"].is_null()
                                  ? header["__metadata__"] : nlohmann::json::object();
    EXPECT_EQ(nlohmann::json::parse(ReadWholeFile(mnt + "/__metadata__")), metadata);
    CommandResult py = RunCommand({"python3", HelperScript("verify_mount.py"), file, mnt}, 60000);
    EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
    EXPECT_TRUE(Unmount(mnt));
  }
}

}  // namespace
}  // namespace stfs::testing
