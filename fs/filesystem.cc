// Filesystem tree construction and the FUSE-free operations.
#include "fs/filesystem.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "core/npy_header.h"
#include "core/slice_reader.h"
#include "fs/name_encoding.h"

namespace stfs {
namespace {

std::string QuotedForMessage(std::string_view name) {
  std::string out = "\"";
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : name) {
    if (c == '"' || c == '\\') { out += '\\'; out += static_cast<char>(c); }
    else if (c < 0x20 || c == 0x7f) { out += "\\x"; out += kHex[c >> 4]; out += kHex[c & 0xF]; }
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

Status NoInode(InodeId ino) { return Status::NotFound("no inode " + std::to_string(ino)); }

}  // namespace

size_t Filesystem::CopyContent(std::string_view content, uint64_t offset, size_t length, char* dst) {
  if (offset >= content.size()) return 0;
  size_t n = std::min<uint64_t>(length, content.size() - offset);
  std::memcpy(dst, content.data() + offset, n);
  return n;
}

Filesystem::Filesystem(Catalogue catalogue) : catalogue_(std::move(catalogue)) {
  // The newest shard's time: the checkpoint changed when any shard did.
  for (const CatalogueShard& shard : catalogue_.shards()) {
    timespec t = shard.source->ModificationTime();
    if (t.tv_sec > mtime_.tv_sec || (t.tv_sec == mtime_.tv_sec && t.tv_nsec > mtime_.tv_nsec)) mtime_ = t;
  }
}

uint64_t Filesystem::SourceBytes() const {
  uint64_t total = 0;
  for (const CatalogueShard& shard : catalogue_.shards()) total += shard.file_size;
  return total;
}

InodeId Filesystem::AddNode(const Node& node) {
  nodes_.push_back(node);
  return nodes_.size();
}

void Filesystem::SetChildren(InodeId dir, const std::vector<InodeId>& children) {
  if (dir != kRootInode && children.size() > kIndexedChildren) {
    for (InodeId child : children) large_dir_index_.emplace(ChildKey{dir, nodes_[child - 1].name}, child);
  }
  nodes_[dir - 1].first_child = static_cast<uint32_t>(child_lists_.size());
  nodes_[dir - 1].child_count = static_cast<uint32_t>(children.size());
  child_lists_.insert(child_lists_.end(), children.begin(), children.end());
}

StatusOr<std::unique_ptr<Filesystem>> Filesystem::Create(std::unique_ptr<ByteSource> source, Header header,
                                                         FilesystemOptions options) {
  return Create(Catalogue::FromHeader(std::move(source), std::move(header)), options);
}

std::vector<InodeId> Filesystem::AddTensorFiles(InodeId dir_ino, size_t tensor_index) {
  auto add_child = [&](NodeKind kind, std::string_view name) {
    Node child;
    child.parent = dir_ino;
    child.kind = kind;
    child.name = name;
    child.tensor_index = tensor_index;
    return AddNode(child);
  };
  const TensorInfo& t = TensorAt(tensor_index);
  std::vector<InodeId> files;
  files.push_back(add_child(NodeKind::kTensorData, "data"));
  // data.npy comes right after data (its reads find data at ino - 1).
  // Sub-byte tensors whose bits are not whole bytes have no data.npy.
  if (NpyShapeOf(t.dtype, t.shape).ok()) files.push_back(add_child(NodeKind::kNpyData, kNpyFileName));
  files.push_back(add_child(NodeKind::kDtypeFile, "dtype"));
  files.push_back(add_child(NodeKind::kShapeFile, "shape"));
  // `slices` and `parts` answer lookups but are left out of listings, so a
  // tensor directory lists exactly its files.
  InodeId slices_ino = add_child(NodeKind::kSlicesDir, kSlicesDirName);
  add_child(NodeKind::kPartsDir, kPartsDirName);
  nodes_[dir_ino - 1].hidden_child = slices_ino;
  nodes_[dir_ino - 1].hidden_count = 2;
  nodes_[dir_ino - 1].tensor_index = tensor_index;
  return files;
}

InodeId Filesystem::AddShardsDirectory() {
  const auto& shards = catalogue_.shards();
  Node shards_dir;
  shards_dir.parent = kRootInode;
  shards_dir.name = kShardsDirName;
  InodeId shards_ino = AddNode(shards_dir);
  std::vector<InodeId> shard_dirs;
  for (size_t s = 0; s < shards.size(); ++s) {
    // Shard names may hold '/' (sub/x.safetensors): the tensor rule encodes it.
    shard_dir_names_.push_back(EncodeTensorName(shards[s].name));
    Node dir;
    dir.parent = shards_ino;
    dir.name = shard_dir_names_.back();
    dir.tensor_index = s;
    InodeId dir_ino = AddNode(dir);
    Node file;
    file.parent = dir_ino;
    file.tensor_index = s;
    file.kind = NodeKind::kShardMetadataFile;
    file.name = kMetadataFileName;
    InodeId metadata_ino = AddNode(file);
    file.kind = NodeKind::kShardHeaderSizeFile;
    file.name = kHeaderSizeFileName;
    InodeId header_size_ino = AddNode(file);
    SetChildren(dir_ino, {metadata_ino, header_size_ino});
    shard_dirs.push_back(dir_ino);
  }
  SetChildren(shards_ino, shard_dirs);
  nodes_[shards_ino - 1].subdirectories = static_cast<uint32_t>(shard_dirs.size());
  nodes_[0].subdirectories++;
  return shards_ino;
}

StatusOr<std::unique_ptr<Filesystem>> Filesystem::Create(Catalogue catalogue, FilesystemOptions options) {
  std::unique_ptr<Filesystem> fs(new Filesystem(std::move(catalogue)));
  const std::string& src = fs->catalogue_.source_name();
  const auto& tensors = fs->catalogue_.tensors();
  const size_t shard_count = fs->catalogue_.sharded() ? fs->catalogue_.shards().size() : 0;
  if (tensors.size() > (UINT32_MAX - 8) / 7 || shard_count > UINT32_MAX / 8) {
    return Status::InvalidArgument(src + ": too many tensors");
  }

  // The root, seven nodes per tensor, __metadata__, __stats__, __shards__
  // and three nodes per shard.
  fs->nodes_.reserve(4 + tensors.size() * 7 + shard_count * 3);
  fs->shard_dir_names_.reserve(shard_count);
  fs->child_lists_.reserve(tensors.size() * 4 + 2);
  fs->dir_names_.reserve(tensors.size());  // never grows past: names keep their address
  fs->root_index_.reserve(tensors.size() + 2);
  fs->tensor_dirs_.reserve(tensors.size());
  Node root;
  root.parent = kRootInode;
  root.kind = NodeKind::kDirectory;
  fs->AddNode(root);

  std::vector<InodeId> root_children;
  if (options.tree) {
    ASSIGN_OR_RETURN(root_children, fs->BuildTree());
  }
  // Tensor directories first, so that a tensor may take a reserved root name.
  for (size_t i = 0; !options.tree && i < tensors.size(); ++i) {
    fs->dir_names_.push_back(EncodeTensorName(tensors[i].info.name));
    Node dir;
    dir.parent = kRootInode;
    dir.kind = NodeKind::kDirectory;
    dir.name = fs->dir_names_.back();
    dir.tensor_index = i;
    InodeId dir_ino = fs->AddNode(dir);
    auto [it, inserted] = fs->root_index_.emplace(dir.name, dir_ino);
    if (!inserted) {
      const Node& other = fs->nodes_[it->second - 1];
      return Status::InvalidArgument(src + ": tensors " + QuotedForMessage(tensors[other.tensor_index].info.name) +
                                     " and " + QuotedForMessage(tensors[i].info.name) +
                                     " would share the directory name " + QuotedForMessage(other.name));
    }
    fs->tensor_dirs_.push_back(dir_ino);
    fs->SetChildren(dir_ino, fs->AddTensorFiles(dir_ino, i));
    fs->nodes_[0].subdirectories++;
    root_children.push_back(dir_ino);
  }

  Node metadata;
  metadata.parent = kRootInode;
  metadata.kind = NodeKind::kMetadataFile;
  metadata.name = kMetadataFileName;
  fs->metadata_text_ = fs->catalogue_.metadata_json() + "\n";
  InodeId metadata_ino = fs->AddNode(metadata);
  root_children.push_back(metadata_ino);
  fs->root_index_.emplace(kMetadataFileName, metadata_ino);

  // __stats__ is dropped when a tensor's directory already has that name.
  if (!fs->root_index_.count(kStatsFileName)) {
    Node stats;
    stats.parent = kRootInode;
    stats.kind = NodeKind::kStats;
    stats.name = kStatsFileName;
    InodeId stats_ino = fs->AddNode(stats);
    root_children.push_back(stats_ino);
    fs->root_index_.emplace(kStatsFileName, stats_ino);
  }
  // __shards__ likewise, and only for an index or a directory of shards.
  if (shard_count > 0 && !fs->root_index_.count(kShardsDirName)) {
    InodeId shards_ino = fs->AddShardsDirectory();
    root_children.push_back(shards_ino);
    fs->root_index_.emplace(kShardsDirName, shards_ino);
  }
  fs->SetChildren(kRootInode, root_children);
  fs->slice_views_ = std::make_unique<SliceViewCache>(fs->nodes_.size() + 1, options.max_slice_views);
  return fs;
}

const Filesystem::Node* Filesystem::Find(InodeId ino) const {
  if (ino == 0 || ino > nodes_.size()) return nullptr;
  return &nodes_[ino - 1];
}

const std::string& Filesystem::DirectoryName(size_t tensor_index) const {
  return dir_names_.at(tensor_index);
}

NodeAttr Filesystem::AttrOf(InodeId ino, const Node& node) const {
  NodeAttr attr;
  attr.ino = ino;
  attr.mtime = mtime_;
  switch (node.kind) {
    case NodeKind::kDirectory:
    case NodeKind::kSlicesDir:
    case NodeKind::kPartsDir:
      attr.is_directory = true;
      attr.mode = S_IFDIR | 0555;
      attr.nlink = 2 + node.subdirectories;
      attr.size = 0;
      break;
    case NodeKind::kDtypeFile:
    case NodeKind::kShapeFile:
    case NodeKind::kMetadataFile:
    case NodeKind::kShardMetadataFile:
    case NodeKind::kShardHeaderSizeFile:
      attr.mode = S_IFREG | 0444;
      attr.size = ContentOf(node).size();
      break;
    case NodeKind::kTensorData:
      attr.mode = S_IFREG | 0444;
      attr.size = TensorAt(node.tensor_index).byte_size();
      break;
    case NodeKind::kNpyData: {
      const TensorInfo& t = TensorAt(node.tensor_index);
      attr.mode = S_IFREG | 0444;
      attr.size = NpyFileSize(t.dtype, t.shape, t.byte_size());
      break;
    }
    case NodeKind::kStats:
      attr.mode = S_IFREG | 0444;
      attr.size = StatsJson().size();
      attr.is_volatile = true;
      break;
  }
  return attr;
}

std::string Filesystem::ContentOf(const Node& node) const {
  switch (node.kind) {
    case NodeKind::kDtypeFile: return std::string(DTypeName(TensorAt(node.tensor_index).dtype)) + "\n";
    case NodeKind::kShapeFile: return ShapeToString(TensorAt(node.tensor_index).shape) + "\n";
    case NodeKind::kMetadataFile: return metadata_text_;
    case NodeKind::kShardMetadataFile: return catalogue_.shards()[node.tensor_index].metadata_json + "\n";
    case NodeKind::kShardHeaderSizeFile:
      return std::to_string(catalogue_.shards()[node.tensor_index].header_size) + "\n";
    default: return std::string();
  }
}

StatusOr<NodeAttr> Filesystem::GetAttr(InodeId ino) const {
  if (IsSliceInode(ino)) {
    SliceRole role;
    ASSIGN_OR_RETURN(std::shared_ptr<const SliceView> view, FindSlice(ino, &role));
    return SliceAttr(*view, role);
  }
  const Node* node = Find(ino);
  if (node == nullptr) return NoInode(ino);
  return AttrOf(ino, *node);
}

StatusOr<InodeId> Filesystem::Parent(InodeId ino) const {
  if (IsSliceInode(ino)) {
    SliceRole role;
    ASSIGN_OR_RETURN(std::shared_ptr<const SliceView> view, FindSlice(ino, &role));
    return role == SliceRole::kDir ? view->parent_dir : view->first_ino;
  }
  const Node* node = Find(ino);
  if (node == nullptr) return NoInode(ino);
  return node->parent;
}

StatusOr<NodeAttr> Filesystem::Lookup(InodeId parent, std::string_view name) const {
  if (name == ".") return GetAttr(parent);
  if (name == "..") {
    ASSIGN_OR_RETURN(InodeId up, Parent(parent));
    return GetAttr(up);
  }
  if (IsSliceInode(parent)) {
    SliceRole role;
    ASSIGN_OR_RETURN(std::shared_ptr<const SliceView> view, FindSlice(parent, &role));
    if (role != SliceRole::kDir) return Status::InvalidArgument("not a directory");
    return LookupInView(*view, name);
  }
  const Node* dir = Find(parent);
  if (dir == nullptr) return NoInode(parent);
  if (dir->kind == NodeKind::kSlicesDir) {
    ASSIGN_OR_RETURN(std::shared_ptr<const SliceView> view, LookupSlice(parent, dir->tensor_index, name));
    return SliceAttr(*view, SliceRole::kDir);
  }
  if (dir->kind == NodeKind::kPartsDir) {
    ASSIGN_OR_RETURN(std::shared_ptr<const SliceView> view, LookupPartsWorld(parent, dir->tensor_index, name));
    return SliceAttr(*view, SliceRole::kDir);
  }
  if (dir->kind != NodeKind::kDirectory) return Status::InvalidArgument("not a directory");
  if (parent == kRootInode) {
    auto it = root_index_.find(name);
    if (it == root_index_.end()) return Status::NotFound(std::string(name));
    return AttrOf(it->second, nodes_[it->second - 1]);
  }
  if (dir->child_count > kIndexedChildren) {
    auto it = large_dir_index_.find(ChildKey{parent, name});
    if (it != large_dir_index_.end()) return AttrOf(it->second, nodes_[it->second - 1]);
  } else {
    for (uint32_t k = 0; k < dir->child_count; ++k) {
      InodeId child = child_lists_[dir->first_child + k];
      if (nodes_[child - 1].name == name) return AttrOf(child, nodes_[child - 1]);
    }
  }
  for (InodeId hidden = dir->hidden_child; hidden < dir->hidden_child + dir->hidden_count; ++hidden) {
    if (nodes_[hidden - 1].name == name) return AttrOf(hidden, nodes_[hidden - 1]);
  }
  return Status::NotFound(std::string(name));
}

size_t DirListing::size() const {
  if (view_ != nullptr && view_->parts_world != 0) return 0;  // parts/W: empty, like slices/
  if (view_ != nullptr) return Filesystem::HasNpy(*view_) ? 4 : 3;
  if (evicted_view_dir_ != 0) return 4;
  return child_count_;
}

std::string_view DirListing::NameAt(size_t index) const {
  if (view_ != nullptr || evicted_view_dir_ != 0) return Filesystem::kSliceFileNames[RoleIndexAt(index)];
  return fs_->nodes_[children_[index] - 1].name;
}

int DirListing::RoleIndexAt(size_t index) const {
  if (view_ != nullptr && !Filesystem::HasNpy(*view_)) return static_cast<int>(Filesystem::kViewListingWithoutNpy[index]);
  return static_cast<int>(Filesystem::kViewListing[index]);
}

NodeAttr DirListing::AttrAt(size_t index) const {
  if (view_ != nullptr) return fs_->SliceAttr(*view_, static_cast<Filesystem::SliceRole>(RoleIndexAt(index)));
  if (evicted_view_dir_ != 0) {
    NodeAttr attr;
    attr.ino = evicted_view_dir_ + RoleIndexAt(index);
    attr.mode = S_IFREG | 0444;
    attr.mtime = fs_->mtime_;
    return attr;
  }
  InodeId child = children_[index];
  return fs_->AttrOf(child, fs_->nodes_[child - 1]);
}

StatusOr<DirListing> Filesystem::OpenDir(InodeId ino) const {
  DirListing listing;
  listing.fs_ = this;
  if (IsSliceInode(ino)) {
    SliceRole role;
    StatusOr<std::shared_ptr<const SliceView>> view = FindSlice(ino, &role);
    if (view.status().code() == StatusCode::kStale && slice_views_->IsViewDirectory(ino)) {
      listing.evicted_view_dir_ = ino;
      return listing;
    }
    if (!view.ok()) return view.status();
    if (role != SliceRole::kDir) return Status::InvalidArgument("not a directory");
    listing.view_ = std::move(*view);
    return listing;
  }
  const Node* dir = Find(ino);
  if (dir == nullptr) return NoInode(ino);
  if (dir->kind == NodeKind::kSlicesDir || dir->kind == NodeKind::kPartsDir) {
    return listing;  // empty: views exist once looked up
  }
  if (dir->kind != NodeKind::kDirectory) return Status::InvalidArgument("not a directory");
  listing.children_ = child_lists_.data() + dir->first_child;
  listing.child_count_ = dir->child_count;
  return listing;
}

StatusOr<std::vector<DirEntry>> Filesystem::ReadDir(InodeId ino) const {
  ASSIGN_OR_RETURN(DirListing listing, OpenDir(ino));
  std::vector<DirEntry> entries;
  entries.reserve(listing.size());
  for (size_t i = 0; i < listing.size(); ++i) {
    entries.push_back(DirEntry{std::string(listing.NameAt(i)), listing.AttrAt(i)});
  }
  return entries;
}

StatusOr<FileHandle> Filesystem::Open(InodeId ino) const {
  FileHandle file;
  file.ino = ino;
  file.stream = next_stream_.fetch_add(1, std::memory_order_relaxed);
  if (IsSliceInode(ino)) {
    SliceRole role;
    ASSIGN_OR_RETURN(file.view, FindSlice(ino, &role));
    if (role == SliceRole::kDir) return Status::InvalidArgument("is a directory");
    return file;
  }
  const Node* node = Find(ino);
  if (node == nullptr) return NoInode(ino);
  if (node->kind == NodeKind::kDirectory || node->kind == NodeKind::kSlicesDir || node->kind == NodeKind::kPartsDir) {
    return Status::InvalidArgument("is a directory");
  }
  return file;
}

StatusOr<SourceWindow> Filesystem::DataWindow(InodeId ino, uint64_t offset, size_t length) const {
  const Node* node = Find(ino);
  if (node == nullptr || node->kind != NodeKind::kTensorData) return Status::InvalidArgument("not a data file");
  const CatalogueTensor& tensor = catalogue_.tensors()[node->tensor_index];
  const TensorInfo& t = tensor.info;
  SourceWindow window;
  window.source = catalogue_.ShardOf(tensor).source.get();
  window.fd = window.source->FileDescriptor();
  window.offset = catalogue_.FileOffset(tensor) + std::min(offset, t.byte_size());
  window.length = offset >= t.byte_size() ? 0 : static_cast<size_t>(std::min<uint64_t>(length, t.byte_size() - offset));
  return window;
}

StatusOr<size_t> Filesystem::Read(InodeId ino, uint64_t offset, size_t length, char* dst) const {
  ASSIGN_OR_RETURN(FileHandle file, Open(ino));
  file.stream = 0;  // one read is no stream: it must not count as a new sequential reader
  return Read(file, offset, length, dst);
}

StatusOr<size_t> Filesystem::Read(const FileHandle& file, uint64_t offset, size_t length, char* dst) const {
  if (file.view != nullptr) {
    const auto role = static_cast<SliceRole>((file.ino - file.view->first_ino) % SliceViewCache::kInodesPerView);
    return ReadSliceFile(*file.view, role, offset, length, dst, file.stream);
  }
  const Node* node = Find(file.ino);
  if (node == nullptr) return NoInode(file.ino);
  switch (node->kind) {
    case NodeKind::kDirectory:
    case NodeKind::kSlicesDir:
    case NodeKind::kPartsDir:
      return Status::InvalidArgument("is a directory");
    case NodeKind::kDtypeFile:
    case NodeKind::kShapeFile:
    case NodeKind::kMetadataFile:
    case NodeKind::kShardMetadataFile:
    case NodeKind::kShardHeaderSizeFile:
      return CopyContent(ContentOf(*node), offset, length, dst);
    case NodeKind::kStats:
      return CopyContent(StatsJson(), offset, length, dst);
    case NodeKind::kTensorData:
      break;
    case NodeKind::kNpyData: {
      const TensorInfo& t = TensorAt(node->tensor_index);
      ASSIGN_OR_RETURN(std::string npy_header, EncodeNpyHeader(t.dtype, t.shape));
      const InodeId data_ino = file.ino - 1;  // data is made just before data.npy
      return ReadNpy(npy_header, t.byte_size(), offset, length, dst,
                     [&](uint64_t data_offset, size_t data_length, char* out) {
                       return ReadTensorData(data_ino, data_offset, data_length, out, file.stream);
                     });
    }
  }
  return ReadTensorData(file.ino, offset, length, dst, file.stream);
}

StatusOr<size_t> Filesystem::ReadTensorData(InodeId data_ino, uint64_t offset, size_t length, char* dst,
                                            uint64_t stream) const {
  ASSIGN_OR_RETURN(SourceWindow window, DataWindow(data_ino, offset, length));
  if (window.length == 0) return size_t{0};
  Status status = ReadExactly(*window.source, window.offset, window.length, dst, DataHint(data_ino, stream));
  if (!status.ok()) {
    CountReadError();
    return status;
  }
  CountRead(window.length);
  return window.length;
}

ReadHint Filesystem::DataHint(InodeId data_ino, uint64_t stream) const {
  const CatalogueTensor& tensor = catalogue_.tensors()[Find(data_ino)->tensor_index];
  const uint64_t start = catalogue_.FileOffset(tensor);
  return ReadHint{stream, start + tensor.info.byte_size(), start};
}

StatusOr<PinnedBytes> Filesystem::LendData(const FileHandle& file, uint64_t offset, size_t length) const {
  if (file.view != nullptr) return Status::NotSupported("a slice view's bytes are gathered");
  ASSIGN_OR_RETURN(SourceWindow window, DataWindow(file.ino, offset, length));
  const auto* lender = dynamic_cast<const PinnedReadable*>(window.source);
  if (lender == nullptr) return Status::NotSupported("the source lends no memory");
  if (window.length == 0) return PinnedBytes();
  StatusOr<PinnedBytes> bytes = lender->ReadPinned(window.offset, window.length, DataHint(file.ino, file.stream));
  if (!bytes.ok()) {
    CountReadError();
    return bytes;
  }
  if (bytes->size() != window.length) {
    CountReadError();
    return Status::IOError(window.source->Describe() + ": short read of tensor data");
  }
  CountRead(window.length);
  return bytes;
}

void Filesystem::Remember(InodeId ino) const {
  if (IsSliceInode(ino)) slice_views_->Remember(ino);
}

void Filesystem::Forget(InodeId ino, uint64_t count) const {
  if (IsSliceInode(ino)) slice_views_->Forget(ino, count);
}

void Filesystem::CountRead(size_t bytes) const {
  reads_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(bytes, std::memory_order_relaxed);
}

void Filesystem::CountReadError() const { read_errors_.fetch_add(1, std::memory_order_relaxed); }

std::string Filesystem::StatsJson() const {
  // One shard: its stats object; several: an array of them, in shard order.
  auto stats_of = [](const ByteSource& source) {
    std::string stats = source.StatsJson();
    while (!stats.empty() && (stats.back() == '\n' || stats.back() == ' ')) stats.pop_back();
    return stats.empty() ? std::string("null") : stats;
  };
  std::string source_stats;
  if (catalogue_.shards().size() == 1) {
    source_stats = stats_of(source());
  } else {
    source_stats = "[";
    for (const CatalogueShard& shard : catalogue_.shards()) {
      if (source_stats.size() > 1) source_stats += ',';
      source_stats += stats_of(*shard.source);
    }
    source_stats += "]";
  }
  return "{\"fs\":{\"reads\":" + std::to_string(reads_.load(std::memory_order_relaxed)) +
         ",\"bytes_read\":" + std::to_string(bytes_read_.load(std::memory_order_relaxed)) +
         ",\"read_errors\":" + std::to_string(read_errors_.load(std::memory_order_relaxed)) +
         ",\"tensors\":" + std::to_string(catalogue_.tensors().size()) +
         ",\"slice_views\":" + std::to_string(slice_views_->size()) + "},\"source\":" + source_stats + "}\n";
}

}  // namespace stfs
