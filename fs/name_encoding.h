// Tensor name -> directory name, the rule README.md documents.
//
// A tensor name that is already a valid path component (non-empty, not "."
// or "..", no '/' or NUL byte, at most 255 bytes) is used as it is.
// Otherwise each byte '%', '/', 0x00-0x1F and 0x7F becomes %XX (uppercase
// hex); a result of "." or ".." has each dot written %2E; the empty name is
// "%"; a result longer than 255 bytes keeps its first 200 bytes (never
// cutting a UTF-8 sequence or a %XX), then '~' and the 16 lowercase hex
// digits of the 64-bit FNV-1a hash of the original name. Collisions are the
// caller's to detect (the inode table refuses them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace stfs {

inline constexpr size_t kMaxNameBytes = 255;
inline constexpr size_t kTruncatedPrefixBytes = 200;

// Returns true when `name` can be a directory entry as it is.
bool IsValidPathComponent(std::string_view name);

// Returns the directory name for tensor `name`.
std::string EncodeTensorName(std::string_view name);

// Returns the 64-bit FNV-1a hash of `bytes`.
uint64_t Fnv1a64(std::string_view bytes);

}  // namespace stfs
