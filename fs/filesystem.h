// Filesystem: the stfs tree in core types, with no FUSE in sight.
//
// Built once from a validated Header: every node (root, one directory per
// tensor, its dtype/shape/data files, and the root's __metadata__ and
// __stats__ files) gets an inode number that never changes for the life of
// the mount. After Create() the tree is immutable, so any number of threads
// may call every const method at once; only the statistics counters move,
// and they are atomics. Reads of `data` go straight to the source window:
// there is no buffer or cache of tensor bytes here.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/byte_source.h"
#include "core/header.h"
#include "core/status.h"

namespace stfs {

using InodeId = uint64_t;
inline constexpr InodeId kRootInode = 1;

// Root files other than tensor directories.
inline constexpr std::string_view kMetadataFileName = "__metadata__";
inline constexpr std::string_view kStatsFileName = "__stats__";

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
  enum class NodeKind { kDirectory, kStaticFile, kTensorData, kStats };

  struct Node {
    InodeId parent = kRootInode;
    NodeKind kind = NodeKind::kDirectory;
    std::string name;
    std::string content;           // kStaticFile
    size_t tensor_index = 0;       // kTensorData and tensor directories
    std::vector<InodeId> children; // kDirectory, in listing order
    uint32_t subdirectories = 0;
  };

  Filesystem(std::unique_ptr<ByteSource> source, Header header);
  InodeId AddNode(Node node);
  const Node* Find(InodeId ino) const;
  NodeAttr AttrOf(InodeId ino, const Node& node) const;

  std::unique_ptr<ByteSource> source_;
  Header header_;
  timespec mtime_{0, 0};
  std::vector<Node> nodes_;  // nodes_[ino - 1]
  std::vector<InodeId> tensor_dirs_;  // by tensor index
  // Root children by name (the root can hold many thousands of entries).
  std::unordered_map<std::string, InodeId> root_index_;

  mutable std::atomic<uint64_t> reads_{0};
  mutable std::atomic<uint64_t> bytes_read_{0};
  mutable std::atomic<uint64_t> read_errors_{0};
};

}  // namespace stfs
