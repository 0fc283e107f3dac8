// LocalFileSource: a ByteSource over a local file, read with pread.
//
// Never mmap: a file truncated while mapped delivers SIGBUS to whoever
// touches the lost pages, which inside a FUSE daemon kills every mount user.
// pread instead returns a short count, which we report as an I/O error.
// The size is fixed at open: safetensors files are immutable, and a file
// that shrinks afterwards yields errors rather than bytes of another version.
//
// ReadRuns reads close runs (gaps of at most a few KiB, as an element-strided
// slice has) with one pread of their span and copies them out: a syscall per
// 4-byte element would cost far more than reading the gaps from the page
// cache. Runs farther apart (a column part's rows) are read one by one, so a
// part reads exactly its bytes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "core/byte_source.h"

namespace stfs {
namespace {

// Runs whose gap is at most kMaxGatherGap are read as one span, as long as
// the span stays within kMaxGatherSpan (the per-call scratch) and reads at
// most kMaxGatherOverread times the bytes it delivers.
constexpr uint64_t kMaxGatherGap = 4096;
constexpr uint64_t kMaxGatherSpan = 1 << 20;
constexpr uint64_t kMaxGatherOverread = 16;

class LocalFileSource final : public ByteSource {
 public:
  LocalFileSource(int fd, std::string path, uint64_t size, timespec mtime)
      : fd_(fd), path_(std::move(path)), size_(size), mtime_(mtime) {}
  ~LocalFileSource() override { ::close(fd_); }

  StatusOr<size_t> ReadAt(uint64_t offset, size_t length, char* dst) const override {
    if (offset >= size_) return size_t{0};
    if (length > size_ - offset) length = static_cast<size_t>(size_ - offset);
    size_t done = 0;
    while (done < length) {
      ssize_t n = ::pread(fd_, dst + done, length - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return StatusFromErrno(errno, path_ + ": read at byte " + std::to_string(offset + done));
      }
      if (n == 0) {
        return Status::IOError(path_ + ": file shrank to " + std::to_string(offset + done) +
                               " bytes while mounted (expected " + std::to_string(size_) + ")");
      }
      done += static_cast<size_t>(n);
    }
    return done;
  }

  Status ReadRuns(std::span<const ByteRun> runs, const ReadHint& /*hint*/) const override {
    for (const ByteRun& run : runs) RETURN_IF_ERROR(CheckRunInside(*this, run.offset, run.length));
    std::vector<char> span;
    size_t first = 0;
    while (first < runs.size()) {
      // runs[first, last) is the longest gatherable group from `first`.
      size_t last = first + 1;
      uint64_t delivered = runs[first].length;
      while (last < runs.size()) {
        const ByteRun& prev = runs[last - 1];
        const ByteRun& next = runs[last];
        const uint64_t prev_end = prev.offset + prev.length;
        if (next.offset < prev_end || next.offset - prev_end > kMaxGatherGap ||
            next.offset + next.length - runs[first].offset > kMaxGatherSpan) {
          break;
        }
        delivered += next.length;
        ++last;
      }
      const uint64_t span_begin = runs[first].offset;
      const uint64_t span_bytes = runs[last - 1].offset + runs[last - 1].length - span_begin;
      if (last - first > 1 && span_bytes <= kMaxGatherOverread * delivered) {
        span.resize(span_bytes);
        RETURN_IF_ERROR(ReadExactly(*this, span_begin, span.size(), span.data()));
        for (size_t i = first; i < last; ++i) {
          std::copy_n(span.data() + (runs[i].offset - span_begin), runs[i].length, runs[i].dst);
        }
      } else {
        for (size_t i = first; i < last; ++i) {
          RETURN_IF_ERROR(ReadExactly(*this, runs[i].offset, runs[i].length, runs[i].dst));
        }
      }
      first = last;
    }
    return Status::OK();
  }

  uint64_t Size() const override { return size_; }
  const std::string& Describe() const override { return path_; }
  timespec ModificationTime() const override { return mtime_; }
  int FileDescriptor() const override { return fd_; }

 private:
  const int fd_;
  const std::string path_;
  const uint64_t size_;
  const timespec mtime_;
};

}  // namespace

StatusOr<std::unique_ptr<ByteSource>> OpenLocalFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return StatusFromErrno(errno, path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = StatusFromErrno(errno, path);
    ::close(fd);
    return s;
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": is a directory, not a safetensors file");
  }
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": not a regular file");
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (S_ISBLK(st.st_mode)) {
    off_t end = ::lseek(fd, 0, SEEK_END);
    if (end < 0) {
      Status s = StatusFromErrno(errno, path);
      ::close(fd);
      return s;
    }
    size = static_cast<uint64_t>(end);
  }
  std::unique_ptr<ByteSource> source =
      std::make_unique<LocalFileSource>(fd, path, size, st.st_mtim);
  return source;
}

}  // namespace stfs
