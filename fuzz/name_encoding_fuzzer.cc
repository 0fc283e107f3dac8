// Fuzz target: the tensor-name -> directory-name rule (fs/name_encoding.h).
// The input is two names separated by the first 0xFF byte (a byte no UTF-8
// name holds, so any name can still appear). Properties: every directory
// name is a valid single path component of at most 255 bytes with no control
// byte; DecodeDirectoryName inverts EscapeTensorName; a decodable directory
// name is exactly the escape of what it decodes to (so the escape is
// one-to-one); two different names that need no hashing never share a
// directory name.
#include <cstdint>
#include <string>
#include <string_view>

#include "fs/name_encoding.h"
#include "fuzz/fuzz_check.h"

namespace {

void CheckName(std::string_view name) {
  const std::string escaped = stfs::EscapeTensorName(name);
  const std::string encoded = stfs::EncodeTensorName(name);
  FUZZ_CHECK(!encoded.empty() && encoded.size() <= stfs::kMaxNameBytes);
  FUZZ_CHECK(encoded != "." && encoded != "..");
  for (unsigned char c : encoded) FUZZ_CHECK(c != '/' && c >= 0x20 && c != 0x7F);
  std::optional<std::string> decoded = stfs::DecodeDirectoryName(escaped);
  FUZZ_CHECK(decoded.has_value() && *decoded == name);
  if (escaped.size() <= stfs::kMaxNameBytes) FUZZ_CHECK(encoded == escaped);
  // Any string read as a directory name decodes only to a name escaping to it.
  std::optional<std::string> back = stfs::DecodeDirectoryName(name);
  if (back) FUZZ_CHECK(stfs::EscapeTensorName(*back) == name);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t cut = input.find('\xff');
  std::string_view a = input.substr(0, cut);
  std::string_view b = cut == std::string_view::npos ? std::string_view() : input.substr(cut + 1);
  CheckName(a);
  CheckName(b);
  if (a != b && stfs::EscapeTensorName(a).size() <= stfs::kMaxNameBytes &&
      stfs::EscapeTensorName(b).size() <= stfs::kMaxNameBytes) {
    FUZZ_CHECK(stfs::EncodeTensorName(a) != stfs::EncodeTensorName(b));
  }
  return 0;
}
