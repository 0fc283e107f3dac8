// Filesystem: the stfs tree in core types, with no FUSE in sight.
//
// Built once from a Catalogue (one safetensors file, or the shards of an
// index or a directory), in time and memory linear in the tensor count:
// every node (root, one directory per tensor, its dtype/shape/data files and
// `slices` directory, the root's __metadata__ and __stats__ files and, for a
// sharded checkpoint, __shards__/<shard>/{__metadata__,header_size}) gets
// an inode number that never changes for the life of the mount. The static
// tree is immutable after Create(), so any number of threads may call every
// const method at once. A new kind of node (say, a file of a checkpoint
// part) is a NodeKind plus its cases in AttrOf and Read.
//
// Listings are never copied per open directory: OpenDir returns a DirListing
// that points into the immutable tree (or, for a slice view, holds the
// view), and entries are made one at a time as a reader asks for them.
//
// Slice views — `<tensor>/slices/<numpy index>/` with `data`, `dtype` and
// `shape` — live in a SliceViewCache bounded by
// FilesystemOptions::max_slice_views; slice_view_cache.h states the eviction
// rule. In short: an inode of an evicted view answers Stale (ESTALE), the
// kernel then looks the name up again and gets a fresh view; open files and
// directory handles pin their view, so they keep working.
//
// Reads of `data` go straight to the tensor's shard: there is no buffer or
// cache of tensor bytes here.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/byte_source.h"
#include "core/catalogue.h"
#include "core/header.h"
#include "core/pinned_read.h"
#include "core/status.h"
#include "fs/slice_view_cache.h"

namespace stfs {

inline constexpr InodeId kRootInode = 1;

// Root files other than tensor directories.
inline constexpr std::string_view kMetadataFileName = "__metadata__";
inline constexpr std::string_view kStatsFileName = "__stats__";
// Sharded checkpoints: __shards__/<shard file>/{__metadata__,header_size}.
inline constexpr std::string_view kShardsDirName = "__shards__";
inline constexpr std::string_view kHeaderSizeFileName = "header_size";
// Beside every `data` (tensors, slices, parts): an .npy header, then the
// same bytes (core/npy_header.h); absent where the bytes cannot be described.
inline constexpr std::string_view kNpyFileName = "data.npy";
// The directory, in each tensor directory, where slice views are looked up.
inline constexpr std::string_view kSlicesDirName = "slices";
// The hidden directory of rank parts: parts/W/R, parts/W/R@D (~ceil).
inline constexpr std::string_view kPartsDirName = "parts";
// Slice views kept by default (-o max_slice_views=); a view costs a few
// hundred bytes.
inline constexpr size_t kDefaultMaxSliceViews = 65536;

struct FilesystemOptions {
  size_t max_slice_views = kDefaultMaxSliceViews;
  // -o tree: dotted names as nested directories (core/tensor_tree.h).
  bool tree = false;
};

struct NodeAttr {
  InodeId ino = 0;
  bool is_directory = false;
  uint32_t mode = 0;   // type bits | permission bits (0555 dirs, 0444 files)
  uint32_t nlink = 1;
  uint64_t size = 0;
  timespec mtime{0, 0};
  // Content may change between reads (__stats__): never cache it.
  bool is_volatile = false;
};

struct DirEntry {
  std::string name;
  NodeAttr attr;
};

// Where a read of `data` lies in the source, for callers that can hand the
// kernel a file descriptor instead of bytes.
struct SourceWindow {
  const ByteSource* source = nullptr;  // the tensor's shard
  int fd = -1;          // source's FileDescriptor(), -1 when it has none
  uint64_t offset = 0;  // absolute offset in the source
  size_t length = 0;    // 0 at or past the end of the tensor
};

class Filesystem;

// A directory's entries, in a stable order, without "." and "..". Cheap to
// hold: it points into the filesystem's immutable tree (or pins one slice
// view) and makes each entry only when asked. Valid while the Filesystem is.
class DirListing {
 public:
  size_t size() const;
  // Returns the name and attributes of entry `index` < size(); the name's
  // data() is NUL-terminated.
  std::string_view NameAt(size_t index) const;
  NodeAttr AttrAt(size_t index) const;
  // False for the listing of an evicted slice view's directory: its names
  // and inode numbers are known, not its sizes; a lookup (which answers
  // Stale) makes the kernel look the view up again.
  bool attributes_known() const { return evicted_view_dir_ == 0; }

 private:
  friend class Filesystem;
  // A view directory's entry `index`: its role in the view.
  int RoleIndexAt(size_t index) const;
  const Filesystem* fs_ = nullptr;
  const InodeId* children_ = nullptr;               // static directories
  size_t child_count_ = 0;
  std::shared_ptr<const SliceView> view_;          // a slice view's directory
  InodeId evicted_view_dir_ = 0;                   // an evicted view's directory
};

// An open file. For a slice view's files it pins the view, so reads keep
// working after the view leaves the cache.
struct FileHandle {
  InodeId ino = 0;
  std::shared_ptr<const SliceView> view;
  // Unique per Open (never 0): the source tracks read-ahead per stream
  // (ReadHint::stream), as the kernel does per open file.
  uint64_t stream = 0;
};

class Filesystem {
 public:
  // Builds the tree; refuses two tensors that get the same directory name.
  static StatusOr<std::unique_ptr<Filesystem>> Create(Catalogue catalogue, FilesystemOptions options = {});
  // One safetensors file whose header was read from `source`.
  static StatusOr<std::unique_ptr<Filesystem>> Create(std::unique_ptr<ByteSource> source, Header header,
                                                      FilesystemOptions options = {});

  Filesystem(const Filesystem&) = delete;
  Filesystem& operator=(const Filesystem&) = delete;

  // Returns the attributes of `name` inside directory `parent` (NotFound;
  // Stale when `parent` is an evicted slice view's). Counts no reference:
  // the caller that hands the result to the kernel calls Remember.
  StatusOr<NodeAttr> Lookup(InodeId parent, std::string_view name) const;
  StatusOr<NodeAttr> GetAttr(InodeId ino) const;
  // Returns a directory's shared listing.
  StatusOr<DirListing> OpenDir(InodeId ino) const;
  // Returns a copy of a directory's entries (for tests and small callers;
  // open directories use OpenDir).
  StatusOr<std::vector<DirEntry>> ReadDir(InodeId ino) const;
  // Returns the parent of a directory (the root is its own parent).
  StatusOr<InodeId> Parent(InodeId ino) const;
  // Opens file `ino` for reading (InvalidArgument for a directory).
  StatusOr<FileHandle> Open(InodeId ino) const;
  // Reads up to `length` bytes at `offset` of an open file into `dst`;
  // returns the count, 0 at or past the end.
  StatusOr<size_t> Read(const FileHandle& file, uint64_t offset, size_t length, char* dst) const;
  // Open + Read, for callers without a handle: reads as stream 0 (unknown).
  StatusOr<size_t> Read(InodeId ino, uint64_t offset, size_t length, char* dst) const;
  // For a tensor's `data` file, returns the source window a read maps to;
  // for other files an InvalidArgument.
  StatusOr<SourceWindow> DataWindow(InodeId ino, uint64_t offset, size_t length) const;
  // Reads an open tensor `data` file as spans of its source's own memory, pinned
  // until the result is dropped (core/pinned_read.h), for callers that hand
  // the bytes on without copying them; NotSupported for other files and for
  // sources that do not lend memory (the caller then uses Read).
  StatusOr<PinnedBytes> LendData(const FileHandle& file, uint64_t offset, size_t length) const;

  // The kernel's references (lookup counts): Remember once per entry handed
  // to the kernel, Forget when it sends FORGET. Only slice views care.
  void Remember(InodeId ino) const;
  void Forget(InodeId ino, uint64_t count) const;

  // Records a read served outside Read() (an fd reply), for __stats__.
  void CountRead(size_t bytes) const;
  void CountReadError() const;

  const Catalogue& catalogue() const { return catalogue_; }
  // The first shard's source (the only one for a single file).
  const ByteSource& source() const { return *catalogue_.shards().front().source; }
  // Bytes of every shard together.
  uint64_t SourceBytes() const;
  size_t inode_count() const { return nodes_.size(); }
  size_t slice_view_count() const { return slice_views_->size(); }
  // The directory name chosen for tensor `index` of catalogue().tensors().
  const std::string& DirectoryName(size_t tensor_index) const;
  // Current __stats__ content.
  std::string StatsJson() const;

 private:
  friend class DirListing;
  // File kinds hold no bytes of their own: dtype, shape and metadata text is
  // made from the header when asked, so a node costs ~56 bytes.
  // kShardMetadataFile and kShardHeaderSizeFile use tensor_index as the shard's index.
  enum class NodeKind : uint8_t {
    kDirectory, kDtypeFile, kShapeFile, kMetadataFile, kTensorData, kNpyData, kStats, kSlicesDir, kPartsDir,
    kShardMetadataFile, kShardHeaderSizeFile
  };

  struct Node {
    InodeId parent = kRootInode;
    uint64_t tensor_index = 0;     // tensor directories and their files
    std::string_view name;         // a literal, or one of dir_names_
    uint32_t first_child = 0;      // kDirectory: child_lists_[first_child, +child_count),
    uint32_t child_count = 0;      // in listing order
    uint32_t subdirectories = 0;
    NodeKind kind = NodeKind::kDirectory;
    uint8_t hidden_count = 0;      // hidden_child .. +hidden_count-1: found by
    InodeId hidden_child = 0;      // Lookup, left out of listings
  };

  // A slice view's five inodes, from its first: dir, data, dtype, shape, data.npy.
  enum class SliceRole { kDir = 0, kData = 1, kDtype = 2, kShape = 3, kNpy = 4 };
  static constexpr std::string_view kSliceFileNames[5] = {"", "data", "dtype", "shape", "data.npy"};
  // A view directory's listing, in name order, with and without data.npy.
  static constexpr SliceRole kViewListing[4] = {SliceRole::kData, SliceRole::kNpy, SliceRole::kDtype,
                                                SliceRole::kShape};
  static constexpr SliceRole kViewListingWithoutNpy[3] = {SliceRole::kData, SliceRole::kDtype, SliceRole::kShape};
  static bool HasNpy(const SliceView& view);
  // Size of an .npy file of that array (0 when it has none).
  static uint64_t NpyFileSize(DType dtype, const std::vector<uint64_t>& shape, uint64_t data_bytes);
  // Reads [offset, +length) of an .npy file: `npy_header`, then `data_size`
  // bytes read by `read_data(data_offset, length, dst)`.
  using DataReader = std::function<StatusOr<size_t>(uint64_t data_offset, size_t length, char* dst)>;
  static StatusOr<size_t> ReadNpy(const std::string& npy_header, uint64_t data_size, uint64_t offset, size_t length,
                                  char* dst, const DataReader& read_data);

  explicit Filesystem(Catalogue catalogue);
  const TensorInfo& TensorAt(size_t index) const { return catalogue_.tensors()[index].info; }
  const ByteSource& SourceOf(size_t tensor_index) const {
    return *catalogue_.ShardOf(catalogue_.tensors()[tensor_index]).source;
  }
  // Adds tensor `tensor_index`'s files under `dir_ino` (and its hidden
  // slices/ and parts/); returns the listed ones.
  std::vector<InodeId> AddTensorFiles(InodeId dir_ino, size_t tensor_index);
  // -o tree: adds the directories of core/tensor_tree.h with each tensor's
  // files in the directory of its last segment; returns the root's
  // directories (filesystem_tree.cc).
  StatusOr<std::vector<InodeId>> BuildTree();
  // Adds __shards__/<shard>/{__metadata__,header_size}; returns its inode.
  InodeId AddShardsDirectory();
  InodeId AddNode(const Node& node);
  const Node* Find(InodeId ino) const;
  NodeAttr AttrOf(InodeId ino, const Node& node) const;
  // The bytes of a dtype, shape or metadata file.
  std::string ContentOf(const Node& node) const;
  // Points `dir`'s children at the next `children.size()` slots of child_lists_.
  void SetChildren(InodeId dir, const std::vector<InodeId>& children);
  bool IsSliceInode(InodeId ino) const { return ino > nodes_.size(); }

  // Returns the view owning `ino` and its role: Stale when evicted,
  // NotFound when never issued.
  StatusOr<std::shared_ptr<const SliceView>> FindSlice(InodeId ino, SliceRole* role) const;
  NodeAttr SliceAttr(const SliceView& view, SliceRole role) const;
  // Returns the view for `spec` on tensor `tensor_index`, creating it.
  StatusOr<std::shared_ptr<const SliceView>> LookupSlice(InodeId slices_dir, size_t tensor_index,
                                                         std::string_view spec) const;
  // Returns the `parts/W` directory named `world` (NotFound, logged, for a
  // W the tensor cannot be split into).
  StatusOr<std::shared_ptr<const SliceView>> LookupPartsWorld(InodeId parts_dir, size_t tensor_index,
                                                              std::string_view world) const;
  // Returns the part named `rank` ("R", "R@D", "~ceil") in `parts/W` (NotFound, logged).
  StatusOr<std::shared_ptr<const SliceView>> LookupPart(const SliceView& world_dir, std::string_view rank) const;
  // Lookup in a view directory (a slice, a part or a parts/W directory).
  StatusOr<NodeAttr> LookupInView(const SliceView& view, std::string_view name) const;
  // Copies the part of `content` at `offset` into `dst`; returns the count.
  static size_t CopyContent(std::string_view content, uint64_t offset, size_t length, char* dst);
  // Returns the view of `plan` (on tensor `tensor_index`) under directory
  // `parent_dir`, creating it: any node whose names plan slices of a tensor
  // (not only `slices/`) gets bounded, canonical views from here.
  std::shared_ptr<const SliceView> ViewOf(InodeId parent_dir, size_t tensor_index, SlicePlan plan) const;
  // Reads a tensor's `data` (node `data_ino`) from its shard.
  // What a read of tensor `data` node `data_ino` tells its source: the
  // reader's stream and the tensor's bytes in the shard.
  ReadHint DataHint(InodeId data_ino, uint64_t stream) const;
  // `stream` is the reading FileHandle's (ReadHint::stream).
  StatusOr<size_t> ReadTensorData(InodeId data_ino, uint64_t offset, size_t length, char* dst,
                                  uint64_t stream) const;
  StatusOr<size_t> ReadSliceFile(const SliceView& view, SliceRole role, uint64_t offset, size_t length, char* dst,
                                 uint64_t stream) const;

  Catalogue catalogue_;
  timespec mtime_{0, 0};
  std::vector<Node> nodes_;  // nodes_[ino - 1]
  std::vector<InodeId> child_lists_;  // every directory's children, back to back
  std::vector<std::string> dir_names_;  // by tensor index; reserved in full, never moved
  std::vector<std::string> shard_dir_names_;  // by shard index; reserved in full, never moved
  std::vector<std::string> tree_names_;  // -o tree: directory names; reserved in full, never moved
  // Directories other than the root with more than kIndexedChildren
  // children are looked up by hash, not by scanning.
  static constexpr uint32_t kIndexedChildren = 32;
  struct ChildKey {
    InodeId parent;
    std::string_view name;
    bool operator==(const ChildKey&) const = default;
  };
  struct ChildKeyHash {
    size_t operator()(const ChildKey& key) const {
      return std::hash<std::string_view>()(key.name) ^ (std::hash<InodeId>()(key.parent) * 0x9E3779B97F4A7C15ull);
    }
  };
  std::unordered_map<ChildKey, InodeId, ChildKeyHash> large_dir_index_;
  std::string metadata_text_;
  std::vector<InodeId> tensor_dirs_;  // by tensor index
  // Root children by name (the root can hold many thousands of entries);
  // keys point into dir_names_ and literals, which never move.
  std::unordered_map<std::string_view, InodeId> root_index_;

  // Numbered from nodes_.size() + 1; made once the static tree is complete.
  std::unique_ptr<SliceViewCache> slice_views_;

  mutable std::atomic<uint64_t> next_stream_{1};
  mutable std::atomic<uint64_t> reads_{0};
  mutable std::atomic<uint64_t> bytes_read_{0};
  mutable std::atomic<uint64_t> read_errors_{0};
};

}  // namespace stfs
