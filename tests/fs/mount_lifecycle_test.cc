// The mount's life around the stfs command: SIGTERM with a reader stuck on
// a remote source that never answers (unmounted within 2 s, the reader
// gets EIO), a daemon killed with SIGKILL (auto_unmount removes the mount),
// an `stfs` command killed before the mount was ready (the daemon mounts
// nothing), relative paths taken from the caller's directory, and mount(8)
// itself: `mount -t fuse.stfs` through mount.fuse3 with the generic options.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "tests/fs/mount_harness.h"

namespace stfs::testing {
namespace {

using Clock = std::chrono::steady_clock;
using Mount = MountTest;

long MsSince(Clock::time_point start) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
}

bool StfsHasRemote() { return RunCommand({StfsBinary(), "--help"}).out.find("http") != std::string::npos; }

// tests/fs/slow_http_server.py serving `file`, killed on destruction.
class SlowServer {
 public:
  SlowServer(MountTest* test, const std::string& file, const std::vector<std::string>& flags) {
    log_ = test->dir_.path() + "/server" + std::to_string(++count_) + ".out";
    std::vector<std::string> argv = {"python3", HelperScript("slow_http_server.py"), file};
    argv.insert(argv.end(), flags.begin(), flags.end());
    pid_ = Spawn(argv, log_);
    for (int i = 0; i < 200 && pid_ > 0 && port_.empty(); ++i) {
      std::string out = ReadWholeFile(log_);
      if (out.find('\n') != std::string::npos) port_ = out.substr(0, out.find('\n'));
      else ::usleep(25000);
    }
  }
  ~SlowServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      WaitForExit(pid_, 5000);
    }
  }
  bool ok() const { return !port_.empty(); }
  std::string Url(const std::string& scheme = "http") const {
    return scheme + "://127.0.0.1:" + port_ + "/model.safetensors";
  }
  std::string Output() const { return ReadWholeFile(log_); }

 private:
  static inline int count_ = 0;
  std::string log_;
  std::string port_;
  int pid_ = -1;
};

// A model whose tensor "w" is 16 MiB; its header and first bytes are served,
// reads from 8 MiB into the file on never answer.
constexpr uint64_t kStallFrom = 8u << 20;
std::vector<TestTensor> BigTensor() { return {{"w", DType::U8, {16u << 20}, ""}}; }

// BigTensor's model served by a SlowServer that never answers reads from
// kStallFrom on, mounted with `stfs -f` with retries and stalls long enough
// that only teardown can end such a read. pid is 0 when it did not mount.
struct StallingMount {
  explicit StallingMount(MountTest* test)
      : tensors(BigTensor()),
        server(test, test->WriteSource(BuildSafetensors(tensors)), {"--stall-from", std::to_string(kStallFrom)}),
        mnt(test->NewMountpoint()),
        log(test->dir_.path() + "/foreground.log") {
    if (!server.ok()) return;
    pid = Spawn({StfsBinary(), "-f", "-o", "block_size=1M,readahead=0,stall_timeout=60s,retries=0", server.Url(), mnt},
                log);
    if (pid > 0 && !WaitForMount(mnt, 15000)) {
      ::kill(pid, SIGKILL);
      WaitForExit(pid, 5000);
      pid = 0;
    }
  }
  std::vector<TestTensor> tensors;
  SlowServer server;
  std::string mnt;
  std::string log;
  int pid = 0;
};

TEST_F(Mount, SigtermUnmountsWithin2sWhileAReaderIsBlockedAndTheReaderGetsEio) {
  if (!StfsHasRemote()) GTEST_SKIP() << "stfs was built without remote sources";
  StallingMount stalling(this);
  ASSERT_TRUE(stalling.server.ok()) << stalling.server.Output();
  ASSERT_GT(stalling.pid, 0) << "stfs -f did not mount: " << ReadWholeFile(stalling.log);
  const std::string& mnt = stalling.mnt;
  const std::string& log = stalling.log;
  const int pid = stalling.pid;
  std::promise<int> read_errno;
  std::future<int> reader_done = read_errno.get_future();
  std::thread reader([&] {
    int fd = ::open((mnt + "/w/data").c_str(), O_RDONLY);
    if (fd < 0) return read_errno.set_value(errno);
    char buf[4096];
    ssize_t n = ::pread(fd, buf, sizeof buf, 12 << 20);
    read_errno.set_value(n < 0 ? errno : 0);
    ::close(fd);
  });
  // The reader is stuck on the server.
  EXPECT_EQ(reader_done.wait_for(std::chrono::milliseconds(1500)), std::future_status::timeout)
      << "the read was expected to block on the stalled server";
  const Clock::time_point signalled = Clock::now();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  while (IsMounted(mnt) && MsSince(signalled) < 10000) ::usleep(10000);
  long unmounted_ms = MsSince(signalled);
  RecordProperty("unmounted_ms", static_cast<int>(unmounted_ms));
  EXPECT_FALSE(IsMounted(mnt));
  EXPECT_LE(unmounted_ms, 2000) << "SIGTERM took " << unmounted_ms << " ms to remove the mount";
  bool reader_finished = reader_done.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  long reader_ms = MsSince(signalled);
  RecordProperty("reader_ms", static_cast<int>(reader_ms));
  EXPECT_TRUE(reader_finished) << "the blocked reader never returned";
  if (reader_finished) {
    EXPECT_EQ(reader_done.get(), EIO) << "the cancelled read must fail with EIO";
    EXPECT_LE(reader_ms, 2500) << "the blocked read ended " << reader_ms << " ms after SIGTERM";
  }
  EXPECT_EQ(WaitForExit(pid, 10000), 0) << ReadWholeFile(log);
  if (!reader_finished) {
    Unmount(mnt);  // lets a stuck reader go before the thread is joined
  }
  reader.join();
}

// The session loop's leader answers metadata itself and hands reads to
// other workers (fs/fuse_loop.cc): a read stuck on its source must leave
// listings, stats and other reads answered.
TEST_F(Mount, AReadBlockedOnItsSourceLeavesTheOtherRequestsAnswered) {
  if (!StfsHasRemote()) GTEST_SKIP() << "stfs was built without remote sources";
  StallingMount stalling(this);
  ASSERT_TRUE(stalling.server.ok()) << stalling.server.Output();
  ASSERT_GT(stalling.pid, 0) << "stfs -f did not mount: " << ReadWholeFile(stalling.log);
  const std::string& mnt = stalling.mnt;
  const std::string& log = stalling.log;
  const int pid = stalling.pid;
  std::future<void> stuck = std::async(std::launch::async, [&] {
    int fd = ::open((mnt + "/w/data").c_str(), O_RDONLY);
    if (fd < 0) return;
    char buf[4096];
    (void)::pread(fd, buf, sizeof buf, 12 << 20);
    ::close(fd);
  });
  ASSERT_EQ(stuck.wait_for(std::chrono::milliseconds(1500)), std::future_status::timeout)
      << "the read was expected to block on the stalled server";
  // Everything else, while that read waits on the server.
  std::future<std::string> others = std::async(std::launch::async, [&]() -> std::string {
    struct stat st;
    if (::stat((mnt + "/w/shape").c_str(), &st) != 0) return std::string("stat: ") + std::strerror(errno);
    std::string listing = RunCommand({"ls", "-l", mnt + "/w"}).out;
    if (listing.find("data.npy") == std::string::npos) return "listing: " + listing;
    int fd = ::open((mnt + "/w/data").c_str(), O_RDONLY);
    if (fd < 0) return std::string("open: ") + std::strerror(errno);
    std::string head(4096, '\0');
    ssize_t n = ::pread(fd, head.data(), head.size(), 0);
    ::close(fd);
    if (n != static_cast<ssize_t>(head.size())) return "short read of the first bytes";
    return head == stalling.tensors[0].bytes.substr(0, head.size()) ? "" : "wrong bytes";
  });
  const bool answered = others.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  EXPECT_TRUE(answered) << "a read blocked on its source held up the mount's other requests";
  // Teardown ends the stuck read (and anything else still waiting).
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitForExit(pid, 10000), 0) << ReadWholeFile(log);
  if (answered) {
    EXPECT_EQ(others.get(), "");
  }
  if (IsMounted(mnt)) Unmount(mnt);
}

TEST_F(Mount, SigkilledDaemonLeavesNoMountBehind) {
  std::vector<TestTensor> tensors = {{"w", DType::U8, {64}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)));
  ASSERT_FALSE(mnt.empty());
  std::vector<int> daemons = ProcessesWithArgument(mnt, "stfs");
  ASSERT_EQ(daemons.size(), 1u);
  ASSERT_EQ(::kill(daemons[0], SIGKILL), 0);
  const Clock::time_point killed = Clock::now();
  // fusermount3's auto_unmount helper unmounts once it sees the daemon's
  // /dev/fuse fd close: about 0.1 s, but once over 5 s under a loaded
  // 2-core ASan run, so the wait is generous (it ends as soon as it is gone).
  while (IsMounted(mnt) && MsSince(killed) < 20000) ::usleep(20000);
  EXPECT_FALSE(IsMounted(mnt)) << "a SIGKILLed daemon left its mount behind (auto_unmount)";
}

TEST_F(Mount, NoautoUnmountLeavesTheDeadMountToTheAdministrator) {
  std::vector<TestTensor> tensors = {{"w", DType::U8, {64}, ""}};
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)), {"-o", "noauto_unmount"});
  ASSERT_FALSE(mnt.empty());
  std::vector<int> daemons = ProcessesWithArgument(mnt, "stfs");
  ASSERT_EQ(daemons.size(), 1u);
  ASSERT_EQ(::kill(daemons[0], SIGKILL), 0);
  ::usleep(1000 * 1000);
  int fd = ::open((mnt + "/w/data").c_str(), O_RDONLY);
  EXPECT_LT(fd, 0);
  EXPECT_EQ(errno, ENOTCONN) << "a dead FUSE mount answers ENOTCONN";
  if (fd >= 0) ::close(fd);
  EXPECT_TRUE(IsMounted(mnt)) << "with noauto_unmount the dead mount stays until fusermount3 -u";
  // TearDown removes it.
}

TEST_F(Mount, DaemonWhoseCommandWasKilledBeforeReadyMountsNothing) {
  if (!StfsHasRemote()) GTEST_SKIP() << "stfs was built without remote sources";
  std::vector<TestTensor> tensors = {{"w", DType::U8, {64}, ""}};
  std::string src = WriteSource(BuildSafetensors(tensors));
  SlowServer server(this, src, {"--delay", "2"});
  ASSERT_TRUE(server.ok()) << server.Output();
  std::string mnt = NewMountpoint();
  int pid = Spawn({StfsBinary(), server.Url(), mnt}, dir_.path() + "/killed.log");
  ASSERT_GT(pid, 0);
  ::usleep(500 * 1000);  // the daemon is now waiting for the header
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  WaitForExit(pid, 5000);
  const Clock::time_point killed = Clock::now();
  // The daemon gets its header after the delay, then must give up.
  while (!ProcessesWithArgument(mnt, "stfs").empty() && MsSince(killed) < 15000) ::usleep(50000);
  EXPECT_TRUE(ProcessesWithArgument(mnt, "stfs").empty()) << "the daemon outlived its command by 15 s";
  EXPECT_FALSE(IsMounted(mnt)) << "the daemon mounted after its command was killed";
}

TEST_F(Mount, RelativePathsAreTakenFromTheCallersDirectory) {
  std::vector<TestTensor> tensors = {{"w", DType::U8, {16}, ""}};
  WriteSource(BuildSafetensors(tensors), "rel.safetensors");
  std::string mnt = NewMountpoint();
  std::string mnt_name = mnt.substr(mnt.rfind('/') + 1);
  std::string log_name = "rel-" + std::to_string(::getpid()) + ".log";
  // The command runs from the temp dir, with every path relative to it.
  CommandResult r = RunCommand({"/bin/sh", "-c", "cd \"$1\" && exec \"$2\" rel.safetensors \"$3\" -o log=\"$4\"", "sh",
                                dir_.path(), StfsBinary(), mnt_name, log_name});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(mnt + "/w/data"), tensors[0].bytes);
  ASSERT_TRUE(Unmount(mnt));
  struct stat st;
  EXPECT_EQ(::stat((dir_.path() + "/" + log_name).c_str(), &st), 0) << "log= was not created in the caller's directory";
  EXPECT_NE(::stat(("/" + log_name).c_str(), &st), 0) << "log= landed in /";
  ::unlink(("/" + log_name).c_str());
}

// curl opens -o cafile= when it connects, which for data reads is after the
// daemon changed to `/`: a relative path must have been made absolute.
TEST_F(Mount, RelativeCafileIsTakenFromTheCallersDirectory) {
  if (!StfsHasRemote()) GTEST_SKIP() << "stfs was built without remote sources";
  std::vector<TestTensor> tensors = {{"w", DType::U8, {3u << 20}, ""}};
  std::string src = WriteSource(BuildSafetensors(tensors));
  const std::string testdata = std::string(STFS_SOURCE_DIR) + "/tests/remote/testdata";
  WriteSource(ReadWholeFile(testdata + "/localhost.crt"), "ca.pem");
  SlowServer server(this, src, {"--tls", testdata + "/localhost.crt", testdata + "/localhost.key"});
  ASSERT_TRUE(server.ok()) << server.Output();
  std::string mnt = NewMountpoint();
  std::string mnt_name = mnt.substr(mnt.rfind('/') + 1);
  // Small blocks and no read-ahead: the data is fetched by reads after the mount.
  // No retries: a TLS failure fails the read at once.
  const std::string options = "cafile=ca.pem,block_size=1M,readahead=0,retries=0";
  CommandResult r = RunCommand({"/bin/sh", "-c", "cd \"$1\" && exec \"$2\" -o \"$3\" \"$4\" \"$5\"", "sh",
                                dir_.path(), StfsBinary(), options, server.Url("https"), mnt_name});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string data = ReadWholeFile(mnt + "/w/data");
  EXPECT_TRUE(data == tensors[0].bytes) << "read " << data.size() << " of " << tensors[0].bytes.size()
                                        << " bytes, or different ones, through TLS with the relative cafile";
}

// mount(8) clears PATH, so mount.fuse3's shell finds `stfs` only in the
// default directories. The test runs in a private mount namespace (unshare
// -m) with a directory holding `stfs` bound over /usr/local/bin, and checks
// the mount from inside it; nothing of it is visible outside.
TEST_F(Mount, MountTypeFuseStfsWorksThroughMountFuse3WithGenericOptions) {
  if (::geteuid() != 0) GTEST_SKIP() << "mount(8) needs root";
  if (::access("/sbin/mount.fuse3", X_OK) != 0 && ::access("/usr/sbin/mount.fuse3", X_OK) != 0) {
    FAIL() << "mount.fuse3 is missing (fuse3 package; scripts/setup.sh installs it)";
  }
  std::vector<TestTensor> tensors = {{"w", DType::F32, {8}, ""}};
  std::string src = WriteSource(BuildSafetensors(tensors));
  std::string mnt = NewMountpoint();
  std::string bin = dir_.path() + "/bin";
  ASSERT_EQ(::mkdir(bin.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(StfsBinary().c_str(), (bin + "/stfs").c_str()), 0);
  const std::string script =
      "set -u\n"
      "mount --bind \"$1\" /usr/local/bin || exit 90\n"
      "mount -t fuse.stfs -o rw,defaults,nodev,nosuid,noexec,_netdev,nofail,noatime \"$2\" \"$3\" || exit 91\n"
      "cat \"$3/w/data\" > \"$4/data.out\"\n"
      "grep \" $3 \" /proc/self/mountinfo > \"$4/mountinfo.out\"\n"
      "if ( : > \"$3/w/data\" ) 2>/dev/null; then echo writable > \"$4/write.out\"; fi\n"
      "umount \"$3\" || exit 92\n"
      "grep -c \" $3 \" /proc/self/mountinfo > \"$4/after.out\"\n"
      "exit 0\n";
  CommandResult r = RunCommand({"unshare", "-m", "sh", "-c", script, "sh", bin, src, mnt, dir_.path()}, 30000);
  ASSERT_EQ(r.exit_code, 0) << "90: bind, 91: mount -t fuse.stfs, 92: umount failed\n" << r.err << r.out;
  EXPECT_EQ(ReadWholeFile(dir_.path() + "/data.out"), tensors[0].bytes);
  std::string mountinfo = ReadWholeFile(dir_.path() + "/mountinfo.out");
  EXPECT_NE(mountinfo.find(" ro,"), std::string::npos) << "read-only although mount(8) said rw: " << mountinfo;
  EXPECT_NE(mountinfo.find("nodev"), std::string::npos) << mountinfo;
  EXPECT_NE(mountinfo.find("noexec"), std::string::npos) << mountinfo;
  EXPECT_NE(mountinfo.find("fuse.stfs"), std::string::npos) << mountinfo;
  EXPECT_NE(::access((dir_.path() + "/write.out").c_str(), F_OK), 0) << "the mount took a write";
  EXPECT_EQ(ReadWholeFile(dir_.path() + "/after.out"), "0\n") << "umount left the mount";
  // The daemon exits with its mount.
  for (int i = 0; i < 100 && !ProcessesWithArgument(mnt, "stfs").empty(); ++i) ::usleep(50000);
  EXPECT_TRUE(ProcessesWithArgument(mnt, "stfs").empty());
}

// A background daemon's read errors reach syslog when there is one. The
// test gives a private mount namespace its own /dev: /dev/fuse and /dev/null
// bound in, and /dev/log a datagram socket the test listens on.
TEST_F(Mount, BackgroundDaemonLogsReadErrorsToSyslog) {
  if (::geteuid() != 0) GTEST_SKIP() << "a private /dev needs root";
  std::vector<TestTensor> tensors = {{"w", DType::U8, {1 << 20}, ""}};
  std::string src = WriteSource(BuildSafetensors(tensors));
  std::string mnt = NewMountpoint();
  std::string dev = dir_.path() + "/dev";
  ASSERT_EQ(::mkdir(dev.c_str(), 0755), 0);
  WriteSource("", "dev/fuse");
  WriteSource("", "dev/null");
  std::string received = dir_.path() + "/syslog.out";
  const std::string listener =
      "import socket, sys\n"
      "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
      "s.bind(sys.argv[1])\n"
      "print('ready', flush=True)\n"
      "with open(sys.argv[2], 'ab', buffering=0) as out:\n"
      "    while True:\n"
      "        out.write(s.recv(65536) + b'\\n')\n";
  std::string listener_out = dir_.path() + "/listener.out";
  int listener_pid = Spawn({"python3", "-c", listener, dev + "/log", received}, listener_out);
  ASSERT_GT(listener_pid, 0);
  for (int i = 0; i < 200 && ReadWholeFile(listener_out).find("ready") == std::string::npos; ++i) ::usleep(25000);
  // Inside: mount in the background, cut the source, read (EIO), unmount.
  const std::string script =
      "set -u\n"
      "mount --bind /dev/fuse \"$1/fuse\" && mount --bind /dev/null \"$1/null\" && mount --rbind \"$1\" /dev || exit 90\n"
      "\"$2\" \"$3\" \"$4\" || exit 91\n"
      "truncate -s 100 \"$3\"\n"
      "cat \"$4/w/data\" > /dev/null 2>&1 && exit 92\n"
      "umount \"$4\" || exit 93\n"
      "exit 0\n";
  CommandResult r = RunCommand({"unshare", "-m", "sh", "-c", script, "sh", dev, StfsBinary(), src, mnt}, 30000);
  EXPECT_EQ(r.exit_code, 0) << "90: private /dev, 91: mount, 92: read did not fail, 93: umount\n" << r.err;
  std::string logged;
  for (int i = 0; i < 100 && logged.find("read of inode") == std::string::npos; ++i) {
    ::usleep(50000);
    logged = ReadWholeFile(received);
  }
  ::kill(listener_pid, SIGKILL);
  WaitForExit(listener_pid, 5000);
  EXPECT_NE(logged.find("read of inode"), std::string::npos) << "syslog got: " << logged;
  EXPECT_NE(logged.find("stfs["), std::string::npos) << "tagged stfs[PID]: " << logged;
  EXPECT_EQ(r.err, "") << "the background daemon wrote to the caller's stderr";
}

TEST_F(Mount, VersionNamesTheLibfuseItRunsOn) {
  CommandResult r = RunStfs({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  CommandResult pc = RunCommand({"pkg-config", "--modversion", "fuse3"});
  EXPECT_NE(r.out.find("libfuse 3."), std::string::npos) << r.out;
  if (pc.exit_code == 0 && !pc.out.empty()) {
    EXPECT_NE(r.out.find("libfuse " + Lines(pc.out)[0]), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace stfs::testing
