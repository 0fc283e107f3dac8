// The FUSE adapter's interface: serve a Filesystem at a mount point.
//
// This header is FUSE-free so main.cc and tests need no libfuse headers;
// only the adapter's own files (fs/fuse_*.cc, fs/fuse_internal.h) include them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "fs/filesystem.h"

namespace stfs {

// How `data` reads are answered.
enum class ReadReply {
  kSplice,  // splice source -> per-thread pipe -> /dev/fuse (default; sources with an fd)
  kPread,   // pread into a per-thread buffer, reply with the bytes
};

struct ServeOptions {
  std::string mountpoint;               // absolute path
  std::vector<std::string> fuse_options;  // passed to libfuse as "-o a,b,c"
  bool debug = false;                   // libfuse -d
  bool single_threaded = false;         // -s
  unsigned max_threads = 16;
  ReadReply read_reply = ReadReply::kSplice;  // sources without an fd always use pread
  unsigned readahead_kb = 4096;         // /sys/class/bdi/<dev>/read_ahead_kb; 0 keeps the kernel's
  // libfuse's auto_unmount: a helper removes the mount if the daemon dies
  // (even by SIGKILL), so no dead mount is left behind.
  bool auto_unmount = true;
  // Called from a normal thread once teardown starts (signal, unmount,
  // refused readiness), e.g. ByteSource::Shutdown so no read stays blocked.
  std::function<void()> on_teardown;
};

// Mounts `fs` and serves requests until unmounted or signalled (SIGINT,
// SIGTERM, SIGHUP: on_teardown runs, the mount is detached at once and the
// session drains for at most a second, busy reads or not). `on_ready`
// is called once, from another thread, when the mount answers a stat (OK),
// or with the error when the mount could not be made; it may be called
// before ServeFilesystem returns an error. When it returns false for OK the
// mount is torn down again (the caller no longer wants it). Returns OK after
// a clean unmount.
Status ServeFilesystem(const Filesystem& fs, const ServeOptions& options,
                       const std::function<bool(const Status&)>& on_ready);

// The libfuse version the binary runs on ("3.14.0").
std::string FuseVersion();

// Maps a Status to the errno a FUSE reply carries (EIO when nothing closer).
int ErrnoFromStatus(const Status& status);

}  // namespace stfs
