// The tree view (-o tree): dotted tensor names as nested directories.
//
// Rule: a tensor name is split at every '.' into segments ("a..b" has an
// empty middle segment); each segment becomes one directory name by
//   1. writing each byte '%', '/', 0x00-0x1F and 0x7F as %XX (uppercase hex),
//      always (unlike the flat rule, which keeps valid names as they are);
//   2. writing the empty segment as "%";
//   3. writing the first byte of a segment that equals a name the tree uses
//      itself as %XX: "dtype", "shape", "data", "slices", "parts" anywhere
//      ("data" -> "%64ata"), and "__metadata__", "__stats__", "__shards__" at
//      the top level ("__stats__" -> "%5F_stats__").
// Decoding turns every %XX back into its byte and a lone "%" into "", then
// joins the segments with '.', so the mapping is a bijection and no two
// tensors can share a directory or hide a file. A segment whose directory
// name would pass 255 bytes is refused (the flat view has no such limit).
// A tensor's dtype/shape/data (and data.npy, slices/, parts/) sit in the
// directory of its last segment, beside the directories of longer names
// ("a" and "a.b": a/dtype, a/data, a/b/data). Linear in the total name bytes.
// Core only: no FUSE, no reading of tensor bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace stfs {

// Returns the directory name of one segment; `top_level` is true for the
// first segment of a name. Does not check the 255-byte limit.
std::string EncodeTreeSegment(std::string_view segment, bool top_level);

// Returns the directory names of tensor `name`'s path, outermost first.
// InvalidArgument when a directory name would pass 255 bytes.
StatusOr<std::vector<std::string>> TreePath(std::string_view name);

// Returns the tensor name a tree path names (the inverse of TreePath), or
// InvalidArgument for a component no tensor name produces ("%zz", "data").
StatusOr<std::string> TensorNameFromTreePath(const std::vector<std::string>& path);

struct TreeDirectory {
  std::string name;               // directory name ("" for the root)
  uint32_t parent = 0;            // index in the tree (the root is its own parent)
  int64_t tensor = -1;            // the tensor whose files sit here, or -1
  std::vector<uint32_t> children; // subdirectories, in order of first appearance
};

// Builds the directory tree of `names` (tensor i is names[i]); element 0 is
// the root. Errors: those of TreePath, naming the tensor.
StatusOr<std::vector<TreeDirectory>> BuildTensorTree(const std::vector<std::string_view>& names);

}  // namespace stfs
