// ReadPatternTracker: tells sequential readers from random ones.
//
// Where the reader is known (a stream: one open file, ReadHint::stream), its
// reads are tracked on their own, as the kernel tracks read-ahead per open
// file: a read continues the stream when it starts near where the stream's
// reads have reached (FUSE threads deliver one reader's requests slightly
// out of order, and the kernel sends a scan's small tails late: up to a
// block behind counts), and the stream's progress counts only bytes that advance
// it, so a reader hopping about one region never looks like a scan, however
// many reads it makes; a jump starts the stream afresh. Two readers of the
// same bytes are two streams, and a random reader cannot extend a scan.
//
// Where it is not (stream 0: a ByteSource read without a file), a "stream"
// is just where recent reads ended: a read that starts near a stream's end
// continues it. "Near" is within 8 read lengths, at least 256 KiB, at most
// `max_slack`. Only streams continued twice earn read-ahead, so a random
// reader whose reads happen to land close together rarely does.
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
    uint64_t bytes_before = 0;  // bytes those reads covered (per stream: advanced by)
    // Per stream only: the reader's stream existed and this read left it
    // (jumped), or starts past where its reads have reached (skipped: the
    // reader has the bytes between, as the kernel has what it cached); the
    // stream's reads so far cover less than half of the bytes they span
    // (sparse: a reader filling holes in its page cache, not a scan).
    bool jumped = false;
    bool skipped = false;
    bool sparse = false;
  };
  // Records a read of [offset, offset+length) by `stream` (0: unknown) and
  // says where it stands in its stream.
  Position Record(uint64_t offset, uint64_t length, uint64_t stream = 0);

 private:
  struct Stream {
    uint64_t id = 0;     // the reader's stream, 0 for one found by offset
    uint64_t start = 0;  // where the stream's first read started
    uint64_t next = 0;   // where the stream's reads have reached
    uint64_t bytes = 0;  // bytes read in the stream
    uint64_t reads = 0;  // reads in the stream; 0 = unused slot
    uint64_t stamp = 0;  // last use, for replacing the oldest stream
  };
  // Enough for the readers of one object at once (every FUSE thread, a few
  // open files each); a stream pushed out just starts again.
  static constexpr size_t kStreams = 32;

  // Whether a read at `offset` starts within `behind` before or `ahead`
  // after where stream `s` has reached.
  static bool Continues(const Stream& s, uint64_t offset, uint64_t behind, uint64_t ahead) {
    return s.reads > 0 && offset + behind >= s.next && offset <= s.next + ahead;
  }

  const uint64_t max_slack_;
  std::mutex mu_;
  std::array<Stream, kStreams> streams_{};  // guarded by mu_
  uint64_t clock_ = 0;                      // guarded by mu_
};

}  // namespace stfs
