// Filesystem: the stfs tree in core types, with no FUSE in sight.
//
// Built once from a validated Header: every node (root, one directory per
// tensor, its dtype/shape/data files and `slices` directory, and the root's
// __metadata__ and __stats__ files) gets an inode number that never changes
// for the life of the mount. The static tree is immutable after Create(), so
// any number of threads may call every const method at once.
//
// Slice views are the one growing part: looking up a numpy index such as
// `0:1024,:` inside a tensor's `slices` directory creates (once) a directory
// holding that slice's `data`, `dtype` and `shape`, planned by the core slice
// planner and read window by window. Views get inode numbers above the
// static tree's and keep them for the life of the mount.
//
// Locking: slice_mu_ guards slice_views_ and slice_index_ only; it is never
// held while reading the source. Views live in a deque, so a pointer to one
// stays valid after the lock is dropped. Reads of `data` go straight to the
// source: there is no buffer or cache of tensor bytes here.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/byte_source.h"
#include "core/header.h"
#include "core/slice_plan.h"
#include "core/status.h"

namespace stfs {

using InodeId = uint64_t;
inline constexpr InodeId kRootInode = 1;

// Root files other than tensor directories.
inline constexpr std::string_view kMetadataFileName = "__metadata__";
inline constexpr std::string_view kStatsFileName = "__stats__";
// The directory, in each tensor directory, where slice views are looked up.
inline constexpr std::string_view kSlicesDirName = "slices";
// Most slice views one mount creates.
inline constexpr size_t kMaxSliceViews = 1 << 20;

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
  int fd = -1;          // source's FileDescriptor(), -1 when it has none
  uint64_t offset = 0;  // absolute offset in the source
  size_t length = 0;    // 0 at or past the end of the tensor
};

class Filesystem {
 public:
  // Builds the tree; refuses two tensors that get the same directory name.
  static StatusOr<std::unique_ptr<Filesystem>> Create(std::unique_ptr<ByteSource> source, Header header);

  Filesystem(const Filesystem&) = delete;
  Filesystem& operator=(const Filesystem&) = delete;

  // Returns the attributes of `name` inside directory `parent` (NotFound).
  StatusOr<NodeAttr> Lookup(InodeId parent, std::string_view name) const;
  StatusOr<NodeAttr> GetAttr(InodeId ino) const;
  // Lists a directory in a stable order, without "." and "..".
  StatusOr<std::vector<DirEntry>> ReadDir(InodeId ino) const;
  // Returns the parent of a directory (the root is its own parent).
  StatusOr<InodeId> Parent(InodeId ino) const;
  // Checks that `ino` is a file that can be opened for reading.
  Status OpenFile(InodeId ino) const;
  // Reads up to `length` bytes at `offset` of file `ino` into `dst`; returns
  // the count, 0 at or past the end.
  StatusOr<size_t> Read(InodeId ino, uint64_t offset, size_t length, char* dst) const;
  // For a `data` file, returns the source window a read maps to; for other
  // files an InvalidArgument.
  StatusOr<SourceWindow> DataWindow(InodeId ino, uint64_t offset, size_t length) const;
  // Records a read served outside Read() (an fd reply), for __stats__.
  void CountRead(size_t bytes) const;
  void CountReadError() const;

  const Header& header() const { return header_; }
  const ByteSource& source() const { return *source_; }
  size_t inode_count() const { return nodes_.size(); }
  // The directory name chosen for tensor `index` of header().tensors.
  const std::string& DirectoryName(size_t tensor_index) const;
  // Current __stats__ content.
  std::string StatsJson() const;

 private:
  enum class NodeKind { kDirectory, kStaticFile, kTensorData, kStats, kSlicesDir };

  struct Node {
    InodeId parent = kRootInode;
    NodeKind kind = NodeKind::kDirectory;
    std::string name;
    std::string content;           // kStaticFile
    size_t tensor_index = 0;       // kTensorData and tensor directories
    std::vector<InodeId> children; // kDirectory, in listing order
    uint32_t subdirectories = 0;
    InodeId hidden_child = 0;      // found by Lookup, left out of ReadDir
  };

  // One looked-up slice: four inodes from first_ino (dir, data, dtype, shape).
  struct SliceView {
    InodeId first_ino = 0;
    InodeId slices_dir = 0;
    size_t tensor_index = 0;
    std::string spec;
    SlicePlan plan;
    std::string dtype_text;
    std::string shape_text;
  };
  enum class SliceRole { kDir = 0, kData = 1, kDtype = 2, kShape = 3 };
  static constexpr std::string_view kSliceFileNames[4] = {"", "data", "dtype", "shape"};

  Filesystem(std::unique_ptr<ByteSource> source, Header header);
  InodeId AddNode(Node node);
  const Node* Find(InodeId ino) const;
  NodeAttr AttrOf(InodeId ino, const Node& node) const;
  bool IsSliceInode(InodeId ino) const { return ino > nodes_.size(); }
  // Returns the view owning `ino` and its role, or nullptr.
  const SliceView* FindSlice(InodeId ino, SliceRole* role) const;
  NodeAttr SliceAttr(const SliceView& view, SliceRole role) const;
  // Returns the view for `spec` on tensor `tensor_index`, creating it.
  StatusOr<const SliceView*> LookupSlice(InodeId slices_dir, size_t tensor_index, std::string_view spec) const;

  std::unique_ptr<ByteSource> source_;
  Header header_;
  timespec mtime_{0, 0};
  std::vector<Node> nodes_;  // nodes_[ino - 1]
  std::vector<InodeId> tensor_dirs_;  // by tensor index
  // Root children by name (the root can hold many thousands of entries).
  std::unordered_map<std::string, InodeId> root_index_;

  mutable std::mutex slice_mu_;
  mutable std::deque<SliceView> slice_views_;                          // guarded by slice_mu_
  mutable std::map<std::pair<size_t, std::string>, size_t> slice_index_;  // guarded by slice_mu_

  mutable std::atomic<uint64_t> reads_{0};
  mutable std::atomic<uint64_t> bytes_read_{0};
  mutable std::atomic<uint64_t> read_errors_{0};
};

}  // namespace stfs
