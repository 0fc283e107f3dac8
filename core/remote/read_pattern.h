// ReadPatternTracker: tells sequential readers from random ones by offset.
//
// A ByteSource sees reads without file handles, and the kernel may deliver
// one reader's sequential requests slightly out of order from several FUSE
// threads. So a "stream" is just where recent reads ended: a read that starts
// near a stream's end (within 8 read lengths, at least 256 KiB, at most
// `max_slack`) continues it. Only streams continued twice earn read-ahead, so
// a random reader whose reads happen to land close together rarely does.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace stfs {

class ReadPatternTracker {
 public:
  explicit ReadPatternTracker(uint64_t max_slack) : max_slack_(max_slack) {}

  struct Position {
    uint64_t reads_before = 0;  // earlier reads of the same stream (0: a new stream)
    uint64_t bytes_before = 0;  // bytes those reads covered
  };
  // Records a read of [offset, offset+length) and says where it stands in
  // its stream.
  Position Record(uint64_t offset, uint64_t length);

 private:
  struct Stream {
    uint64_t next = 0;   // where the stream's reads have reached
    uint64_t bytes = 0;  // bytes read in the stream
    uint64_t reads = 0;  // reads in the stream; 0 = unused slot
    uint64_t stamp = 0;  // last use, for replacing the oldest stream
  };
  static constexpr size_t kStreams = 16;

  const uint64_t max_slack_;
  std::mutex mu_;
  std::array<Stream, kStreams> streams_{};  // guarded by mu_
  uint64_t clock_ = 0;                      // guarded by mu_
};

}  // namespace stfs
