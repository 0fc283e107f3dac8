// Foreground and background serving; see serve.h.
//
// Everything that can fail on bad input (opening the source, validating the
// whole header, building the tree) happens before anything is mounted, so
// bad input leaves no partial mount. In the background the work happens in
// a forked daemon — forked before any thread or connection exists — which
// reports back through a pipe either "R" (the mount answered a stat) or
// "E" and the one-line error. The daemon mounts only while its `stfs`
// command still waits: a closed pipe (the command was killed) makes it give
// up before mounting, or unmount at once if the mount was already made.
//
// The daemon's stderr (read errors, libfuse and fusermount3 messages) goes
// to -o log=PATH, else to syslog when the system has one (/dev/log), else
// nowhere; it is set up before mounting so that fusermount3's auto_unmount
// helper does not hold the caller's terminal or pipes open.
#include "fs/serve.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fs/filesystem.h"
#include "fs/fuse_adapter.h"
#include "fs/source_opening.h"

namespace stfs {
namespace {

void PrintError(const std::string& message) { std::fprintf(stderr, "stfs: %s\n", message.c_str()); }

// Opens and validates the source (every shard) and builds the tree.
// Teardown of the mount shuts every shard's source down, so no FUSE worker
// stays blocked in a read.
StatusOr<std::unique_ptr<Filesystem>> PrepareFilesystem(CommandLine& cl) {
  ASSIGN_OR_RETURN(Catalogue catalogue, OpenCatalogue(cl));
  std::vector<ByteSource*> sources;  // owned by the Filesystem, which outlives the serving
  for (const CatalogueShard& shard : catalogue.shards()) sources.push_back(shard.source.get());
  cl.serve.on_teardown = [sources] {
    for (ByteSource* source : sources) source->Shutdown();
  };
  return Filesystem::Create(std::move(catalogue), cl.filesystem);
}

bool WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// True while the reading end of `fd` (the waiting command) is open.
bool ReaderAlive(int fd) {
  pollfd p = {fd, 0, 0};
  return ::poll(&p, 1, 0) == 0 || (p.revents & (POLLERR | POLLHUP)) == 0;
}

bool HaveSyslog() {
  struct stat st;
  return ::stat("/dev/log", &st) == 0 && S_ISSOCK(st.st_mode);
}

// Copies each line written to `read_fd` into syslog, until every writer is gone.
void ForwardLinesToSyslog(int read_fd) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  FILE* in = ::fdopen(read_fd, "r");
  if (in == nullptr) return;
  char* line = nullptr;
  size_t capacity = 0;
  ssize_t n;
  while ((n = ::getline(&line, &capacity, in)) > 0) {
    std::string text(line, static_cast<size_t>(n));
    while (!text.empty() && text.back() == '\n') text.pop_back();
    if (text.rfind("stfs: ", 0) == 0) text.erase(0, 6);
    if (!text.empty()) ::syslog(LOG_ERR, "%s", text.c_str());
  }
  std::free(line);
  std::fclose(in);
}

// Points the daemon's stdio away from the caller's terminal or pipes:
// stdin and stdout to /dev/null, stderr to the log file, syslog or nowhere.
Status DetachStdio(const std::string& log_path) {
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) return StatusFromErrno(errno, "/dev/null");
  int err = -1;
  if (!log_path.empty()) {
    err = ::open(log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (err < 0) {
      ::close(devnull);
      return StatusFromErrno(errno, "log=" + log_path);
    }
  } else if (HaveSyslog()) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) == 0) {
      // A slow syslog drops lines rather than stalling a FUSE worker that logs.
      ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
      ::openlog("stfs", LOG_PID, LOG_DAEMON);
      std::thread(ForwardLinesToSyslog, fds[0]).detach();
      err = fds[1];
    }
  }
  ::dup2(devnull, STDIN_FILENO);
  ::dup2(devnull, STDOUT_FILENO);
  ::dup2(err >= 0 ? err : devnull, STDERR_FILENO);
  if (err > STDERR_FILENO) ::close(err);
  if (devnull > STDERR_FILENO) ::close(devnull);
  return Status::OK();
}

// The daemon's side: returns its exit code.
int RunDaemon(CommandLine& cl, int report) {
  ::setsid();
  StatusOr<std::unique_ptr<Filesystem>> fs = PrepareFilesystem(cl);
  if (!fs.ok()) {
    WriteAll(report, "E" + fs.status().message());
    return 1;
  }
  if (!ReaderAlive(report)) return 1;  // the command was killed: mount nothing
  if (::chdir("/") != 0) { /* every path is absolute by now */ }
  Status detached = DetachStdio(cl.log_path);
  if (!detached.ok()) {
    WriteAll(report, "E" + detached.message());
    return 1;
  }
  bool reported = false;
  Status served = ServeFilesystem(**fs, cl.serve, [&](const Status& s) {
    bool delivered = WriteAll(report, s.ok() ? std::string("R") : "E" + s.message());
    ::close(report);
    reported = true;
    return delivered;  // undelivered "ready": nobody asked for this mount any more
  });
  if (!reported) ::close(report);
  return served.ok() ? 0 : 1;
}

}  // namespace

int ServeForeground(CommandLine& cl) {
  StatusOr<std::unique_ptr<Filesystem>> fs = PrepareFilesystem(cl);
  if (!fs.ok()) { PrintError(fs.status().message()); return 1; }
  Status served = ServeFilesystem(**fs, cl.serve, [](const Status& s) {
    if (!s.ok()) PrintError(s.message());
    return true;
  });
  return served.ok() ? 0 : 1;
}

int ServeBackground(CommandLine& cl) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) { PrintError(std::string("pipe: ") + std::strerror(errno)); return 1; }
  pid_t pid = ::fork();
  if (pid < 0) { PrintError(std::string("fork: ") + std::strerror(errno)); return 1; }
  if (pid == 0) {
    ::close(pipefd[0]);
    _exit(RunDaemon(cl, pipefd[1]));
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

}  // namespace stfs
