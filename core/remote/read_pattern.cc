// ReadPatternTracker (see read_pattern.h).
#include "core/remote/read_pattern.h"

#include <algorithm>

namespace stfs {

uint64_t ReadPatternTracker::Record(uint64_t offset, uint64_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  ++clock_;
  Stream* oldest = &streams_[0];
  for (Stream& s : streams_) {
    if (s.bytes > 0 && offset + tolerance_ >= s.next && offset <= s.next + tolerance_) {
      uint64_t before = s.bytes;
      s.bytes += length;
      s.next = std::max(s.next, offset + length);
      s.stamp = clock_;
      return before;
    }
    if (s.stamp < oldest->stamp) oldest = &s;
  }
  *oldest = Stream{offset + length, std::max<uint64_t>(length, 1), clock_};
  return 0;
}

}  // namespace stfs
