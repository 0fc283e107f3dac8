// Directory names for tensors (see name_encoding.h for the rule).
#include "fs/name_encoding.h"

#include <cstdio>

namespace stfs {

bool IsValidPathComponent(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.size() > kMaxNameBytes) return false;
  for (char c : name) {
    if (c == '/' || c == '\0') return false;
  }
  return true;
}

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string EncodeTensorName(std::string_view name) {
  if (IsValidPathComponent(name)) return std::string(name);
  if (name.empty()) return "%";

  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size() + 16);
  for (unsigned char c : name) {
    if (c == '%' || c == '/' || c < 0x20 || c == 0x7F) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (out == ".") return "%2E";
  if (out == "..") return "%2E%2E";
  if (out.size() <= kMaxNameBytes) return out;

  size_t cut = kTruncatedPrefixBytes;
  // Every '%' in `out` starts an escape: do not split one.
  if (out[cut - 1] == '%') cut -= 1;
  else if (out[cut - 2] == '%') cut -= 2;
  // Do not split a UTF-8 sequence: back up to the byte that starts it.
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  char suffix[18];
  std::snprintf(suffix, sizeof suffix, "~%016llx", static_cast<unsigned long long>(Fnv1a64(name)));
  out += suffix;
  return out;
}

}  // namespace stfs
