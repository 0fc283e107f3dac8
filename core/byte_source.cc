// Helpers shared by every ByteSource implementation.
#include "core/byte_source.h"

#include <string>

namespace stfs {

Status ReadExactly(const ByteSource& source, uint64_t offset, size_t length, char* dst) {
  size_t done = 0;
  while (done < length) {
    ASSIGN_OR_RETURN(size_t n, source.ReadAt(offset + done, length - done, dst + done));
    if (n == 0) {
      return Status::IOError(source.Describe() + ": unexpected end of data at byte " +
                             std::to_string(offset + done) + " (wanted " +
                             std::to_string(length) + " bytes at " + std::to_string(offset) +
                             ", source size " + std::to_string(source.Size()) + ")");
    }
    done += n;
  }
  return Status::OK();
}

}  // namespace stfs
