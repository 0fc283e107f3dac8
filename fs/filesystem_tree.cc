// Filesystem: the tree view (-o tree). core/tensor_tree.h makes the
// directories and names (a bijection with the tensor names); here each
// directory becomes a node, and a tensor's files go in the directory of its
// last segment, listed before that directory's subdirectories.
#include "core/tensor_tree.h"
#include "fs/filesystem.h"

namespace stfs {

StatusOr<std::vector<InodeId>> Filesystem::BuildTree() {
  const auto& tensors = catalogue_.tensors();
  std::vector<std::string_view> names;
  names.reserve(tensors.size());
  for (const CatalogueTensor& t : tensors) names.push_back(t.info.name);
  StatusOr<std::vector<TreeDirectory>> tree = BuildTensorTree(names);
  if (!tree.ok()) return Status(tree.status()).WithContext(catalogue_.source_name());
  const size_t count = tree->size();
  if (count > UINT32_MAX / 2) return Status::InvalidArgument(catalogue_.source_name() + ": too many directories");
  tree_names_.reserve(count);
  nodes_.reserve(nodes_.size() + count + tensors.size() * 6);
  tensor_dirs_.assign(tensors.size(), 0);
  // Directories first (element 0 is the root), so each parent knows its
  // children's inode numbers.
  std::vector<InodeId> inode_of(count, kRootInode);
  for (size_t k = 1; k < count; ++k) {
    const TreeDirectory& d = (*tree)[k];
    tree_names_.push_back(d.name);
    Node dir;
    dir.parent = inode_of[d.parent];
    dir.name = tree_names_.back();
    inode_of[k] = AddNode(dir);
  }
  std::vector<InodeId> root_children;
  for (size_t k = 0; k < count; ++k) {
    const TreeDirectory& d = (*tree)[k];
    std::vector<InodeId> children;
    if (d.tensor >= 0) {
      children = AddTensorFiles(inode_of[k], static_cast<size_t>(d.tensor));
      tensor_dirs_[static_cast<size_t>(d.tensor)] = inode_of[k];
    }
    for (uint32_t child : d.children) children.push_back(inode_of[child]);
    nodes_[inode_of[k] - 1].subdirectories = static_cast<uint32_t>(d.children.size());
    if (k == 0) {
      root_children = std::move(children);  // the root is completed by Create
    } else {
      SetChildren(inode_of[k], children);
    }
  }
  for (InodeId child : root_children) root_index_.emplace(nodes_[child - 1].name, child);
  return root_children;
}

}  // namespace stfs
