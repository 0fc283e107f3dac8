// Catalogue: every tensor a mount shows, with the shard (source) it reads
// from, whatever the SOURCE was: one .safetensors file, an index.json naming
// shards, or a directory of shards.
//
// A catalogue owns one ByteSource per shard (one open file or one HTTP
// connection pool per shard, never per tensor). Every shard's header is read
// and validated when the catalogue is built (in parallel, on a bounded number
// of threads), and the index is checked against those headers: a tensor in
// two shards, a weight_map entry whose shard cannot be opened or lacks the
// tensor, a shard tensor missing from weight_map, and a shard path leaving the
// index's directory are each refused with one line naming the index or shard
// and the problem. Building is linear in the number of tensors (hash maps).
// Nothing here knows FUSE or HTTP: shards are opened through a ShardOpener,
// so local directories and base URLs share this code. Immutable once built;
// safe to read from many threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/byte_source.h"
#include "core/checkpoint_index.h"
#include "core/header.h"
#include "core/status.h"

namespace stfs {

// Opens the shard called `relative_name` (a weight_map value already passed
// by ValidateShardName) relative to the index's directory or base URL. It is
// called from several threads at once and must be safe for that.
using ShardOpener = std::function<StatusOr<std::unique_ptr<ByteSource>>(const std::string& relative_name)>;

struct CatalogueOptions {
  // Most shards opened and read at once (threads); at least 1.
  int parallel_shard_reads = 8;
};

struct CatalogueShard {
  std::string name;                     // weight_map value / file name; the source's Describe() for one file
  std::unique_ptr<ByteSource> source;   // the shard's bytes
  uint64_t header_size = 0;             // N of this shard
  uint64_t file_size = 0;
  std::string metadata_json = "{}";     // its own __metadata__ as compact JSON
  bool has_metadata = false;            // its header had a non-null __metadata__

  uint64_t data_start() const { return 8 + header_size; }
};

struct CatalogueTensor {
  TensorInfo info;     // offsets relative to its shard's data buffer
  uint32_t shard = 0;  // index into Catalogue::shards()
};

class Catalogue {
 public:
  Catalogue(Catalogue&&) = default;
  Catalogue& operator=(Catalogue&&) = default;
  Catalogue(const Catalogue&) = delete;
  Catalogue& operator=(const Catalogue&) = delete;

  // One safetensors file: reads and validates its header.
  static StatusOr<Catalogue> FromFile(std::unique_ptr<ByteSource> source);
  // One safetensors file whose header the caller already read from `source`.
  static Catalogue FromHeader(std::unique_ptr<ByteSource> source, Header header);
  // An index already parsed; `index_name` names it in messages. Shards are
  // opened with `open` and read in parallel.
  static StatusOr<Catalogue> FromIndex(CheckpointIndex index, std::string index_name, const ShardOpener& open,
                                       const CatalogueOptions& options = {});
  // Shards given by name, no index (a directory of .safetensors files):
  // every tensor of every shard, shard by shard in the order given.
  static StatusOr<Catalogue> FromShards(const std::vector<std::string>& shard_names, std::string source_name,
                                        const ShardOpener& open, const CatalogueOptions& options = {});

  // A model repository reached through `open` (hf://ORG/REPO[@REV]): its
  // model.safetensors.index.json when `open` finds it (NotFound means it does
  // not exist), else its model.safetensors. `repository_name` names it in
  // messages; the index's shards are opened through `open` too.
  static StatusOr<Catalogue> FromRepository(const std::string& repository_name, const ShardOpener& open,
                                            const CatalogueOptions& options = {});

  // Names the SOURCE in messages (a file, an index, a directory).
  const std::string& source_name() const { return source_name_; }
  // True when built from an index or a directory (the mount then shows
  // __shards__/<shard>/__metadata__ and inspect a shard column).
  bool sharded() const { return sharded_; }
  // The mount's __metadata__ content: the file's __metadata__, the index's
  // "metadata" object, or "{}" for a directory without an index.
  const std::string& metadata_json() const { return metadata_json_; }
  const std::vector<CatalogueShard>& shards() const { return shards_; }
  // Tensors in order: the file's header order; weight_map order for an
  // index; shard by shard, each in header order, for a directory.
  const std::vector<CatalogueTensor>& tensors() const { return tensors_; }
  // Returns the tensor named `name`, or nullptr (a hash lookup).
  const CatalogueTensor* Find(std::string_view name) const;
  // Returns the shard a tensor reads from.
  const CatalogueShard& ShardOf(const CatalogueTensor& tensor) const { return shards_[tensor.shard]; }
  // Returns the absolute offset of the tensor's first byte in its shard.
  uint64_t FileOffset(const CatalogueTensor& tensor) const {
    return shards_[tensor.shard].data_start() + tensor.info.begin;
  }

 private:
  Catalogue() = default;
  void BuildNameIndex();

  std::string source_name_;
  bool sharded_ = false;
  std::string metadata_json_ = "{}";
  std::vector<CatalogueShard> shards_;
  std::vector<CatalogueTensor> tensors_;
  // Views into tensors_[i].info.name; tensors_ never changes after building
  // (moving the catalogue moves the vector's buffer, so the views stay valid).
  std::unordered_map<std::string_view, uint32_t> by_name_;
};

// Opens a local SOURCE: a directory (its one *.safetensors.index.json, else
// every *.safetensors file in byte order of name; two index files are
// refused), a file whose name ends in ".index.json" (an index, shards beside
// it), or any other file (one safetensors file).
StatusOr<Catalogue> OpenLocalCatalogue(const std::string& path, const CatalogueOptions& options = {});

// Returns a ShardOpener that opens `directory`/NAME as a local file.
ShardOpener LocalShardOpener(std::string directory);

}  // namespace stfs
