// SplicePipe (see splice_pipe.h).
#include "fs/splice_pipe.h"

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>

namespace stfs {

SplicePipe::SplicePipe() { Open(); }

SplicePipe::~SplicePipe() { Close(); }

void SplicePipe::Open() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  read_end_ = fds[0];
  write_end_ = fds[1];
  int size = ::fcntl(write_end_, F_SETPIPE_SZ, static_cast<int>(kSpliceableReadBytes));
  capacity_ = size > 0 ? static_cast<size_t>(size) : 0;
}

void SplicePipe::Close() {
  if (read_end_ >= 0) ::close(read_end_);
  if (write_end_ >= 0) ::close(write_end_);
  read_end_ = write_end_ = -1;
  capacity_ = 0;
}

void SplicePipe::Reset() {
  Close();
  Open();
}

bool SplicePipe::Fill(int fd, uint64_t offset, size_t length) {
  if (length > capacity_) {
    errno = EINVAL;
    return false;
  }
  off64_t pos = static_cast<off64_t>(offset);
  size_t moved = 0;
  while (moved < length) {
    ssize_t n = ::splice(fd, &pos, write_end_, nullptr, length - moved, SPLICE_F_MOVE);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    moved += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace stfs
