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

Status CheckRunInside(const ByteSource& source, uint64_t offset, size_t length) {
  if (offset <= source.Size() && length <= source.Size() - offset) return Status::OK();
  return Status::IOError(source.Describe() + ": read of " + std::to_string(length) + " bytes at " +
                                 std::to_string(offset) + " lies past the end (source size " +
                                 std::to_string(source.Size()) + ")");
}

Status ByteSource::ReadRuns(std::span<const ByteRun> runs, const ReadHint& /*hint*/) const {
  for (const ByteRun& run : runs) RETURN_IF_ERROR(CheckRunInside(*this, run.offset, run.length));
  for (const ByteRun& run : runs) RETURN_IF_ERROR(ReadExactly(*this, run.offset, run.length, run.dst));
  return Status::OK();
}

Status ReadExactly(const ByteSource& source, uint64_t offset, size_t length, char* dst, const ReadHint& hint) {
  const ByteRun run{offset, length, dst};
  return source.ReadRuns(std::span<const ByteRun>(&run, 1), hint);
}

}  // namespace stfs
