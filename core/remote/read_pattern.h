// ReadPatternTracker: tells sequential readers from random ones by offset.
//
// A ByteSource sees reads without file handles, and the kernel may deliver
// one reader's sequential requests slightly out of order from several FUSE
// threads. So a "stream" is just where recent reads ended: a read that starts
// within `tolerance` of a stream's end continues it. Only continued streams
// earn read-ahead; a random reader never matches and never prefetches.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace stfs {

class ReadPatternTracker {
 public:
  explicit ReadPatternTracker(uint64_t tolerance) : tolerance_(tolerance) {}

  // Records a read of [offset, offset+length) and returns how many bytes its
  // stream had read before it, or 0 when the read starts a new stream.
  uint64_t Record(uint64_t offset, uint64_t length);

 private:
  struct Stream {
    uint64_t next = 0;   // where the stream's reads have reached
    uint64_t bytes = 0;  // bytes read in the stream; 0 = unused slot
    uint64_t stamp = 0;  // last use, for replacing the oldest stream
  };
  static constexpr size_t kStreams = 16;

  const uint64_t tolerance_;
  std::mutex mu_;
  std::array<Stream, kStreams> streams_{};  // guarded by mu_
  uint64_t clock_ = 0;                      // guarded by mu_
};

}  // namespace stfs
