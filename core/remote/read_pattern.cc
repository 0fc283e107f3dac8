// ReadPatternTracker (see read_pattern.h).
#include "core/remote/read_pattern.h"

#include <algorithm>

namespace stfs {

ReadPatternTracker::Position ReadPatternTracker::Record(uint64_t offset, uint64_t length,
                                                        uint64_t stream) {
  const uint64_t slack = std::min(std::max<uint64_t>(8 * length, 256 << 10), max_slack_);
  const uint64_t end = offset + length;
  std::lock_guard<std::mutex> lock(mu_);
  ++clock_;
  Stream* oldest = &streams_[0];
  for (Stream& s : streams_) {
    if (s.reads > 0 && s.id == stream && (stream != 0 || Continues(s, offset, slack, slack))) {
      // A stream's stragglers (FUSE threads finish its reads out of order;
      // the kernel sends small tails late) may trail by up to a block,
      // whatever their own size.
      if (stream != 0 && !Continues(s, offset, max_slack_, slack)) {
        s = Stream{stream, offset, end, length, 1, clock_};  // a jump: the stream starts again here
        Position jump;
        jump.jumped = true;
        return jump;
      }
      Position before{s.reads, s.bytes};
      if (stream != 0) {
        before.skipped = offset > s.next;
        before.sparse = 2 * s.bytes < s.next - s.start;
      }
      s.reads += 1;
      // Per stream, only progress counts (see the header); by offset, every
      // byte, as before streams were known.
      s.bytes += stream != 0 ? (end > s.next ? end - std::max(offset, s.next) : 0) : length;
      s.next = std::max(s.next, end);
      s.stamp = clock_;
      return before;
    }
    if (s.stamp < oldest->stamp) oldest = &s;
  }
  *oldest = Stream{stream, offset, end, length, 1, clock_};
  return Position{};
}

}  // namespace stfs
