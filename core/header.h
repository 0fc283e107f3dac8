// The safetensors header: parse and validate every rule of docs/format.md.
//
// Parsing never throws and never trusts the file: every failure is a
// Corruption naming the source, the tensor when there is one, and the rule
// broken. Offsets kept here are plain values; nothing holds source bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/byte_source.h"
#include "core/dtype.h"
#include "core/status.h"

namespace stfs {

// Headers larger than this are refused before anything else is read (rule 2).
inline constexpr uint64_t kMaxHeaderSize = 100'000'000;

struct TensorInfo {
  std::string name;             // exactly as in the JSON (may hold '/', NUL, ...)
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;  // empty for a scalar
  uint64_t begin = 0;           // data_offsets[0], relative to the data buffer
  uint64_t end = 0;             // data_offsets[1]
  uint64_t element_count = 0;   // product of shape (1 for a scalar)

  uint64_t byte_size() const { return end - begin; }
};

struct Header {
  std::string source;               // Describe() of the source, for messages
  uint64_t header_size = 0;         // N
  uint64_t file_size = 0;           // 8 + N + data bytes
  std::vector<TensorInfo> tensors;  // in the order they appear in the JSON
  // __metadata__ as (key, value) in JSON order; empty when absent or null.
  std::vector<std::pair<std::string, std::string>> metadata;
  bool has_metadata = false;        // the key was present and not null

  // File offset of the first data byte.
  uint64_t data_start() const { return 8 + header_size; }
  uint64_t data_size() const { return file_size - data_start(); }
  // Returns the tensor named `name`, or nullptr.
  const TensorInfo* Find(std::string_view name) const;
  // Renders __metadata__ as a compact JSON object ("{}" when absent).
  std::string MetadataJson() const;
};

// Reads the header of `source` (8 + N bytes) and validates it against the
// source's size.
StatusOr<Header> ReadHeader(const ByteSource& source);

// Validates header JSON already in memory. `json` is the N header bytes and
// `file_size` the whole file's size; `source_name` prefixes every message.
StatusOr<Header> ParseHeaderJson(std::string_view json, uint64_t file_size,
                                 std::string_view source_name);

// Returns the number of bytes of a tensor of `dtype` and `shape`, refusing
// overflow and bit counts that are not whole bytes.
StatusOr<uint64_t> TensorByteSize(DType dtype, const std::vector<uint64_t>& shape);

// Renders a shape as a JSON array without spaces ("[32000,4096]", "[]").
std::string ShapeToString(const std::vector<uint64_t>& shape);

}  // namespace stfs
