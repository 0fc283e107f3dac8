// The multi-threaded session loop: one leader reads /dev/fuse and answers
// every request itself except READ; a READ (which may block on a slow
// source) is handed to the leader's own thread after leadership passes to
// an idle worker (or a new one, up to max_threads).
//
// Why not libfuse's fuse_session_loop_mt: it keeps every idle worker in
// read(2) on /dev/fuse and the kernel wakes them in turn (FIFO), so a
// strictly sequential client (`ls -lR` waits for each reply) wakes a
// different, sleeping thread for every request, usually on another CPU.
// A first `ls -lR` of 100,000 tensors took 3.8x a local listing that way
// and 1.9x with one thread (docs/PERFORMANCE.md, bench-listing.sh). Here
// the thread that answered the last request reads the next one, and only
// reads pay a hand-off.
//
// Teardown: the leader unblocks the stop signals only while it waits in
// receive, so Stop() can interrupt that wait (the handler only writes the
// wake pipe); every other moment of every worker keeps them blocked, as
// libfuse's workers do.
#include <pthread.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include "fs/fuse_internal.h"

namespace stfs::fuse_internal {
namespace {

// FUSE_READ in the kernel's protocol (linux/fuse.h, not included: its
// definitions overlap libfuse's public headers). A request starts with
// fuse_in_header { uint32 len; uint32 opcode; ... }.
constexpr uint32_t kReadOpcode = 15;

bool IsRead(const fuse_buf& buf) {
  if (buf.flags & FUSE_BUF_IS_FD) return true;  // not peekable: treat as possibly blocking
  uint32_t opcode;
  std::memcpy(&opcode, static_cast<const char*>(buf.mem) + 4, sizeof opcode);
  return opcode == kReadOpcode;
}

void SetStopSignalsBlocked(bool blocked) {
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : kStopSignals) sigaddset(&stop, sig);
  pthread_sigmask(blocked ? SIG_BLOCK : SIG_UNBLOCK, &stop, nullptr);
}

}  // namespace

SessionLoop::SessionLoop(fuse_session* se, unsigned max_threads) : se_(se), max_threads_(max_threads ? max_threads : 1) {
  workers_.reserve(max_threads_);  // push_back then never reallocates, so never throws with a thread running
}

int SessionLoop::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!StartWorkerLocked()) return -EAGAIN;
  done_cv_.wait(lock, [&] { return done_ && running_ == 0; });
  std::vector<std::thread> workers = std::move(workers_);
  lock.unlock();
  for (std::thread& worker : workers) worker.join();
  return error_;
}

void SessionLoop::Stop() {
  fuse_session_exit(se_);
  std::unique_lock<std::mutex> lock(mu_);
  done_ = true;
  lead_cv_.notify_all();
  // A signal that lands just before the leader enters read(2) is handled
  // then and does not interrupt it, so repeat until every worker is gone.
  while (running_ > 0) {
    if (leading_) pthread_kill(leader_, SIGTERM);
    done_cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
}

bool SessionLoop::StartWorkerLocked() {
  // A thread that cannot be made (a process or memory limit) leaves the
  // loop with the workers it has, as libfuse's does; the first one is needed.
  try {
    workers_.push_back(StartQuietThread([this] { Work(); }));
  } catch (const std::exception&) {
    return false;
  }
  ++running_;
  return true;
}

void SessionLoop::EndLocked(int error) {
  if (error != 0 && error_ == 0) error_ = error;
  done_ = true;
  lead_cv_.notify_all();
}

void SessionLoop::Work() {
  fuse_buf buf;
  std::memset(&buf, 0, sizeof buf);
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    ++idle_;
    lead_cv_.wait(lock, [&] { return done_ || !leading_; });
    --idle_;
    if (done_) break;
    leading_ = true;
    leader_ = pthread_self();
    lock.unlock();
    // Lead: answer everything but reads right here.
    bool handed_off = false;
    int error = 0;
    while (!fuse_session_exited(se_)) {
      SetStopSignalsBlocked(false);
      const int res = fuse_session_receive_buf(se_, &buf);
      SetStopSignalsBlocked(true);
      if (res == -EINTR || res == -EAGAIN) continue;
      if (res <= 0) {  // 0: unmounted (libfuse marked the session exited)
        if (res < 0) fuse_session_exit(se_);
        error = res;
        break;
      }
      if (IsRead(buf)) {
        handed_off = true;
        break;
      }
      fuse_session_process_buf(se_, &buf);
    }
    lock.lock();
    leading_ = false;
    if (!handed_off) {
      EndLocked(error);
      break;
    }
    if (idle_ == 0 && running_ < max_threads_) (void)StartWorkerLocked();
    lead_cv_.notify_one();
    lock.unlock();
    fuse_session_process_buf(se_, &buf);
    lock.lock();
    if (fuse_session_exited(se_)) EndLocked(0);
  }
  --running_;
  done_cv_.notify_all();
  lock.unlock();
  std::free(buf.mem);
}

}  // namespace stfs::fuse_internal
