// A sharded checkpoint's index (`*.safetensors.index.json`) parsed and checked
// on its own, before any shard is opened:
//   {"metadata": {...}, "weight_map": {"<tensor>": "<shard file>", ...}}
//
// The parse is linear in the number of entries (weight_map entries are kept
// in a vector and a hash set, never in a JSON object), keeps weight_map in
// file order, and refuses: invalid JSON, a top level that is not an object, a
// missing or non-object weight_map, a non-string shard name, a tensor named
// twice in weight_map, a metadata that is neither an object nor null, a key
// repeated at the top level or in metadata. Shard names are checked by
// ValidateShardName before any is opened. Other top-level keys are ignored.
// Messages are one line, prefixed by the index's name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/byte_source.h"
#include "core/status.h"

namespace stfs {

// Index files larger than this are refused before they are read.
inline constexpr uint64_t kMaxIndexSize = 100'000'000;

struct CheckpointIndex {
  std::string metadata_json = "{}";     // "metadata" as compact JSON; "{}" when absent or null
  std::vector<std::string> shard_names;  // distinct, in order of first appearance in weight_map
  struct Entry {
    std::string tensor;
    uint32_t shard = 0;  // index into shard_names
  };
  std::vector<Entry> weight_map;  // in file order
};

// Parses and checks index JSON; `index_name` prefixes every message.
StatusOr<CheckpointIndex> ParseCheckpointIndex(std::string_view json, std::string_view index_name);

// Reads the whole index from `source` (at most kMaxIndexSize bytes) and
// parses it, naming the source in messages.
StatusOr<CheckpointIndex> ReadCheckpointIndex(const ByteSource& source);

// Accepts a shard name only when it is a plain relative path that stays in
// the index's directory, whether joined to a local directory or to a base
// URL: not empty; no leading '/', no scheme ("x:") and no "//" host part; no
// empty, "." or ".." segment (also when written with %2E); no '\', '?', '#'
// or control byte. Returns InvalidArgument saying which rule it broke.
Status ValidateShardName(std::string_view name);

// Renders a tensor or shard name JSON-quoted, so that control bytes and
// newlines never break a one-line message.
std::string QuotedName(std::string_view name);

}  // namespace stfs
