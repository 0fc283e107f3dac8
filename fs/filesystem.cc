// Filesystem tree construction and the FUSE-free operations.
#include "fs/filesystem.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "core/slice_reader.h"
#include "fs/name_encoding.h"

namespace stfs {
namespace {

std::string QuotedForMessage(const std::string& name) {
  std::string out = "\"";
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : name) {
    if (c == '"' || c == '\\') { out += '\\'; out += static_cast<char>(c); }
    else if (c < 0x20 || c == 0x7f) { out += "\\x"; out += kHex[c >> 4]; out += kHex[c & 0xF]; }
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

}  // namespace

Filesystem::Filesystem(std::unique_ptr<ByteSource> source, Header header)
    : source_(std::move(source)), header_(std::move(header)), mtime_(source_->ModificationTime()) {}

InodeId Filesystem::AddNode(Node node) {
  nodes_.push_back(std::move(node));
  return nodes_.size();
}

StatusOr<std::unique_ptr<Filesystem>> Filesystem::Create(std::unique_ptr<ByteSource> source, Header header) {
  std::unique_ptr<Filesystem> fs(new Filesystem(std::move(source), std::move(header)));
  const std::string& src = fs->source_->Describe();
  const auto& tensors = fs->header_.tensors;

  fs->nodes_.reserve(2 + tensors.size() * 4);
  Node root;
  root.parent = kRootInode;
  root.kind = NodeKind::kDirectory;
  fs->AddNode(std::move(root));

  // Tensor directories first, so that a tensor may take a reserved root name.
  std::unordered_map<std::string, size_t> owner;  // directory name -> tensor index
  fs->tensor_dirs_.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i];
    std::string dir_name = EncodeTensorName(t.name);
    auto [it, inserted] = owner.emplace(dir_name, i);
    if (!inserted) {
      return Status::InvalidArgument(src + ": tensors " + QuotedForMessage(tensors[it->second].name) + " and " +
                                     QuotedForMessage(t.name) + " would share the directory name " +
                                     QuotedForMessage(dir_name));
    }
    Node dir;
    dir.parent = kRootInode;
    dir.kind = NodeKind::kDirectory;
    dir.name = dir_name;
    dir.tensor_index = i;
    InodeId dir_ino = fs->AddNode(std::move(dir));
    fs->tensor_dirs_.push_back(dir_ino);

    Node data;
    data.parent = dir_ino;
    data.kind = NodeKind::kTensorData;
    data.name = "data";
    data.tensor_index = i;
    Node dtype;
    dtype.parent = dir_ino;
    dtype.kind = NodeKind::kStaticFile;
    dtype.name = "dtype";
    dtype.content = std::string(DTypeName(t.dtype)) + "\n";
    Node shape;
    shape.parent = dir_ino;
    shape.kind = NodeKind::kStaticFile;
    shape.name = "shape";
    shape.content = ShapeToString(t.shape) + "\n";
    // `slices` answers lookups but is left out of listings, so a tensor
    // directory lists exactly data, dtype and shape.
    Node slices;
    slices.parent = dir_ino;
    slices.kind = NodeKind::kSlicesDir;
    slices.name = std::string(kSlicesDirName);
    slices.tensor_index = i;
    InodeId data_ino = fs->AddNode(std::move(data));
    InodeId dtype_ino = fs->AddNode(std::move(dtype));
    InodeId shape_ino = fs->AddNode(std::move(shape));
    InodeId slices_ino = fs->AddNode(std::move(slices));
    fs->nodes_[dir_ino - 1].children = {data_ino, dtype_ino, shape_ino};
    fs->nodes_[dir_ino - 1].hidden_child = slices_ino;
    fs->nodes_[0].children.push_back(dir_ino);
    fs->nodes_[0].subdirectories++;
    fs->root_index_.emplace(fs->nodes_[dir_ino - 1].name, dir_ino);
  }

  Node metadata;
  metadata.parent = kRootInode;
  metadata.kind = NodeKind::kStaticFile;
  metadata.name = std::string(kMetadataFileName);
  metadata.content = fs->header_.MetadataJson() + "\n";
  InodeId metadata_ino = fs->AddNode(std::move(metadata));
  fs->nodes_[0].children.push_back(metadata_ino);
  fs->root_index_.emplace(std::string(kMetadataFileName), metadata_ino);

  // __stats__ is dropped when a tensor's directory already has that name.
  if (!fs->root_index_.count(std::string(kStatsFileName))) {
    Node stats;
    stats.parent = kRootInode;
    stats.kind = NodeKind::kStats;
    stats.name = std::string(kStatsFileName);
    InodeId stats_ino = fs->AddNode(std::move(stats));
    fs->nodes_[0].children.push_back(stats_ino);
    fs->root_index_.emplace(std::string(kStatsFileName), stats_ino);
  }
  return fs;
}

const Filesystem::Node* Filesystem::Find(InodeId ino) const {
  if (ino == 0 || ino > nodes_.size()) return nullptr;
  return &nodes_[ino - 1];
}

const std::string& Filesystem::DirectoryName(size_t tensor_index) const {
  return nodes_[tensor_dirs_.at(tensor_index) - 1].name;
}

NodeAttr Filesystem::AttrOf(InodeId ino, const Node& node) const {
  NodeAttr attr;
  attr.ino = ino;
  attr.mtime = mtime_;
  switch (node.kind) {
    case NodeKind::kDirectory:
    case NodeKind::kSlicesDir:
      attr.is_directory = true;
      attr.mode = S_IFDIR | 0555;
      attr.nlink = 2 + node.subdirectories;
      attr.size = 0;
      break;
    case NodeKind::kStaticFile:
      attr.mode = S_IFREG | 0444;
      attr.size = node.content.size();
      break;
    case NodeKind::kTensorData:
      attr.mode = S_IFREG | 0444;
      attr.size = header_.tensors[node.tensor_index].byte_size();
      break;
    case NodeKind::kStats:
      attr.mode = S_IFREG | 0444;
      attr.size = StatsJson().size();
      attr.is_volatile = true;
      break;
  }
  return attr;
}

StatusOr<NodeAttr> Filesystem::GetAttr(InodeId ino) const {
  if (IsSliceInode(ino)) {
    SliceRole role;
    const SliceView* view = FindSlice(ino, &role);
    if (view == nullptr) return Status::NotFound("no inode " + std::to_string(ino));
    return SliceAttr(*view, role);
  }
  const Node* node = Find(ino);
  if (node == nullptr) return Status::NotFound("no inode " + std::to_string(ino));
  return AttrOf(ino, *node);
}

StatusOr<InodeId> Filesystem::Parent(InodeId ino) const {
  if (IsSliceInode(ino)) {
    SliceRole role;
    const SliceView* view = FindSlice(ino, &role);
    if (view == nullptr) return Status::NotFound("no inode " + std::to_string(ino));
    return role == SliceRole::kDir ? view->slices_dir : view->first_ino;
  }
  const Node* node = Find(ino);
  if (node == nullptr) return Status::NotFound("no inode " + std::to_string(ino));
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
    const SliceView* view = FindSlice(parent, &role);
    if (view == nullptr) return Status::NotFound("no inode " + std::to_string(parent));
    if (role != SliceRole::kDir) return Status::InvalidArgument("not a directory");
    for (int r = 1; r < 4; ++r) {
      if (name == kSliceFileNames[r]) return SliceAttr(*view, static_cast<SliceRole>(r));
    }
    return Status::NotFound(std::string(name));
  }
  const Node* dir = Find(parent);
  if (dir == nullptr) return Status::NotFound("no inode " + std::to_string(parent));
  if (dir->kind == NodeKind::kSlicesDir) {
    ASSIGN_OR_RETURN(const SliceView* view, LookupSlice(parent, dir->tensor_index, name));
    return SliceAttr(*view, SliceRole::kDir);
  }
  if (dir->kind != NodeKind::kDirectory) return Status::InvalidArgument("not a directory");
  if (parent == kRootInode) {
    auto it = root_index_.find(std::string(name));
    if (it == root_index_.end()) return Status::NotFound(std::string(name));
    return AttrOf(it->second, nodes_[it->second - 1]);
  }
  for (InodeId child : dir->children) {
    if (nodes_[child - 1].name == name) return AttrOf(child, nodes_[child - 1]);
  }
  if (dir->hidden_child != 0 && nodes_[dir->hidden_child - 1].name == name) {
    return AttrOf(dir->hidden_child, nodes_[dir->hidden_child - 1]);
  }
  return Status::NotFound(std::string(name));
}

StatusOr<std::vector<DirEntry>> Filesystem::ReadDir(InodeId ino) const {
  if (IsSliceInode(ino)) {
    SliceRole role;
    const SliceView* view = FindSlice(ino, &role);
    if (view == nullptr) return Status::NotFound("no inode " + std::to_string(ino));
    if (role != SliceRole::kDir) return Status::InvalidArgument("not a directory");
    std::vector<DirEntry> entries;
    for (int r = 1; r < 4; ++r) {
      entries.push_back(DirEntry{std::string(kSliceFileNames[r]), SliceAttr(*view, static_cast<SliceRole>(r))});
    }
    return entries;
  }
  const Node* dir = Find(ino);
  if (dir == nullptr) return Status::NotFound("no inode " + std::to_string(ino));
  if (dir->kind == NodeKind::kSlicesDir) return std::vector<DirEntry>();  // views exist once looked up
  if (dir->kind != NodeKind::kDirectory) return Status::InvalidArgument("not a directory");
  std::vector<DirEntry> entries;
  entries.reserve(dir->children.size());
  for (InodeId child : dir->children) {
    entries.push_back(DirEntry{nodes_[child - 1].name, AttrOf(child, nodes_[child - 1])});
  }
  return entries;
}

Status Filesystem::OpenFile(InodeId ino) const {
  ASSIGN_OR_RETURN(NodeAttr attr, GetAttr(ino));
  if (attr.is_directory) return Status::InvalidArgument("is a directory");
  return Status::OK();
}

StatusOr<SourceWindow> Filesystem::DataWindow(InodeId ino, uint64_t offset, size_t length) const {
  const Node* node = Find(ino);
  if (node == nullptr) return Status::NotFound("no inode " + std::to_string(ino));
  if (node->kind != NodeKind::kTensorData) return Status::InvalidArgument("not a data file");
  const TensorInfo& t = header_.tensors[node->tensor_index];
  SourceWindow window;
  window.fd = source_->FileDescriptor();
  window.offset = header_.data_start() + t.begin + std::min(offset, t.byte_size());
  window.length = offset >= t.byte_size() ? 0 : static_cast<size_t>(std::min<uint64_t>(length, t.byte_size() - offset));
  return window;
}

StatusOr<size_t> Filesystem::Read(InodeId ino, uint64_t offset, size_t length, char* dst) const {
  auto copy_from = [&](std::string_view content) -> size_t {
    if (offset >= content.size()) return 0;
    size_t n = std::min<uint64_t>(length, content.size() - offset);
    std::memcpy(dst, content.data() + offset, n);
    return n;
  };
  if (IsSliceInode(ino)) {
    SliceRole role;
    const SliceView* view = FindSlice(ino, &role);
    if (view == nullptr) return Status::NotFound("no inode " + std::to_string(ino));
    switch (role) {
      case SliceRole::kDir: return Status::InvalidArgument("is a directory");
      case SliceRole::kDtype: return copy_from(view->dtype_text);
      case SliceRole::kShape: return copy_from(view->shape_text);
      case SliceRole::kData: break;
    }
    const TensorInfo& t = header_.tensors[view->tensor_index];
    StatusOr<size_t> n = ReadSliceRange(*source_, header_.data_start() + t.begin, view->plan, offset, length, dst);
    if (!n.ok()) {
      CountReadError();
      return n.status();
    }
    CountRead(*n);
    return n;
  }
  const Node* node = Find(ino);
  if (node == nullptr) return Status::NotFound("no inode " + std::to_string(ino));
  switch (node->kind) {
    case NodeKind::kDirectory:
    case NodeKind::kSlicesDir:
      return Status::InvalidArgument("is a directory");
    case NodeKind::kStaticFile:
      return copy_from(node->content);
    case NodeKind::kStats:
      return copy_from(StatsJson());
    case NodeKind::kTensorData:
      break;
  }
  ASSIGN_OR_RETURN(SourceWindow window, DataWindow(ino, offset, length));
  if (window.length == 0) return size_t{0};
  Status status = ReadExactly(*source_, window.offset, window.length, dst);
  if (!status.ok()) {
    CountReadError();
    return status;
  }
  CountRead(window.length);
  return window.length;
}

const Filesystem::SliceView* Filesystem::FindSlice(InodeId ino, SliceRole* role) const {
  const InodeId base = nodes_.size() + 1;
  if (ino < base) return nullptr;
  const uint64_t index = (ino - base) / 4;
  std::lock_guard<std::mutex> lock(slice_mu_);
  if (index >= slice_views_.size()) return nullptr;
  *role = static_cast<SliceRole>((ino - base) % 4);
  return &slice_views_[index];
}

NodeAttr Filesystem::SliceAttr(const SliceView& view, SliceRole role) const {
  NodeAttr attr;
  attr.ino = view.first_ino + static_cast<InodeId>(role);
  attr.mtime = mtime_;
  attr.mode = S_IFREG | 0444;
  switch (role) {
    case SliceRole::kDir:
      attr.is_directory = true;
      attr.mode = S_IFDIR | 0555;
      attr.nlink = 2;
      break;
    case SliceRole::kData: attr.size = view.plan.result_bytes; break;
    case SliceRole::kDtype: attr.size = view.dtype_text.size(); break;
    case SliceRole::kShape: attr.size = view.shape_text.size(); break;
  }
  return attr;
}

StatusOr<const Filesystem::SliceView*> Filesystem::LookupSlice(InodeId slices_dir, size_t tensor_index,
                                                                 std::string_view spec) const {
  const TensorInfo& t = header_.tensors[tensor_index];
  std::pair<size_t, std::string> key(tensor_index, std::string(spec));
  {
    std::lock_guard<std::mutex> lock(slice_mu_);
    auto it = slice_index_.find(key);
    if (it != slice_index_.end()) return &slice_views_[it->second];
  }
  // Plan outside the lock: planning is pure.
  StatusOr<std::vector<SliceItem>> items = ParseSliceSpec(spec);
  if (!items.ok()) return items.status();
  StatusOr<SlicePlan> plan = PlanSlice(t.dtype, t.shape, *items);
  if (!plan.ok()) return plan.status();

  std::lock_guard<std::mutex> lock(slice_mu_);
  auto it = slice_index_.find(key);
  if (it != slice_index_.end()) return &slice_views_[it->second];  // another thread won
  if (slice_views_.size() >= kMaxSliceViews) {
    return Status::ResourceExhausted("too many slice views on this mount (" + std::to_string(kMaxSliceViews) + ")");
  }
  SliceView view;
  view.first_ino = nodes_.size() + 1 + 4 * slice_views_.size();
  view.slices_dir = slices_dir;
  view.tensor_index = tensor_index;
  view.spec = key.second;
  view.plan = std::move(*plan);
  view.dtype_text = std::string(DTypeName(t.dtype)) + "\n";
  view.shape_text = ShapeToString(view.plan.result_shape) + "\n";
  slice_views_.push_back(std::move(view));
  slice_index_.emplace(std::move(key), slice_views_.size() - 1);
  return &slice_views_.back();
}

void Filesystem::CountRead(size_t bytes) const {
  reads_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(bytes, std::memory_order_relaxed);
}

void Filesystem::CountReadError() const { read_errors_.fetch_add(1, std::memory_order_relaxed); }

std::string Filesystem::StatsJson() const {
  std::string source_stats = source_->StatsJson();
  while (!source_stats.empty() && (source_stats.back() == '\n' || source_stats.back() == ' ')) source_stats.pop_back();
  if (source_stats.empty()) source_stats = "null";
  return "{\"fs\":{\"reads\":" + std::to_string(reads_.load(std::memory_order_relaxed)) +
         ",\"bytes_read\":" + std::to_string(bytes_read_.load(std::memory_order_relaxed)) +
         ",\"read_errors\":" + std::to_string(read_errors_.load(std::memory_order_relaxed)) +
         ",\"tensors\":" + std::to_string(header_.tensors.size()) + "},\"source\":" + source_stats + "}\n";
}

}  // namespace stfs
