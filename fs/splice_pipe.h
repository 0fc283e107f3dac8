// SplicePipe: a pipe that holds one read reply moved from a file by splice.
//
// The FUSE adapter fills one per worker thread from the source file and
// hands its read end to libfuse, which splices it on into /dev/fuse, so
// tensor bytes never pass through the daemon's memory. Filling it ourselves,
// rather than giving libfuse the source fd, is what lets a short count (the
// source shrank under the mount) become an error instead of a short reply.
// No FUSE types here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stfs {

// The largest reply libfuse 3.14 splices: it needs the reply plus three
// pages to fit in one pipe, and pipes stop at 1 MiB (fs/pipe-max-size).
inline constexpr unsigned kSpliceableReadBytes = (1 << 20) - 4 * 4096;

class SplicePipe {
 public:
  // Opens a pipe of kSpliceableReadBytes; capacity() is 0 when that failed.
  SplicePipe();
  ~SplicePipe();
  SplicePipe(const SplicePipe&) = delete;
  SplicePipe& operator=(const SplicePipe&) = delete;

  size_t capacity() const { return capacity_; }
  int read_end() const { return read_end_; }

  // Moves `length` bytes at `offset` of `fd` into the (empty) pipe. Returns
  // false with errno set on failure, EIO when the file ended early.
  bool Fill(int fd, uint64_t offset, size_t length);

  // Replaces the pipe with a fresh empty one, dropping anything left in it.
  void Reset();

 private:
  void Open();
  void Close();

  int read_end_ = -1;
  int write_end_ = -1;
  size_t capacity_ = 0;
};

}  // namespace stfs
