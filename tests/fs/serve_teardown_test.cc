// ServeFilesystem's teardown in-process, with a source whose data reads
// block until Shutdown(): a stop signal must cancel them (the reader gets
// EIO), end the session and remove the mount within 2 s — the adapter's
// part of "never hang", independent of any remote source.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "core/header.h"
#include "fs/filesystem.h"
#include "fs/fuse_adapter.h"
#include "tests/test_files.h"

namespace stfs {
namespace {

using Clock = std::chrono::steady_clock;

// Serves `bytes`; reads at or past `block_from` wait until Shutdown() and
// then fail, as a remote read does when the mount is torn down.
class BlockingSource : public ByteSource {
 public:
  BlockingSource(std::string bytes, uint64_t block_from) : bytes_(std::move(bytes)), block_from_(block_from) {}
  StatusOr<size_t> ReadAt(uint64_t offset, size_t length, char* dst) const override {
    if (offset >= block_from_) {
      std::unique_lock<std::mutex> lock(mu_);
      ++blocked_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return shut_down_; });
      return Status::IOError("blocking source: shut down");
    }
    if (offset >= bytes_.size()) return size_t{0};
    size_t n = std::min(length, bytes_.size() - static_cast<size_t>(offset));
    std::memcpy(dst, bytes_.data() + offset, n);
    return n;
  }
  uint64_t Size() const override { return bytes_.size(); }
  const std::string& Describe() const override { return name_; }
  void Shutdown() override {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
    cv_.notify_all();
  }
  // Waits until a read is blocked; false after `ms`.
  bool WaitForBlockedRead(int ms) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return blocked_ > 0; });
  }

 private:
  std::string bytes_;
  uint64_t block_from_;
  std::string name_ = "blocking-source";
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int blocked_ = 0;
  bool shut_down_ = false;
};

bool IsMounted(const std::string& path) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    if (line.find(" " + path + " ") != std::string::npos) return true;
  }
  return false;
}

long MsSince(Clock::time_point start) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
}

// `hold_open`: another file stays open throughout, so the kernel keeps the
// connection after the detach and the stopper must end the loop itself.
void StopsWithABlockedReader(bool single_threaded, bool hold_open) {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) GTEST_SKIP() << "no usable /dev/fuse";
  std::vector<testing::TestTensor> tensors = {{"w", DType::U8, {1 << 20}, ""}};
  std::string bytes = testing::BuildSafetensors(tensors);
  const uint64_t data_start = bytes.size() - tensors[0].bytes.size();
  auto owned = std::make_unique<BlockingSource>(bytes, data_start);
  BlockingSource* source = owned.get();
  StatusOr<Header> header = ReadHeader(*source);
  ASSERT_TRUE(header.ok()) << header.status().message();
  StatusOr<std::unique_ptr<Filesystem>> fs = Filesystem::Create(std::move(owned), std::move(*header));
  ASSERT_TRUE(fs.ok()) << fs.status().message();

  testing::TempDir dir;
  std::string mnt = dir.path() + "/mnt";
  ASSERT_EQ(::mkdir(mnt.c_str(), 0755), 0);
  ServeOptions options;
  options.mountpoint = mnt;
  options.single_threaded = single_threaded;
  options.readahead_kb = 0;
  options.on_teardown = [source] { source->Shutdown(); };
  std::promise<void> ready;
  std::future<void> ready_future = ready.get_future();
  std::promise<Status> served;
  std::future<Status> served_future = served.get_future();
  std::promise<pthread_t> serving_thread;
  std::thread server([&] {
    serving_thread.set_value(pthread_self());
    served.set_value(ServeFilesystem(**fs, options, [&](const Status& s) {
      EXPECT_TRUE(s.ok()) << s.message();
      ready.set_value();
      return true;
    }));
  });
  pthread_t serving = serving_thread.get_future().get();
  ASSERT_EQ(ready_future.wait_for(std::chrono::seconds(10)), std::future_status::ready);

  int held = hold_open ? ::open((mnt + "/w/dtype").c_str(), O_RDONLY) : -1;
  if (hold_open) {
    EXPECT_GE(held, 0) << std::strerror(errno);
  }
  std::promise<int> read_errno;
  std::future<int> read_done = read_errno.get_future();
  std::thread reader([&] {
    int fd = ::open((mnt + "/w/data").c_str(), O_RDONLY);
    if (fd < 0) return read_errno.set_value(errno);
    char buf[4096];
    ssize_t n = ::pread(fd, buf, sizeof buf, 0);
    read_errno.set_value(n < 0 ? errno : 0);
    ::close(fd);
  });
  EXPECT_TRUE(source->WaitForBlockedRead(5000)) << "the read never reached the source";

  const Clock::time_point signalled = Clock::now();
  ASSERT_EQ(pthread_kill(serving, SIGTERM), 0);
  bool read_ended = read_done.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  long read_ms = MsSince(signalled);
  bool session_ended = served_future.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  long session_ms = MsSince(signalled);
  EXPECT_TRUE(read_ended);
  if (read_ended) {
    EXPECT_EQ(read_done.get(), EIO);
  }
  EXPECT_LE(read_ms, 2000);
  EXPECT_TRUE(session_ended) << "ServeFilesystem did not return after SIGTERM";
  EXPECT_LE(session_ms, 2000);
  EXPECT_FALSE(IsMounted(mnt)) << "the mount is still there after SIGTERM";
  if (!session_ended) {
    source->Shutdown();  // let the threads go before failing out
    ::system(("fusermount3 -u -z " + mnt).c_str());
  }
  reader.join();
  server.join();
  if (session_ended) {
    EXPECT_TRUE(served_future.get().ok());
  }
  if (held >= 0) {
    char c;
    EXPECT_LT(::read(held, &c, 1), 0) << "a file left open reads nothing from a torn-down mount";
    ::close(held);
  }
}

TEST(ServeTeardown, SigtermCancelsABlockedReadAndUnmountsWithin2s) { StopsWithABlockedReader(false, false); }

TEST(ServeTeardown, SigtermCancelsABlockedReadSingleThreaded) { StopsWithABlockedReader(true, false); }

TEST(ServeTeardown, SigtermEndsTheSessionWhileAnotherFileStaysOpen) { StopsWithABlockedReader(false, true); }

TEST(ServeTeardown, SigtermEndsTheSingleThreadedSessionWhileAnotherFileStaysOpen) {
  StopsWithABlockedReader(true, true);
}

}  // namespace
}  // namespace stfs
