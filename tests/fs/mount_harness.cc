// Real-mount test harness (see mount_harness.h).
#include "tests/fs/mount_harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace stfs::testing {
namespace {

using Clock = std::chrono::steady_clock;

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Decodes the octal escapes (\040) that /proc/self/mountinfo uses.
std::string UnescapeOctal(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      bool octal = true;
      int v = 0;
      for (int k = 1; k <= 3; ++k) {
        char c = field[i + k];
        if (c < '0' || c > '7') { octal = false; break; }
        v = v * 8 + (c - '0');
      }
      if (octal) {
        out += static_cast<char>(v);
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

// Resolves the parent of `path` (never the path itself: stat of a mount
// root would ask its daemon, which may be the thing under test).
std::string CanonicalMountpoint(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  if (slash == std::string::npos) return p;
  std::string parent = slash == 0 ? "/" : p.substr(0, slash);
  char resolved[PATH_MAX];
  if (::realpath(parent.c_str(), resolved) == nullptr) return p;
  std::string out = resolved;
  if (out != "/") out += '/';
  return out + p.substr(slash + 1);
}

struct MountinfoEntry {
  std::string device;      // MAJ:MIN
  std::string mountpoint;  // unescaped
};

std::vector<MountinfoEntry> ReadMountinfo() {
  std::vector<MountinfoEntry> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, majmin, root, mnt;
    fields >> id >> parent >> majmin >> root >> mnt;
    out.push_back({majmin, UnescapeOctal(mnt)});
  }
  return out;
}

// Starts `argv` with stdin from /dev/null and stdout/stderr on the given
// descriptors; returns the pid (or -1).
pid_t ForkExec(const std::vector<std::string>& argv, int out_fd, int err_fd) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

}  // namespace

CommandResult RunCommand(const std::vector<std::string>& argv, int timeout_ms) {
  CommandResult result;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return result;
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return result;
  }
  pid_t pid = ForkExec(argv, out_pipe[1], err_pipe[1]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (pid < 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return result;
  }

  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  bool exited = false;
  int status = 0;
  Clock::time_point exited_at;
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      exited_at = Clock::now();
    }
    // A daemon that inherited the pipes may hold them open after the
    // command itself exited: give it a moment, then stop reading.
    if (exited && Clock::now() - exited_at > std::chrono::seconds(2)) break;
    if (Clock::now() > deadline) {
      result.timed_out = true;
      break;
    }
    int ready = ::poll(fds, 2, 50);
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
      }
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  if (!exited) {
    while (!result.timed_out && Clock::now() <= deadline) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        break;
      }
      SleepMs(10);
    }
    if (!exited) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  return result;
}

std::string StfsBinary() {
  // STFS_TEST_BINARY runs the suite against another build (an installed stfs).
  const char* other = std::getenv("STFS_TEST_BINARY");
  return other != nullptr && *other != '\0' ? other : STFS_BINARY;
}

std::string HelperScript(const std::string& name) { return std::string(STFS_SOURCE_DIR) + "/tests/fs/" + name; }

std::string NumpyPython() {
  return ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

std::string RealFixturesDir() { return std::string(STFS_SOURCE_DIR) + "/../shared/fixtures/real"; }

std::vector<std::string> MountPoints() {
  std::vector<std::string> out;
  for (const MountinfoEntry& e : ReadMountinfo()) out.push_back(e.mountpoint);
  return out;
}

bool IsMounted(const std::string& path) {
  const std::string want = CanonicalMountpoint(path);
  for (const std::string& m : MountPoints()) {
    if (m == want) return true;
  }
  return false;
}

std::string MountDevice(const std::string& path) {
  const std::string want = CanonicalMountpoint(path);
  std::string device;
  for (const MountinfoEntry& e : ReadMountinfo()) {
    if (e.mountpoint == want) device = e.device;  // the last one is on top
  }
  return device;
}

bool Unmount(const std::string& path) {
  for (int attempt = 0; attempt < 20 && IsMounted(path); ++attempt) {
    CommandResult r = RunCommand({"fusermount3", "-u", path}, 10000);
    if (r.exit_code == 0) break;
    SleepMs(100);  // busy: a reader may still be closing
  }
  if (IsMounted(path)) RunCommand({"fusermount3", "-u", "-z", path}, 10000);
  if (IsMounted(path)) RunCommand({"umount", "-l", path}, 10000);
  return !IsMounted(path);
}

std::vector<int> ProcessesWithArgument(const std::string& arg, const std::string& program) {
  std::vector<int> pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  const int self = ::getpid();
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    // Plain read(2): the process may exit mid-read (ESRCH), which an
    // ifstream turns into an exception; a vanished process just has no
    // command line.
    std::string cmdline;
    int fd = ::open((std::string("/proc/") + e->d_name + "/cmdline").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char chunk[4096];
    ssize_t n;
    while ((n = ::read(fd, chunk, sizeof chunk)) > 0) cmdline.append(chunk, static_cast<size_t>(n));
    ::close(fd);
    if (!program.empty()) {
      std::string argv0 = cmdline.substr(0, cmdline.find('\0'));
      if (argv0.substr(argv0.rfind('/') + 1) != program) continue;
    }
    size_t start = 0;
    while (start < cmdline.size()) {
      size_t nul = cmdline.find('\0', start);
      if (nul == std::string::npos) nul = cmdline.size();
      if (cmdline.compare(start, nul - start, arg) == 0 && nul - start == arg.size()) {
        pids.push_back(static_cast<int>(pid));
        break;
      }
      start = nul + 1;
    }
  }
  ::closedir(proc);
  return pids;
}

std::vector<std::string> ListDir(const std::string& path, bool with_dots) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) {
    ADD_FAILURE() << "opendir " << path << ": " << std::strerror(errno);
    return names;
  }
  errno = 0;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (!with_dots && (name == "." || name == "..")) continue;
    names.push_back(name);
  }
  if (errno != 0) ADD_FAILURE() << "readdir " << path << ": " << std::strerror(errno);
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

uint64_t Fnv1a64Reference(const std::string& bytes) {
  // FNV-1a, 64-bit: offset basis 14695981039346656037, prime 2^40 + 2^8 + 0xb3.
  uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= (1ULL << 40) + (1ULL << 8) + 0xb3;
  }
  return hash;
}

std::string ExpectedDirName(const std::string& name) {
  if (name.empty()) return "%";
  std::string out;
  for (unsigned char c : name) {
    if (c == '%' || c == '/' || c <= 0x1F || c == 0x7F) {
      char esc[4];
      std::snprintf(esc, sizeof esc, "%%%02X", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (out == ".") return "%2E";
  if (out == "..") return "%2E%2E";
  if (out.size() <= 255) return out;
  // Cutting before out[k] splits something when out[k] continues a UTF-8
  // sequence, or when k falls after the '%' or the first hex digit of an escape.
  auto splits = [&](size_t k) {
    if ((static_cast<unsigned char>(out[k]) & 0xC0) == 0x80) return true;
    if (k >= 1 && out[k - 1] == '%') return true;
    if (k >= 2 && out[k - 2] == '%') return true;
    return false;
  };
  size_t cut = 200;
  while (cut > 0 && splits(cut)) --cut;
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, "~%016llx", static_cast<unsigned long long>(Fnv1a64Reference(name)));
  return out.substr(0, cut) + suffix;
}

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

std::string ShapeJson(const std::vector<uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

void ExpectRootListing(const std::string& mnt, const std::vector<TestTensor>& tensors) {
  std::vector<std::string> want = {"__metadata__", "__stats__"};
  for (const TestTensor& t : tensors) want.push_back(ExpectedDirName(t.name));
  std::sort(want.begin(), want.end());
  std::vector<std::string> got = ListDir(mnt);
  EXPECT_EQ(got, want) << "root listing of " << mnt;
  EXPECT_EQ(std::adjacent_find(got.begin(), got.end()), got.end()) << "duplicate names in the root listing";
}

void ExpectTensorServed(const std::string& mnt, const TestTensor& tensor) {
  const std::string dir = mnt + "/" + ExpectedDirName(tensor.name);
  SCOPED_TRACE("tensor " + JsonString(tensor.name) + " in " + dir);
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"data", "data.npy", "dtype", "shape"}));
  EXPECT_EQ(ReadWholeFile(dir + "/dtype"), std::string(DTypeName(tensor.dtype)) + "\n");
  EXPECT_EQ(ReadWholeFile(dir + "/shape"), ShapeJson(tensor.shape) + "\n");
  struct stat st;
  ASSERT_EQ(::stat((dir + "/data").c_str(), &st), 0) << std::strerror(errno);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), tensor.bytes.size());
  std::string data = ReadWholeFile(dir + "/data");
  EXPECT_EQ(data.size(), tensor.bytes.size());
  EXPECT_TRUE(data == tensor.bytes) << "data bytes differ from the file";
  // data.npy: an .npy header (magic, 64-byte multiple) then the same bytes.
  std::string npy = ReadWholeFile(dir + "/data.npy");
  ASSERT_GE(npy.size(), tensor.bytes.size() + 64);
  EXPECT_EQ(npy.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ((npy.size() - tensor.bytes.size()) % 64, 0u);
  EXPECT_TRUE(npy.compare(npy.size() - tensor.bytes.size(), std::string::npos, tensor.bytes) == 0);
  ASSERT_EQ(::stat((dir + "/data.npy").c_str(), &st), 0) << std::strerror(errno);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), npy.size());
}

int Spawn(const std::vector<std::string>& argv, const std::string& output_path) {
  int out = ::open(output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) return -1;
  pid_t pid = ForkExec(argv, out, out);
  ::close(out);
  return pid;
}

int WaitForExit(int pid, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  while (Clock::now() < deadline) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    if (r < 0) return -1;
    SleepMs(20);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

bool WaitForMount(const std::string& mnt, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < deadline) {
    struct stat st;
    if (IsMounted(mnt) && ::stat(mnt.c_str(), &st) == 0 && st.st_ino == 1) return true;
    SleepMs(20);
  }
  return false;
}

void MountTest::SetUp() {
  if (::access("/dev/fuse", F_OK) != 0) GTEST_SKIP() << "/dev/fuse is absent: this machine cannot mount FUSE filesystems";
}

void MountTest::TearDown() {
  for (const std::string& mnt : mountpoints_) {
    if (IsMounted(mnt)) {
      bool unmounted = Unmount(mnt);
      EXPECT_TRUE(unmounted) << mnt << " is still mounted after fusermount3 -u and -z";
    }
    EXPECT_FALSE(IsMounted(mnt)) << mnt;
    // The daemon must exit once its mount is gone.
    std::vector<int> daemons = ProcessesWithArgument(mnt);
    for (int i = 0; i < 100 && !daemons.empty(); ++i) {
      SleepMs(50);
      daemons = ProcessesWithArgument(mnt);
    }
    EXPECT_TRUE(daemons.empty()) << "an stfs daemon for " << mnt << " is still running after unmount";
    for (int pid : daemons) ::kill(pid, SIGKILL);
    ::rmdir(mnt.c_str());
  }
  mountpoints_.clear();
}

std::string MountTest::WriteSource(const std::string& bytes, const std::string& name) {
  return dir_.Write(name, bytes);
}

std::string MountTest::NewMountpoint() {
  std::string mnt = dir_.path() + "/mnt" + std::to_string(mount_counter_++);
  if (::mkdir(mnt.c_str(), 0755) != 0) ADD_FAILURE() << "mkdir " << mnt << ": " << std::strerror(errno);
  mountpoints_.push_back(mnt);
  return mnt;
}

CommandResult MountTest::RunStfs(const std::vector<std::string>& args, int timeout_ms) {
  std::vector<std::string> argv = {StfsBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = RunCommand(argv, timeout_ms);
  EXPECT_FALSE(r.timed_out) << "stfs did not return within " << timeout_ms << " ms";
  return r;
}

std::string MountTest::MountFile(const std::string& source, const std::vector<std::string>& options) {
  std::string mnt = NewMountpoint();
  std::vector<std::string> args = options;
  args.push_back(source);
  args.push_back(mnt);
  CommandResult r = RunStfs(args);
  if (r.exit_code != 0) {
    ADD_FAILURE() << "stfs " << source << " " << mnt << " exited " << r.exit_code << ": " << r.err;
    return "";
  }
  EXPECT_EQ(r.err, "") << "a successful mount prints nothing on stderr";
  if (!IsMounted(mnt)) {
    ADD_FAILURE() << "stfs returned 0 but nothing is mounted at " << mnt;
    return "";
  }
  return mnt;
}

}  // namespace stfs::testing
