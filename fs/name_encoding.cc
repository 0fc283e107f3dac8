// Directory names for tensors (see name_encoding.h for the rule).
#include "fs/name_encoding.h"

#include <cstdio>

namespace stfs {
namespace {

constexpr char kUpperHex[] = "0123456789ABCDEF";

bool IsAlwaysEscaped(unsigned char c) { return c == '%' || c == '/' || c < 0x20 || c == 0x7F; }

// Returns the value of an uppercase hex digit, or -1.
int UpperHexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string EscapeTensorName(std::string_view name) {
  if (name.empty()) return "%";
  if (name == ".") return "%2E";
  if (name == "..") return "%2E%2E";
  std::string out;
  out.reserve(name.size() + 8);
  for (unsigned char c : name) {
    if (IsAlwaysEscaped(c)) {
      out += '%';
      out += kUpperHex[c >> 4];
      out += kUpperHex[c & 0xF];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string EncodeTensorName(std::string_view name) {
  std::string out = EscapeTensorName(name);
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

std::optional<std::string> DecodeDirectoryName(std::string_view escaped) {
  if (escaped == "%") return std::string();
  if (escaped == "%2E") return std::string(".");
  if (escaped == "%2E%2E") return std::string("..");
  if (escaped.empty() || escaped == "." || escaped == "..") return std::nullopt;
  std::string out;
  out.reserve(escaped.size());
  for (size_t i = 0; i < escaped.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(escaped[i]);
    if (c != '%') {
      if (IsAlwaysEscaped(c)) return std::nullopt;
      out += static_cast<char>(c);
      continue;
    }
    if (i + 2 >= escaped.size()) return std::nullopt;
    const int high = UpperHexValue(escaped[i + 1]);
    const int low = UpperHexValue(escaped[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    const unsigned char value = static_cast<unsigned char>(high * 16 + low);
    // Only the bytes the rule escapes are ever written %XX.
    if (!IsAlwaysEscaped(value)) return std::nullopt;
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

}  // namespace stfs
