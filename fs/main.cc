// The `stfs` command: mount a safetensors source, or inspect its header.
//
// Order matters: everything that can fail on bad input (opening the source,
// validating the whole header, building the tree) happens before anything
// is mounted, so bad input leaves no partial mount. In the background
// (default) the work happens in a forked daemon — forked before any thread
// or connection exists — which reports back through a pipe either "ready"
// (the mount answered a stat) or the one-line error; the parent prints that
// line and exits accordingly.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/byte_source.h"
#include "core/header.h"
#include "fs/filesystem.h"
#include "fs/fuse_adapter.h"
#include "fs/inspect.h"
#ifdef STFS_HAVE_REMOTE
#include "core/remote/remote_source.h"
#endif

#ifndef STFS_VERSION
#define STFS_VERSION "0.0.0"
#endif

namespace stfs {
namespace {

constexpr const char* kUsage =
    "usage: stfs [options] SOURCE MOUNTPOINT\n"
    "       stfs inspect SOURCE [--json]\n"
    "       stfs --help | --version\n"
    "\n"
    "Mounts a safetensors file read-only: one directory per tensor holding\n"
    "`dtype`, `shape` and `data` (the raw bytes), plus __metadata__ and\n"
    "__stats__ at the root. SOURCE is a local path"
#ifdef STFS_HAVE_REMOTE
    ", an http(s):// URL or hf://ORG/REPO/FILE[@REV]"
#endif
    ".\n"
    "The header is validated before anything is mounted; by default stfs\n"
    "returns once the mount answers and serves in the background.\n"
    "\n"
    "options:\n"
    "  -f                  stay in the foreground (SIGINT/SIGTERM unmount)\n"
    "  -d                  FUSE debug output (implies -f)\n"
    "  -s                  single-threaded\n"
    "  -o OPT[,OPT...]     mount options; libfuse's pass through (allow_other, ...)\n"
    "     read_reply=splice|pread  answer data reads of a local file by splicing\n"
    "                           it through a pipe (default, no copy in the daemon)\n"
    "                           or by pread into a buffer (fd is splice's old name)\n"
    "     readahead_kb=N        kernel read-ahead for the mount (default 4096, 1024 for\n"
    "                           remote sources; 0 keeps the kernel's 128)\n"
    "     threads=N             most FUSE worker threads (default 16)\n"
    "     log=PATH              append the background daemon's messages (read\n"
    "                           errors, stale objects) to PATH (default: discarded)\n"
    "  -h, --help          this text\n"
    "  -V, --version       the version\n";

// Kernel read-ahead for remote mounts unless -o readahead_kb= says otherwise.
constexpr unsigned kRemoteReadaheadKb = 1024;

void PrintError(const std::string& message) { std::fprintf(stderr, "stfs: %s\n", message.c_str()); }

struct CommandLine {
  std::string source;
  std::string mountpoint;
  bool foreground = false;
  std::string log_path;  // where the background daemon's stderr goes ("" = /dev/null)
  bool readahead_given = false;
  ServeOptions serve;
#ifdef STFS_HAVE_REMOTE
  RemoteOptions remote;
#endif
};

StatusOr<unsigned> ParseUnsigned(const std::string& key, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  unsigned long v = std::strtoul(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v > UINT_MAX) {
    return Status::InvalidArgument("option " + key + "=" + value + ": expected a non-negative integer");
  }
  return static_cast<unsigned>(v);
}

// Applies one -o option: ours, the remote source's, or passed to libfuse.
Status ApplyMountOption(const std::string& option, CommandLine* cl) {
  size_t eq = option.find('=');
  std::string key = option.substr(0, eq);
  std::string value = eq == std::string::npos ? "" : option.substr(eq + 1);
  if (key == "read_reply") {
    if (value == "pread") cl->serve.read_reply = ReadReply::kPread;
    else if (value == "splice" || value == "fd") cl->serve.read_reply = ReadReply::kSplice;
    else return Status::InvalidArgument("option read_reply=" + value + ": expected splice or pread");
    return Status::OK();
  }
  if (key == "readahead_kb") {
    cl->readahead_given = true;
    ASSIGN_OR_RETURN(cl->serve.readahead_kb, ParseUnsigned(key, value));
    return Status::OK();
  }
  if (key == "threads") {
    ASSIGN_OR_RETURN(unsigned threads, ParseUnsigned(key, value));
    if (threads == 0) return Status::InvalidArgument("option threads=0: need at least one thread");
    cl->serve.max_threads = threads;
    return Status::OK();
  }
  if (key == "log") {
    if (value.empty()) return Status::InvalidArgument("option log=: expected a file path");
    cl->log_path = value;
    return Status::OK();
  }
  if (key == "rw") return Status::InvalidArgument("option rw: stfs mounts are read-only");
#ifdef STFS_HAVE_REMOTE
  ASSIGN_OR_RETURN(bool consumed, ApplyRemoteOption(option, &cl->remote));
  if (consumed) return Status::OK();
#endif
  cl->serve.fuse_options.push_back(option);
  return Status::OK();
}

// Splits "a,b\,c" at unescaped commas.
std::vector<std::string> SplitOptions(const std::string& list) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == '\\' && i + 1 < list.size()) {
      out.back() += list[++i];
    } else if (list[i] == ',') {
      out.emplace_back();
    } else {
      out.back() += list[i];
    }
  }
  return out;
}

StatusOr<std::unique_ptr<ByteSource>> OpenSource(const CommandLine& cl) {
#ifdef STFS_HAVE_REMOTE
  if (IsRemoteLocation(cl.source)) return OpenRemoteSource(cl.source, cl.remote);
#endif
  if (cl.source.find("://") != std::string::npos) {
    return Status::NotSupported(cl.source + ": remote sources are not supported by this build");
  }
  return OpenLocalFile(cl.source);
}

// Opens and validates the source and builds the tree: everything that can
// fail on bad input, before anything is mounted.
StatusOr<std::unique_ptr<Filesystem>> PrepareFilesystem(const CommandLine& cl) {
  ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenSource(cl));
  ASSIGN_OR_RETURN(Header header, ReadHeader(*source));
  return Filesystem::Create(std::move(source), std::move(header));
}

int RunInspect(int argc, char** argv) {
  CommandLine cl;
  bool json = false;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--json") json = true;
    else if (arg == "-h" || arg == "--help") { std::fputs(kUsage, stdout); return 0; }
    else if (arg == "-o" && i + 1 < argc) {
      for (const std::string& opt : SplitOptions(argv[++i])) {
        Status s = ApplyMountOption(opt, &cl);
        if (!s.ok()) { PrintError(s.message()); return 2; }
      }
    } else if (cl.source.empty()) cl.source = arg;
    else { PrintError("inspect: unexpected argument '" + arg + "'"); return 2; }
  }
  if (cl.source.empty()) { PrintError("inspect: missing SOURCE\n" + std::string(kUsage)); return 2; }
#ifdef STFS_HAVE_REMOTE
  ApplyRemoteEnvironment(&cl.remote);
#endif
  StatusOr<std::unique_ptr<ByteSource>> source = OpenSource(cl);
  if (!source.ok()) { PrintError(source.status().message()); return 1; }
  StatusOr<Header> header = ReadHeader(**source);
  if (!header.ok()) { PrintError(header.status().message()); return 1; }
  std::string report = json ? InspectJson(*header) : InspectTable(*header);
  std::fwrite(report.data(), 1, report.size(), stdout);
  return 0;
}

Status ParseMountArgs(int argc, char** argv, CommandLine* cl) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-f") cl->foreground = true;
    else if (arg == "-d") { cl->foreground = true; cl->serve.debug = true; }
    else if (arg == "-s") cl->serve.single_threaded = true;
    else if (arg == "-o" || (arg.size() > 2 && arg.rfind("-o", 0) == 0)) {
      std::string list = arg == "-o" ? (i + 1 < argc ? argv[++i] : "") : arg.substr(2);
      if (list.empty()) return Status::InvalidArgument("-o needs an option list");
      for (const std::string& opt : SplitOptions(list)) RETURN_IF_ERROR(ApplyMountOption(opt, cl));
    } else if (arg == "--") {
      for (++i; i < argc; ++i) positional.push_back(argv[i]);
    } else if (arg.size() > 1 && arg[0] == '-') {
      return Status::InvalidArgument("unknown option '" + arg + "' (see stfs --help)");
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 2) {
    return Status::InvalidArgument("expected SOURCE and MOUNTPOINT (see stfs --help)");
  }
  cl->source = positional[0];
  cl->mountpoint = positional[1];
  return Status::OK();
}

// Resolves and checks the mount point before anything else happens.
Status CheckMountpoint(CommandLine* cl) {
  char resolved[PATH_MAX];
  if (::realpath(cl->mountpoint.c_str(), resolved) == nullptr) return StatusFromErrno(errno, cl->mountpoint);
  struct stat st;
  if (::stat(resolved, &st) != 0) return StatusFromErrno(errno, cl->mountpoint);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(cl->mountpoint + ": mount point is not a directory");
  cl->serve.mountpoint = resolved;
  return Status::OK();
}

int ServeForeground(const CommandLine& cl) {
  StatusOr<std::unique_ptr<Filesystem>> fs = PrepareFilesystem(cl);
  if (!fs.ok()) { PrintError(fs.status().message()); return 1; }
  Status served = ServeFilesystem(**fs, cl.serve, [](const Status& s) {
    if (!s.ok()) PrintError(s.message());
  });
  if (!served.ok()) return 1;
  return 0;
}

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Points the daemon's stdio away from the terminal (or the caller's pipes,
// which would otherwise never see EOF): stderr to the log file when asked.
void DetachStdio(const std::string& log_path) {
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) return;
  int log = log_path.empty() ? -1 : ::open(log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  ::dup2(devnull, STDIN_FILENO);
  ::dup2(devnull, STDOUT_FILENO);
  ::dup2(log >= 0 ? log : devnull, STDERR_FILENO);
  if (log > STDERR_FILENO) ::close(log);
  if (devnull > STDERR_FILENO) ::close(devnull);
}

int ServeBackground(const CommandLine& cl) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) { PrintError(std::string("pipe: ") + std::strerror(errno)); return 1; }
  pid_t pid = ::fork();
  if (pid < 0) { PrintError(std::string("fork: ") + std::strerror(errno)); return 1; }
  if (pid == 0) {
    ::close(pipefd[0]);
    const int report = pipefd[1];
    ::setsid();
    StatusOr<std::unique_ptr<Filesystem>> fs = PrepareFilesystem(cl);
    if (!fs.ok()) {
      WriteAll(report, "E" + fs.status().message());
      _exit(1);
    }
    if (::chdir("/") != 0) { /* the mount does not depend on the cwd */ }
    bool reported = false;
    Status served = ServeFilesystem(**fs, cl.serve, [&](const Status& s) {
      if (s.ok()) {
        DetachStdio(cl.log_path);
        WriteAll(report, "R");
      } else {
        WriteAll(report, "E" + s.message());
      }
      ::close(report);
      reported = true;
    });
    if (!reported) ::close(report);
    _exit(served.ok() ? 0 : 1);
  }
  ::close(pipefd[1]);
  std::string reply;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(pipefd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  if (!reply.empty() && reply[0] == 'R') return 0;
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!reply.empty() && reply[0] == 'E') PrintError(reply.substr(1));
  else PrintError(cl.source + ": the mount daemon exited before the mount was ready");
  return 1;
}

int Main(int argc, char** argv) {
  if (argc >= 2) {
    std::string first = argv[1];
    if (first == "-h" || first == "--help") { std::fputs(kUsage, stdout);
#ifdef STFS_HAVE_REMOTE
      std::fputs(("\n" + RemoteOptionsHelp()).c_str(), stdout);
#endif
      return 0; }
    if (first == "-V" || first == "--version") { std::printf("stfs %s\n", STFS_VERSION); return 0; }
    if (first == "inspect") return RunInspect(argc, argv);
  }
  // A reader closing a pipe (curl, log) must not kill the daemon.
  ::signal(SIGPIPE, SIG_IGN);
  CommandLine cl;
  Status parsed = ParseMountArgs(argc, argv, &cl);
  if (!parsed.ok()) { PrintError(parsed.message()); return 2; }
#ifdef STFS_HAVE_REMOTE
  ApplyRemoteEnvironment(&cl.remote);
  // A remote source reads ahead itself, in cache blocks; a large kernel
  // read-ahead on top only makes a short read fetch more than it needs.
  if (IsRemoteLocation(cl.source) && !cl.readahead_given) cl.serve.readahead_kb = kRemoteReadaheadKb;
#endif
  Status mountpoint = CheckMountpoint(&cl);
  if (!mountpoint.ok()) { PrintError(mountpoint.message()); return 1; }
  return cl.foreground ? ServeForeground(cl) : ServeBackground(cl);
}

}  // namespace
}  // namespace stfs

int main(int argc, char** argv) {
  try {
    return stfs::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stfs: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "stfs: internal error\n");
  }
  return 1;
}
