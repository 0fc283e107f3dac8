// The FUSE session: builds libfuse's arguments from ServeOptions, mounts,
// runs the loop, reports readiness and tears down on signals. The request
// handlers live in fuse_handlers.cc and fuse_read.cc (see fuse_internal.h);
// only these fs/fuse_*.cc files include FUSE.
#include "fs/fuse_internal.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fs/mount_util.h"

namespace stfs {
namespace {

using fuse_internal::Context;
using fuse_internal::kStopSignals;
using fuse_internal::MakeOps;
using fuse_internal::SessionLoop;
using fuse_internal::StartQuietThread;

std::string JoinOptions(const std::vector<std::string>& options) {
  std::string out;
  for (const std::string& o : options) {
    if (o.empty()) continue;
    if (!out.empty()) out += ',';
    out += o;
  }
  return out;
}

// Session lifecycle. A stop signal only writes a byte to a pipe (all a
// handler may do). The stopper, a normal thread, then
//   1. runs the caller's on_teardown, which makes source reads fail at once
//      (a worker blocked on a slow source answers EIO),
//   2. detaches the mount, so it is gone within milliseconds and the kernel
//      sends nothing new; requests already queued (the kernel retries a
//      failed read-ahead as a plain read) are still answered, quickly,
//   3. lets the loop end by itself once the last open file is closed, or
//      after kDrainMs ends it (fds still open then get ENOTCONN).
// SessionLoop's workers and our other threads block these signals, so
// they reach the loop thread (with -s, libfuse's loop runs there and a
// signal interrupts its wait); SessionLoop's leader alone takes them while
// it waits for a request, which is how Stop() interrupts that wait.
constexpr int kDrainMs = 1000;

std::atomic<int> g_wake_fd{-1};

void OnStopSignal(int) {
  int saved = errno;
  int fd = g_wake_fd.load();
  if (fd >= 0) (void)!::write(fd, "x", 1);
  errno = saved;
}

class StopSignals {
 public:
  explicit StopSignals(int wake_fd) {
    g_wake_fd = wake_fd;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: the loop's wait must see EINTR
    for (size_t i = 0; i < std::size(kStopSignals); ++i) ::sigaction(kStopSignals[i], &sa, &old_[i]);
  }
  ~StopSignals() {
    for (size_t i = 0; i < std::size(kStopSignals); ++i) ::sigaction(kStopSignals[i], &old_[i], nullptr);
    g_wake_fd = -1;
  }

 private:
  struct sigaction old_[std::size(kStopSignals)];
};

// Makes fuse_session_unmount only close the session (and free what it
// holds) without unmounting the path again: it skips the unmount when the
// fd polls POLLERR, as a severed connection does. If files kept the
// detached connection alive, the /dev/fuse fd is swapped for a pipe's write
// end whose reader is gone (POLLERR), which also ends the connection.
void RetireSessionFd(fuse_session* se) {
  const int fd = fuse_session_fd(se);
  pollfd p = {fd, 0, 0};
  if (::poll(&p, 1, 0) == 1 && (p.revents & POLLERR)) return;
  int broken[2];
  if (::pipe2(broken, O_CLOEXEC) != 0) return;
  ::close(broken[0]);
  ::dup2(broken[1], fd);
  ::close(broken[1]);
}

// libfuse's messages (bad options, mount errors): kept while the session is
// set up so the error the user sees can name the cause, and still printed.
std::mutex g_fuse_log_mu;
std::string g_fuse_last_message;

void CaptureFuseLog(enum fuse_log_level, const char* fmt, va_list ap) {
  char line[1024];
  std::vsnprintf(line, sizeof line, fmt, ap);
  std::fputs(line, stderr);
  std::string text = line;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::lock_guard<std::mutex> lock(g_fuse_log_mu);
  g_fuse_last_message = text;
}

// `base` and the last libfuse message, if any.
std::string WithFuseMessage(std::string base) {
  std::lock_guard<std::mutex> lock(g_fuse_log_mu);
  if (!g_fuse_last_message.empty()) base += ": " + g_fuse_last_message;
  return base;
}

// Serves the mounted session until a signal, an unmount or a refused
// readiness ends it; returns the loop's outcome. `wake` is the stop pipe;
// `*detached` tells whether the stopper already removed the mount.
Status RunSession(fuse_session* se, Context& ctx, const ServeOptions& options, const int wake[2],
                  std::atomic<bool>* detached, const std::function<bool(const Status&)>& on_ready) {
  const pthread_t loop_thread = pthread_self();
  SessionLoop loop(se, options.max_threads);
  auto loop_done = [&] {
    std::lock_guard<std::mutex> lock(ctx.ready.mu);
    return ctx.ready.loop_done;
  };
  // Readiness: wait for the kernel's INIT, then stat the mount point through
  // the mount itself, so "ready" means the mount answers. A caller that
  // refuses it (its parent is gone) stops the session.
  std::thread watcher = StartQuietThread([&] {
    {
      std::unique_lock<std::mutex> lock(ctx.ready.mu);
      ctx.ready.cv.wait(lock, [&] { return ctx.ready.initialized || ctx.ready.loop_done; });
      if (!ctx.ready.initialized) return;
    }
    struct stat st;
    Status ready = Status::OK();
    if (::stat(options.mountpoint.c_str(), &st) != 0 || st.st_ino != kRootInode) {
      ready = StatusFromErrno(errno ? errno : EIO, options.mountpoint + ": mount does not answer");
    } else {
      RaiseReadahead(options.mountpoint, options.readahead_kb, options.debug);
    }
    if (!on_ready(ready) || !ready.ok()) (void)!::write(wake[1], "x", 1);  // tear down
  });
  std::thread stopper = StartQuietThread([&] {
    pollfd stop = {wake[0], POLLIN, 0};
    bool signalled = false;
    for (;;) {
      if (loop_done()) return;
      if (::poll(&stop, 1, 100) > 0) { signalled = true; break; }
      if (fuse_session_exited(se)) break;  // unmounted from outside: the loop is ending
    }
    if (options.on_teardown) options.on_teardown();
    if (!signalled) return;
    DetachMount(options.mountpoint);
    *detached = true;
    std::unique_lock<std::mutex> lock(ctx.ready.mu);
    if (!ctx.ready.cv.wait_for(lock, std::chrono::milliseconds(kDrainMs), [&] { return ctx.ready.loop_done; })) {
      lock.unlock();
      if (options.single_threaded) {
        fuse_session_exit(se);
        pthread_kill(loop_thread, SIGTERM);  // interrupts the loop's wait (the handler only writes the pipe)
      } else {
        loop.Stop();
      }
    }
  });

  int rc = options.single_threaded ? fuse_session_loop(se) : loop.Run();
  {
    std::lock_guard<std::mutex> lock(ctx.ready.mu);
    ctx.ready.loop_done = true;
    ctx.ready.cv.notify_all();
  }
  watcher.join();
  stopper.join();
  // Once the stopper has detached the mount, the kernel ends the connection:
  // reading /dev/fuse then fails with ENODEV, or ECONNABORTED when the
  // kernel counts the end as an abort (seen under ASan's slower teardown).
  // Either is the end we asked for, not an error.
  const bool ended_by_detach = detached->load() && (rc == -ENODEV || rc == -ECONNABORTED);
  if (rc != 0 && !ended_by_detach && rc != SIGINT && rc != SIGTERM && rc != SIGHUP) {
    return Status::IOError("FUSE session ended with error " + std::to_string(rc));
  }
  return Status::OK();
}

}  // namespace

std::string FuseVersion() { return fuse_pkgversion(); }

Status ServeFilesystem(const Filesystem& fs, const ServeOptions& options,
                       const std::function<bool(const Status&)>& on_ready) {
  Context ctx;
  ctx.fs = &fs;
  ctx.options = &options;
  {
    std::lock_guard<std::mutex> lock(g_fuse_log_mu);
    g_fuse_last_message.clear();
  }
  fuse_set_log_func(CaptureFuseLog);

  std::vector<std::string> arg_strings = {"stfs"};
  if (options.debug) arg_strings.push_back("-d");
  std::vector<std::string> fuse_options = {"ro", "default_permissions", "fsname=stfs", "subtype=stfs"};
  if (options.auto_unmount) fuse_options.push_back("auto_unmount");
  fuse_options.insert(fuse_options.end(), options.fuse_options.begin(), options.fuse_options.end());
  arg_strings.push_back("-o");
  arg_strings.push_back(JoinOptions(fuse_options));
  std::vector<char*> argv;
  for (std::string& s : arg_strings) argv.push_back(s.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  const fuse_lowlevel_ops ops = MakeOps();
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, &ctx);
  if (se == nullptr) {
    Status s = Status::InvalidArgument(WithFuseMessage("could not start a FUSE session"));
    on_ready(s);
    return s;
  }
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    fuse_session_destroy(se);
    Status s = StatusFromErrno(errno, "pipe");
    on_ready(s);
    return s;
  }
  Status result = Status::OK();
  {
    StopSignals signals(wake[1]);
    if (fuse_session_mount(se, options.mountpoint.c_str()) != 0) {
      result = Status::IOError(WithFuseMessage(options.mountpoint + ": mount failed"));
      on_ready(result);
    } else {
      std::atomic<bool> detached{false};
      result = RunSession(se, ctx, options, wake, &detached, on_ready);
      // After a detach the path may hold someone else's mount by now.
      if (detached) RetireSessionFd(se);
      fuse_session_unmount(se);
    }
  }
  ::close(wake[0]);
  ::close(wake[1]);
  fuse_session_destroy(se);
  fuse_opt_free_args(&args);
  return result;
}

}  // namespace stfs
