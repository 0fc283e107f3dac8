// Fuzz target: a whole safetensors file (8-byte length, header, data) read
// by ReadHeader from memory. Whatever the bytes, the result is a Header whose
// tensors tile the data buffer exactly, or one Corruption line naming the
// source; never a crash, a throw or a hang.
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

#include "core/byte_source.h"
#include "core/header.h"
#include "fuzz/fuzz_check.h"

namespace {

class MemorySource : public stfs::ByteSource {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  stfs::StatusOr<size_t> ReadAt(uint64_t offset, size_t length, char* dst) const override {
    if (offset >= bytes_.size()) return size_t{0};
    size_t n = std::min<uint64_t>(length, bytes_.size() - offset);
    std::memcpy(dst, bytes_.data() + offset, n);
    return n;
  }
  uint64_t Size() const override { return bytes_.size(); }
  const std::string& Describe() const override { return name_; }

 private:
  std::string_view bytes_;
  std::string name_ = "fuzz.safetensors";
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MemorySource source(std::string_view(reinterpret_cast<const char*>(data), size));
  stfs::StatusOr<stfs::Header> header = stfs::ReadHeader(source);
  if (!header.ok()) {
    const std::string& message = header.status().message();
    FUZZ_CHECK(header.status().code() == stfs::StatusCode::kCorruption);
    FUZZ_CHECK(message.rfind("fuzz.safetensors: ", 0) == 0);
    FUZZ_CHECK(message.find('\n') == std::string::npos);
    return 0;
  }
  FUZZ_CHECK(header->file_size == size);
  FUZZ_CHECK(header->data_start() <= size);
  uint64_t total = 0;
  std::set<std::string_view> names;
  for (const stfs::TensorInfo& t : header->tensors) {
    FUZZ_CHECK(t.begin <= t.end && t.end <= header->data_size());
    stfs::StatusOr<uint64_t> bytes = stfs::TensorByteSize(t.dtype, t.shape);
    FUZZ_CHECK(bytes.ok() && *bytes == t.byte_size());
    FUZZ_CHECK(names.insert(t.name).second);
    FUZZ_CHECK(header->Find(t.name) == &t);
    total += t.byte_size();
  }
  FUZZ_CHECK(total == header->data_size());
  FUZZ_CHECK(!header->MetadataJson().empty());
  // The in-memory entry point agrees with the source one.
  std::string_view json(reinterpret_cast<const char*>(data) + 8, header->header_size);
  stfs::StatusOr<stfs::Header> again = stfs::ParseHeaderJson(json, size, "fuzz.safetensors");
  FUZZ_CHECK(again.ok() && again->tensors.size() == header->tensors.size());
  return 0;
}
