// Tree view names and the directory tree built from them (rule in the
// header). Decoding checks canonical form by re-encoding, so exactly one
// path names each tensor.
#include "core/tensor_tree.h"

#include <array>
#include <unordered_map>

#include "core/checkpoint_index.h"  // QuotedName

namespace stfs {
namespace {

constexpr size_t kMaxDirectoryName = 255;
constexpr std::array<std::string_view, 5> kReservedEverywhere = {"dtype", "shape", "data", "slices", "parts"};
constexpr std::array<std::string_view, 3> kReservedAtTop = {"__metadata__", "__stats__", "__shards__"};
constexpr char kHex[] = "0123456789ABCDEF";

bool MustEscape(unsigned char byte) { return byte == '%' || byte == '/' || byte < 0x20 || byte == 0x7f; }

void AppendEscaped(std::string& out, unsigned char byte) {
  out += '%';
  out += kHex[byte >> 4];
  out += kHex[byte & 0xf];
}

bool IsReserved(std::string_view segment, bool top_level) {
  for (std::string_view reserved : kReservedEverywhere) {
    if (segment == reserved) return true;
  }
  if (top_level) {
    for (std::string_view reserved : kReservedAtTop) {
      if (segment == reserved) return true;
    }
  }
  return false;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string EncodeTreeSegment(std::string_view segment, bool top_level) {
  if (segment.empty()) return "%";
  std::string out;
  out.reserve(segment.size());
  bool reserved = IsReserved(segment, top_level);
  for (size_t i = 0; i < segment.size(); ++i) {
    unsigned char byte = static_cast<unsigned char>(segment[i]);
    if (MustEscape(byte) || (i == 0 && reserved)) {
      AppendEscaped(out, byte);
    } else {
      out += static_cast<char>(byte);
    }
  }
  return out;
}

StatusOr<std::vector<std::string>> TreePath(std::string_view name) {
  std::vector<std::string> path;
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    std::string_view segment = name.substr(start, dot == std::string_view::npos ? dot : dot - start);
    std::string directory = EncodeTreeSegment(segment, path.empty());
    if (directory.size() > kMaxDirectoryName) {
      return Status::InvalidArgument("tensor " + QuotedName(name) + ": its name segment " + QuotedName(segment) +
                                     " needs a directory name of " + std::to_string(directory.size()) +
                                     " bytes in the tree view (at most 255)");
    }
    path.push_back(std::move(directory));
    if (dot == std::string_view::npos) return path;
    start = dot + 1;
  }
}

StatusOr<std::string> TensorNameFromTreePath(const std::vector<std::string>& path) {
  if (path.empty()) return Status::InvalidArgument("an empty tree path names no tensor");
  std::string name;
  for (size_t k = 0; k < path.size(); ++k) {
    const std::string& component = path[k];
    std::string segment;
    if (component != "%") {
      for (size_t i = 0; i < component.size(); ++i) {
        if (component[i] != '%') {
          segment += component[i];
          continue;
        }
        int high = i + 2 < component.size() ? HexValue(component[i + 1]) : -1;
        int low = high >= 0 ? HexValue(component[i + 2]) : -1;
        if (low < 0) return Status::InvalidArgument("tree path component " + QuotedName(component) + " has a bad %XX");
        segment += static_cast<char>(high << 4 | low);
        i += 2;
      }
    }
    if (EncodeTreeSegment(segment, k == 0) != component) {
      return Status::InvalidArgument("tree path component " + QuotedName(component) + " is not how any name is written");
    }
    if (k) name += '.';
    name += segment;
  }
  return name;
}

StatusOr<std::vector<TreeDirectory>> BuildTensorTree(const std::vector<std::string_view>& names) {
  std::vector<TreeDirectory> tree(1);
  // (parent index, directory name) -> child index; key is the parent's
  // index as 4 raw bytes followed by the name.
  std::unordered_map<std::string, uint32_t> child_index;
  child_index.reserve(names.size() * 2);
  for (size_t t = 0; t < names.size(); ++t) {
    ASSIGN_OR_RETURN(std::vector<std::string> path, TreePath(names[t]));
    uint32_t current = 0;
    for (std::string& component : path) {
      std::string key(reinterpret_cast<const char*>(&current), sizeof(current));
      key += component;
      auto [it, inserted] = child_index.try_emplace(std::move(key), static_cast<uint32_t>(tree.size()));
      if (inserted) {
        tree[current].children.push_back(it->second);
        TreeDirectory directory;
        directory.name = std::move(component);
        directory.parent = current;
        tree.push_back(std::move(directory));
      }
      current = it->second;
    }
    if (tree[current].tensor >= 0) {
      return Status::InvalidArgument("tensor " + QuotedName(names[t]) + " appears twice");
    }
    tree[current].tensor = static_cast<int64_t>(t);
  }
  return tree;
}

}  // namespace stfs
