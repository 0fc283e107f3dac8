// HeaderByteStream: the header's N bytes fed to the JSON lexer in chunks,
// checked for UTF-8 (rule 4) and raw NUL (rule 5) as they pass.
//
// Reading a 100 MB header through a chunk buffer instead of one string keeps
// the parse's memory to what it builds. The stream ends early at the first
// bad chunk or read error; problem() then says why, and that wins over
// whatever the lexer says about the shortened input.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace stfs {

// Returns the offset of the first byte of `s` that is not part of a
// well-formed UTF-8 sequence, or npos.
size_t FirstInvalidUtf8(std::string_view s);

class HeaderByteStream : public std::streambuf {
 public:
  // Copies header bytes [offset, offset + length) into `dst`.
  using Fill = std::function<Status(uint64_t offset, size_t length, char* dst)>;

  // `size` is N; `source` prefixes messages.
  HeaderByteStream(uint64_t size, Fill fill, std::string source, size_t chunk_size = 4 << 20);

  // Why the stream ended before N bytes, if it did.
  const std::optional<Status>& problem() const { return problem_; }

 protected:
  int_type underflow() override;

 private:
  int_type Stop(Status status);

  const uint64_t size_;
  const Fill fill_;
  const std::string source_;
  std::vector<char> buffer_;
  uint64_t next_ = 0;         // header offset of the next byte to fill
  uint64_t buffer_start_ = 0;  // header offset of buffer_[0]
  size_t carried_ = 0;        // bytes of a split UTF-8 sequence kept for the next chunk
  std::optional<Status> problem_;
};

}  // namespace stfs
