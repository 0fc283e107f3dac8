// HeaderByteStream: chunked header bytes, checked for UTF-8 and NUL.
#include "core/header_bytes.h"

#include <algorithm>
#include <cstring>

namespace stfs {

size_t FirstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    // ASCII runs are the common case: skip them eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, s.data() + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

namespace {

// Returns how many bytes at the end of `s` begin a UTF-8 sequence that the
// next chunk completes (0..3).
size_t IncompleteTail(std::string_view s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return len > back ? back : 0;
  }
  return 0;
}

}  // namespace

HeaderByteStream::HeaderByteStream(uint64_t size, Fill fill, std::string source, size_t chunk_size)
    : size_(size), fill_(std::move(fill)), source_(std::move(source)),
      buffer_(static_cast<size_t>(std::min<uint64_t>(size, chunk_size)) + 3) {}

HeaderByteStream::int_type HeaderByteStream::Stop(Status status) {
  if (!problem_) problem_ = std::move(status);
  setg(buffer_.data(), buffer_.data(), buffer_.data());
  return traits_type::eof();
}

HeaderByteStream::int_type HeaderByteStream::underflow() {
  if (problem_) return traits_type::eof();
  for (;;) {
    if (next_ >= size_) {
      if (carried_ == 0) return traits_type::eof();
      return Stop(Status::Corruption(source_ + ": header is not valid UTF-8 (bad byte at header offset " +
                                     std::to_string(buffer_start_) + ")"));
    }
    // Move a split sequence to the front, then fill after it.
    if (carried_) std::memmove(buffer_.data(), egptr(), carried_);
    buffer_start_ = next_ - carried_;
    const size_t length = static_cast<size_t>(std::min<uint64_t>(buffer_.size() - 3, size_ - next_));
    Status read = fill_(next_, length, buffer_.data() + carried_);
    if (!read.ok()) return Stop(std::move(read));
    next_ += length;
    std::string_view chunk(buffer_.data(), carried_ + length);

    // nlohmann stops at a NUL as if the input ended there, which would accept
    // "{}" followed by NUL padding; raw NUL is never valid JSON.
    if (const void* nul = std::memchr(chunk.data(), '\0', chunk.size())) {
      return Stop(Status::Corruption(source_ + ": header is not a single JSON object: NUL byte at header offset " +
                                     std::to_string(buffer_start_ + (static_cast<const char*>(nul) - chunk.data()))));
    }
    carried_ = next_ < size_ ? IncompleteTail(chunk) : 0;
    std::string_view whole = chunk.substr(0, chunk.size() - carried_);
    size_t bad = FirstInvalidUtf8(whole);
    if (bad != std::string_view::npos) {
      return Stop(Status::Corruption(source_ + ": header is not valid UTF-8 (bad byte at header offset " +
                                     std::to_string(buffer_start_ + bad) + ")"));
    }
    setg(buffer_.data(), buffer_.data(), buffer_.data() + whole.size());
    if (!whole.empty()) return traits_type::to_int_type(buffer_[0]);
  }
}

}  // namespace stfs
