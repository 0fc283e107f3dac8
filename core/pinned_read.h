// PinnedBytes / PinnedReadable: reads answered with the source's own memory.
//
// A remote source keeps what it fetched in cache blocks; copying those bytes
// into a caller's buffer only to hand the buffer to the kernel (a FUSE reply)
// costs one memcpy per byte, which on a loopback link is a fifth of the
// daemon's CPU per GiB. A source that can do better also implements
// PinnedReadable: the read returns spans that point into its blocks, and the
// blocks stay pinned (never evicted, never recycled) until the PinnedBytes
// is destroyed. The pins count in the source's memory budget like any block
// a reader is copying from, and holders must release them promptly (a FUSE
// reply is written, then dropped). Bytes the source could not pin (no room
// in the cache, a header read) come in a buffer the PinnedBytes owns.
// Nothing here knows FUSE: fs/fuse_read.cc turns the spans into an iovec.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/byte_source.h"
#include "core/status.h"

namespace stfs {

struct PinnedSpan {
  const char* data = nullptr;
  size_t length = 0;
};

// The bytes of one read, in order; move-only. Destroying it unpins them.
class PinnedBytes {
 public:
  PinnedBytes() = default;
  PinnedBytes(PinnedBytes&& other) noexcept { *this = std::move(other); }
  PinnedBytes& operator=(PinnedBytes&& other) noexcept {
    if (this != &other) {
      Reset();
      spans_ = std::move(other.spans_);
      owned_ = std::move(other.owned_);
      release_ = std::move(other.release_);
      other.spans_.clear();
      other.release_ = nullptr;
    }
    return *this;
  }
  PinnedBytes(const PinnedBytes&) = delete;
  PinnedBytes& operator=(const PinnedBytes&) = delete;
  ~PinnedBytes() { Reset(); }

  const std::vector<PinnedSpan>& spans() const { return spans_; }
  size_t size() const {
    size_t n = 0;
    for (const PinnedSpan& s : spans_) n += s.length;
    return n;
  }

  // For sources: appends a span of memory kept valid until `release` runs.
  void Add(const char* data, size_t length) {
    if (length > 0) spans_.push_back({data, length});
  }
  // For sources: what unpins every span (called once, on destruction).
  void SetRelease(std::function<void()> release) { release_ = std::move(release); }
  // For sources: a buffer of `length` bytes owned by this object, to be
  // filled by the caller and added with Add.
  char* OwnBuffer(size_t length) {
    owned_.reset(new char[length]);  // not zeroed: the caller fills it
    return owned_.get();
  }

 private:
  void Reset() {
    spans_.clear();
    if (release_) {
      auto release = std::move(release_);
      release_ = nullptr;
      release();
    }
    owned_.reset();
  }

  std::vector<PinnedSpan> spans_;
  std::unique_ptr<char[]> owned_;
  std::function<void()> release_;
};

// Implemented by sources that can lend their memory (HttpRangeSource).
class PinnedReadable {
 public:
  virtual ~PinnedReadable() = default;
  // Reads exactly [offset, offset+length) (the caller clips to Size()) as
  // pinned spans, with what the reader knows (ReadHint: its stream, the end
  // of its file); the same errors as ReadAt.
  virtual StatusOr<PinnedBytes> ReadPinned(uint64_t offset, size_t length,
                                           const ReadHint& hint) const = 0;
};

}  // namespace stfs
