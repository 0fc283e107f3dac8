// ReadPatternTracker (see read_pattern.h).
#include "core/remote/read_pattern.h"

#include <algorithm>

namespace stfs {

ReadPatternTracker::Position ReadPatternTracker::Record(uint64_t offset, uint64_t length) {
  const uint64_t slack = std::min(std::max<uint64_t>(8 * length, 256 << 10), max_slack_);
  std::lock_guard<std::mutex> lock(mu_);
  ++clock_;
  Stream* oldest = &streams_[0];
  for (Stream& s : streams_) {
    if (s.reads > 0 && offset + slack >= s.next && offset <= s.next + slack) {
      Position before{s.reads, s.bytes};
      s.reads += 1;
      s.bytes += length;
      s.next = std::max(s.next, offset + length);
      s.stamp = clock_;
      return before;
    }
    if (s.stamp < oldest->stamp) oldest = &s;
  }
  *oldest = Stream{offset + length, length, 1, clock_};
  return Position{};
}

}  // namespace stfs
