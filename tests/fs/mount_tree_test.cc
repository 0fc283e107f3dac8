// Real mounts, tree view (-o tree): dotted names are nested directories; a
// tensor that is a prefix of another has its files beside the child
// directories; colliding and odd segments are escaped by the README rule; a
// walk of the whole mount decodes back to every tensor name exactly once,
// each with its bytes (the decoder here is written from the rule's text).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "tests/fs/mount_harness.h"

namespace stfs::testing {
namespace {

using MountTree = MountTest;

// Decodes one directory name: "%" alone is the empty segment, %XX a byte.
std::string DecodeSegment(const std::string& name) {
  if (name == "%") return "";
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '%' && i + 2 < name.size()) {
      out += static_cast<char>(std::stoi(name.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += name[i];
    }
  }
  return out;
}

// Walks `dir`, recording the tensor name of every directory holding `data`.
void Walk(const std::string& dir, const std::vector<std::string>& path, std::map<std::string, std::string>* found,
          int* duplicates) {
  std::vector<std::string> entries = ListDir(dir);
  if (std::find(entries.begin(), entries.end(), "data") != entries.end()) {
    std::string name;
    for (size_t i = 0; i < path.size(); ++i) name += (i ? "." : "") + DecodeSegment(path[i]);
    if (!found->emplace(name, dir).second) ++*duplicates;
  }
  for (const std::string& e : entries) {
    struct stat st;
    if (::lstat((dir + "/" + e).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    std::vector<std::string> child = path;
    child.push_back(e);
    Walk(dir + "/" + e, child, found, duplicates);
  }
}

TEST_F(MountTree, DottedNamesNestAndEveryTensorDecodesBackOnce) {
  std::vector<std::string> names = {
      "model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.down_proj.bias", "model.layers.1.mlp.down_proj.weight",
      "model.embed_tokens.weight", "a", "a.b", "a.b.c", "x.data", "x.dtype", "x.data.npy", "__stats__", "__metadata__.y",
      "a..b", ".lead", "trail.", "p%q.r/s", "slices.parts", "ctl\x01.z"};
  for (int e = 0; e < 40; ++e) names.push_back("experts." + std::to_string(e) + ".w");
  std::vector<TestTensor> tensors;
  for (size_t i = 0; i < names.size(); ++i) tensors.push_back({names[i], i % 2 ? DType::F16 : DType::F32, {3, 2}, ""});
  std::string mnt = MountFile(WriteSource(BuildSafetensors(tensors)), {"-o", "tree"});
  ASSERT_FALSE(mnt.empty());

  std::vector<std::string> root = ListDir(mnt);
  std::vector<std::string> want_root = {"%",   "%5F_metadata__", "%5F_stats__", "%73lices", "__metadata__", "__stats__",
                                        "a",   "ctl%01",         "experts",     "model",    "p%25q",        "trail",
                                        "x"};
  std::sort(want_root.begin(), want_root.end());
  EXPECT_EQ(root, want_root);
  EXPECT_EQ(ListDir(mnt + "/model/layers"), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(ListDir(mnt + "/model/layers/0/mlp/down_proj"), (std::vector<std::string>{"bias", "weight"}));
  EXPECT_EQ(ListDir(mnt + "/model/layers/0/mlp/down_proj/weight"),
            (std::vector<std::string>{"data", "data.npy", "dtype", "shape"}));
  // A tensor that is a prefix of another: its files beside the child directory.
  EXPECT_EQ(ListDir(mnt + "/a"), (std::vector<std::string>{"%", "b", "data", "data.npy", "dtype", "shape"}));
  EXPECT_EQ(ListDir(mnt + "/a/b"), (std::vector<std::string>{"c", "data", "data.npy", "dtype", "shape"}));
  // Segments equal to the tree's own file names are escaped.
  EXPECT_EQ(ListDir(mnt + "/x"), (std::vector<std::string>{"%64ata", "%64type"}));
  EXPECT_EQ(ListDir(mnt + "/x/%64ata"), (std::vector<std::string>{"data", "data.npy", "dtype", "npy", "shape"}));
  EXPECT_EQ(ListDir(mnt + "/p%25q"), (std::vector<std::string>{"r%2Fs"}));
  EXPECT_EQ(ListDir(mnt + "/experts").size(), 40u);
  EXPECT_EQ(ReadWholeFile(mnt + "/experts/37/w/shape"), "[3,2]\n");

  std::map<std::string, std::string> found;
  int duplicates = 0;
  Walk(mnt, {}, &found, &duplicates);
  EXPECT_EQ(duplicates, 0);
  ASSERT_EQ(found.size(), tensors.size());
  for (const TestTensor& t : tensors) {
    auto it = found.find(t.name);
    ASSERT_NE(it, found.end()) << JsonString(t.name) << " not found by the walk";
    EXPECT_TRUE(ReadWholeFile(it->second + "/data") == t.bytes) << JsonString(t.name);
    EXPECT_EQ(ReadWholeFile(it->second + "/dtype"), std::string(DTypeName(t.dtype)) + "\n");
  }
  // Slices and parts work in the tree too.
  const TestTensor& w = tensors[0];
  EXPECT_EQ(ReadWholeFile(mnt + "/model/layers/0/mlp/down_proj/weight/parts/3/2/data"), w.bytes.substr(2 * 8, 8));
  EXPECT_EQ(ReadWholeFile(mnt + "/model/layers/0/mlp/down_proj/weight/slices/0/data"), w.bytes.substr(0, 8));
}

}  // namespace
}  // namespace stfs::testing
