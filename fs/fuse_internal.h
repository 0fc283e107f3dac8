// Internal to the FUSE adapter (fs/fuse_*.cc): the session's Context and
// the small conversions every handler shares. This header includes libfuse,
// so only the adapter's own files include it; everything else uses the
// FUSE-free fs/fuse_adapter.h.
//
// The adapter's files:
//   fuse_adapter.cc   session setup, mount options, signals, lifecycle
//   fuse_handlers.cc  metadata and directory handlers (init, lookup, forget,
//                     getattr, open, opendir/readdir, statfs, ...), MakeOps
//   fuse_read.cc      the read path: splice, pinned blocks (fuse_reply_iov),
//                     pread into a per-thread buffer
//   fuse_loop.cc      the multi-threaded session loop (SessionLoop)
//
// Locking: the Filesystem's tree is immutable after construction and its
// slice view cache has its own mutex; the only shared mutable state is
// ReadyState (its own mutex), the handle tables (theirs) and per-thread
// buffers.
#pragma once

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse3/fuse_lowlevel.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "fs/filesystem.h"
#include "fs/fuse_adapter.h"
#include "fs/handle_table.h"

namespace stfs::fuse_internal {

constexpr double kImmutableTimeout = 365.0 * 24 * 3600;

struct ReadyState {
  std::mutex mu;
  std::condition_variable cv;
  bool initialized = false;
  bool loop_done = false;
};

// A directory being listed: the filesystem's shared listing (no copy of
// its entries) and the attributes of "." and "..".
struct DirHandle {
  DirListing listing;
  NodeAttr self;
  NodeAttr parent;
};

struct Context {
  const Filesystem* fs;
  const ServeOptions* options;
  ReadyState ready;
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  // The kernel takes ENOSYS from opendir as "never send OPENDIR/RELEASEDIR
  // again" (FUSE_CAP_NO_OPENDIR_SUPPORT): listings need no handle here.
  bool zero_message_opendir = false;
  // Open files' and directories' handles (freed at RELEASE, or with the
  // session when it ends first).
  HandleTable<FileHandle> files;
  HandleTable<DirHandle> dirs;
};

inline Context& Ctx(fuse_req_t req) { return *static_cast<Context*>(fuse_req_userdata(req)); }

// Runs `body`, turning any escaping exception into an EIO reply. `body`
// must not have replied when it throws.
template <typename Body>
void Guarded(fuse_req_t req, Body&& body) {
  try {
    body();
  } catch (...) {
    fuse_reply_err(req, EIO);
  }
}

inline void ReplyStatus(fuse_req_t req, const Status& status) { fuse_reply_err(req, ErrnoFromStatus(status)); }

// Per-thread reply buffer (reads, listings): grows to the largest request
// and is reused, so steady-state requests allocate nothing.
std::vector<char>& ThreadBuffer(size_t size);

// The read handler (fuse_read.cc).
void OnRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);

// Every handler, for fuse_session_new (fuse_handlers.cc).
fuse_lowlevel_ops MakeOps();

// The signals that stop a session (their handler only writes a wake pipe).
inline constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Starts a thread with the stop signals blocked, so they reach the loop thread.
template <typename Body>
std::thread StartQuietThread(Body&& body) {
  sigset_t stop, old;
  sigemptyset(&stop);
  for (int sig : kStopSignals) sigaddset(&stop, sig);
  pthread_sigmask(SIG_BLOCK, &stop, &old);
  std::thread thread(std::forward<Body>(body));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return thread;
}

// Serves a mounted session with up to max_threads workers (fuse_loop.cc
// says how and why not fuse_session_loop_mt).
class SessionLoop {
 public:
  SessionLoop(fuse_session* se, unsigned max_threads);
  // Serves until the session ends (unmounted, or Stop); returns 0, or the
  // negative errno that reading /dev/fuse failed with.
  int Run();
  // Ends Run() even while a worker waits for a request; returns once every
  // worker is gone (each finishes the request it is answering).
  void Stop();

 private:
  void Work();
  bool StartWorkerLocked();
  void EndLocked(int error);

  fuse_session* const se_;
  const unsigned max_threads_;
  std::mutex mu_;
  std::condition_variable lead_cv_;  // leadership is free, or done_
  std::condition_variable done_cv_;  // a worker left
  bool done_ = false;
  bool leading_ = false;  // a worker reads /dev/fuse now: leader_
  pthread_t leader_{};
  unsigned running_ = 0;  // workers started and not yet gone
  unsigned idle_ = 0;     // workers waiting for leadership
  int error_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace stfs::fuse_internal
