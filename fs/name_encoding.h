// Tensor name -> directory name, the rule README.md documents.
//
// Every tensor name is escaped, whatever it holds: each byte '%', '/',
// 0x00-0x1F and 0x7F becomes %XX (uppercase hex), so a listing never holds a
// control byte and escaping is one-to-one (a '%' in a directory name always
// starts an escape). A result of "." or ".." has each dot written %2E; the
// empty name is "%". A result longer than 255 bytes keeps its first 200
// bytes (never cutting a UTF-8 sequence or a %XX), then '~' and the 16
// lowercase hex digits of the 64-bit FNV-1a hash of the original name: only
// such hashed names can collide, and the inode table refuses those.
//
// DecodeDirectoryName inverts EscapeTensorName exactly, so a fuzzer can
// check Decode(Escape(x)) == x and Encode(x) == Escape(x) whenever the
// escaped form fits in 255 bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace stfs {

inline constexpr size_t kMaxNameBytes = 255;
inline constexpr size_t kTruncatedPrefixBytes = 200;

// Returns `name` with every '%', '/', 0x00-0x1F and 0x7F written %XX, "."
// and ".." written with %2E per dot and "" written "%"; never truncated.
std::string EscapeTensorName(std::string_view name);

// Returns the directory name for tensor `name`: EscapeTensorName, then the
// hashed 255-byte cut when longer than kMaxNameBytes.
std::string EncodeTensorName(std::string_view name);

// Returns the tensor name whose EscapeTensorName is `escaped`, or nullopt
// when no name escapes to it (a bad or lowercase %XX, a raw byte that is
// always escaped, "%2E" spelled "."...).
std::optional<std::string> DecodeDirectoryName(std::string_view escaped);

// Returns the 64-bit FNV-1a hash of `bytes`.
uint64_t Fnv1a64(std::string_view bytes);

}  // namespace stfs
