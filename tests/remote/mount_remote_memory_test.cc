// A remote mount's memory is bounded by its options, not by its readers: 16
// threads read all of a 2 GiB tensor (a sparse file served by nginx) and the
// daemon's peak RSS (VmHWM) stays under cache_size + 32 MiB. The 32 MiB cover
// the FUSE threads' reply buffers (one read each), libfuse and the program.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "tests/fs/mount_harness.h"
#include "tests/remote/test_servers.h"

namespace stfs::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// A field of /proc/PID/status of the stfs daemon serving `mnt`, in bytes.
uint64_t DaemonStatusBytes(const std::string& mnt, const std::string& field) {
  for (int pid : ProcessesWithArgument(mnt)) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name != "stfs") continue;  // (libfuse's auto_unmount helper names it too)
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
    }
  }
  return 0;
}

// Writes a safetensors file with one U8 tensor of `bytes` zero bytes, sparse.
void WriteSparseModel(const std::string& path, uint64_t bytes) {
  std::string header = "{\"t\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(bytes) +
                       "],\"data_offsets\":[0," + std::to_string(bytes) + "]}}";
  while (header.size() % 8 != 0) header.push_back(' ');
  std::string prefix(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>(n >> (8 * i));
  prefix += header;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, prefix.data(), prefix.size()), static_cast<ssize_t>(prefix.size()));
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(prefix.size() + bytes)), 0);
  ::close(fd);
}

class RemoteMountMemory : public MountTest {};

TEST_F(RemoteMountMemory, SixteenReadersOfATwoGiBTensorStayUnderCacheSizePlus32MiB) {
  constexpr uint64_t kTensor = 2048 * kMiB;
  constexpr uint64_t kCache = 64 * kMiB;
  constexpr int kReaders = 16;
  ASSERT_NO_FATAL_FAILURE(WriteSparseModel(dir_.path() + "/big.safetensors", kTensor));
  std::string error;
  auto nginx = NginxServer::Start(dir_.path(), &error);
  ASSERT_NE(nginx, nullptr) << error;
  std::string mnt = MountFile(nginx->Url("/big.safetensors"), {"-o", "cache_size=64M"});
  ASSERT_FALSE(mnt.empty());
  const std::string data = mnt + "/t/data";
  std::atomic<uint64_t> bad{0};
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      int fd = ::open(data.c_str(), O_RDONLY);
      if (fd < 0) return (void)bad.fetch_add(1);
      std::vector<char> buf(kMiB);
      const uint64_t share = kTensor / kReaders;
      for (uint64_t off = r * share; off < (r + 1) * share; off += buf.size()) {
        ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(off));
        if (n != static_cast<ssize_t>(buf.size())) {
          bad.fetch_add(1);
          break;
        }
        for (size_t i = 0; i < buf.size(); i += 4096) {
          if (buf[i] != 0) bad.fetch_add(1);
        }
        total.fetch_add(static_cast<uint64_t>(n));
      }
      ::close(fd);
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(total.load(), kTensor);
  uint64_t peak = DaemonStatusBytes(mnt, "VmHWM");
  ASSERT_GT(peak, 0u);
  std::printf("daemon peak RSS %.1f MiB with cache_size=64M, %d readers of a 2 GiB tensor\n",
              static_cast<double>(peak) / kMiB, kReaders);
  EXPECT_LT(peak, kCache + 32 * kMiB);
}

}  // namespace
}  // namespace stfs::testing
