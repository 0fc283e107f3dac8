// Tests for the tree view's names: each rule on examples, a random property
// test that encoding is a bijection (decode(encode(n)) == n, distinct names
// give distinct paths, no directory ever takes a reserved file name), and the
// directory tree for names that are prefixes of other names.
#include "core/tensor_tree.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

namespace stfs {
namespace {

using Path = std::vector<std::string>;

Path PathOf(std::string_view name) {
  StatusOr<Path> path = TreePath(name);
  EXPECT_TRUE(path.ok()) << path.status().ToString();
  return path.ok() ? *path : Path{};
}

TEST(TensorTree, SplitsAtDotsAndEscapesEachRule) {
  EXPECT_EQ(PathOf("model.layers.0.weight"), (Path{"model", "layers", "0", "weight"}));
  EXPECT_EQ(PathOf("a..b"), (Path{"a", "%", "b"}));
  EXPECT_EQ(PathOf(".x."), (Path{"%", "x", "%"}));
  EXPECT_EQ(PathOf(""), (Path{"%"}));
  EXPECT_EQ(PathOf("a/b.c%d"), (Path{"a%2Fb", "c%25d"}));
  EXPECT_EQ(PathOf(std::string("n\x01\x7f", 3)), (Path{"n%01%7F"}));
  // Reserved file names, anywhere.
  EXPECT_EQ(PathOf("x.data.npy"), (Path{"x", "%64ata", "npy"}));
  EXPECT_EQ(PathOf("dtype.shape.slices.parts"), (Path{"%64type", "%73hape", "%73lices", "%70arts"}));
  EXPECT_EQ(PathOf("x.datas.Data"), (Path{"x", "datas", "Data"}));
  // Root files, only at the top.
  EXPECT_EQ(PathOf("__stats__"), (Path{"%5F_stats__"}));
  EXPECT_EQ(PathOf("__metadata__.x"), (Path{"%5F_metadata__", "x"}));
  EXPECT_EQ(PathOf("__shards__"), (Path{"%5F_shards__"}));
  EXPECT_EQ(PathOf("a.__stats__"), (Path{"a", "__stats__"}));
}

TEST(TensorTree, DecodesOnlyCanonicalPaths) {
  EXPECT_EQ(*TensorNameFromTreePath({"a%2Fb", "%", "%64ata"}), "a/b..data");
  EXPECT_EQ(*TensorNameFromTreePath({"%5F_stats__"}), "__stats__");
  for (const Path& bad : {Path{}, Path{"data"}, Path{"x", "shape"}, Path{"__stats__"}, Path{"%41"}, Path{"%zz"},
                          Path{"%2f"}, Path{"a%"}, Path{"a%2"}, Path{"x", "%5F_stats__"}, Path{"%%"}}) {
    EXPECT_FALSE(TensorNameFromTreePath(bad).ok()) << ::testing::PrintToString(bad);
  }
}

TEST(TensorTree, RefusesASegmentTooLongForADirectory) {
  std::string long_segment(200, '%');  // 600 bytes once escaped
  StatusOr<Path> path = TreePath("ok." + long_segment);
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("at most 255"), std::string::npos);
  EXPECT_TRUE(TreePath(std::string(255, 'a') + "." + std::string(255, 'b')).ok());
  EXPECT_FALSE(TreePath(std::string(256, 'a')).ok());
}

// Random names over an alphabet rich in what the rule treats specially.
std::string RandomName(std::mt19937_64& random) {
  static const std::vector<std::string> pieces = {".", "%", "/", "a", "d", "data", "dtype", "shape", "slices",
                                                  "parts", "__stats__", "__metadata__", "__shards__", "%25",
                                                  "%64ata", std::string(1, '\0'), "\n", "\x7f", "npy", "7"};
  std::string name;
  int count = static_cast<int>(random() % 6);
  for (int i = 0; i < count; ++i) name += pieces[random() % pieces.size()];
  return name;
}

TEST(TensorTree, EncodingIsABijectionThatNeverShadowsAFile) {
  std::mt19937_64 random(std::random_device{}());
  std::set<std::string> names;
  std::set<Path> paths;
  for (int i = 0; i < 20000; ++i) {
    std::string name = RandomName(random);
    Path path = PathOf(name);
    StatusOr<std::string> back = TensorNameFromTreePath(path);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(*back, name);
    for (size_t k = 0; k < path.size(); ++k) {
      for (const char* file : {"dtype", "shape", "data", "data.npy", "slices", "parts", "", ".", ".."}) {
        ASSERT_NE(path[k], file);
      }
      ASSERT_EQ(path[k].find('/'), std::string::npos);
      ASSERT_EQ(path[k].find('\0'), std::string::npos);
      if (k == 0) {
        for (const char* root_file : {"__metadata__", "__stats__", "__shards__"}) ASSERT_NE(path[k], root_file);
      }
    }
    if (names.insert(name).second) {
      ASSERT_TRUE(paths.insert(path).second) << "two names share a path";
    }
  }
  EXPECT_GT(names.size(), 1000u);
}

TEST(TensorTree, PrefixTensorsShareTheirDirectoryWithChildren) {
  std::vector<std::string_view> names = {"a.b", "a", "a.b.c", "x.data", "data"};
  StatusOr<std::vector<TreeDirectory>> tree = BuildTensorTree(names);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  const std::vector<TreeDirectory>& t = *tree;
  // root -> a -> b -> c ; root -> x -> %64ata ; root -> %64ata
  ASSERT_EQ(t[0].children.size(), 3u);
  const TreeDirectory& a = t[t[0].children[0]];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.tensor, 1);
  ASSERT_EQ(a.children.size(), 1u);
  const TreeDirectory& b = t[a.children[0]];
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.tensor, 0);
  EXPECT_EQ(b.parent, t[0].children[0]);
  ASSERT_EQ(b.children.size(), 1u);
  EXPECT_EQ(t[b.children[0]].tensor, 2);
  const TreeDirectory& x = t[t[0].children[1]];
  EXPECT_EQ(x.tensor, -1);
  EXPECT_EQ(t[x.children[0]].name, "%64ata");
  EXPECT_EQ(t[x.children[0]].tensor, 3);
  EXPECT_EQ(t[t[0].children[2]].name, "%64ata");
  EXPECT_EQ(t[t[0].children[2]].tensor, 4);
  EXPECT_EQ(t.size(), 7u);
}

TEST(TensorTree, RefusesARepeatedNameAndBuildsLargeTreesFast) {
  EXPECT_FALSE(BuildTensorTree({"a.b", "a.b"}).ok());
  std::vector<std::string> storage;
  for (int layer = 0; layer < 5000; ++layer) {
    for (const char* leaf : {"q", "k", "v", "o", "mlp.up", "mlp.down", "mlp.gate", "norm", "post_norm", "rope"}) {
      storage.push_back("model.layers." + std::to_string(layer) + "." + leaf + ".weight");
    }
  }
  std::vector<std::string_view> names(storage.begin(), storage.end());
  StatusOr<std::vector<TreeDirectory>> tree = BuildTensorTree(names);
  ASSERT_TRUE(tree.ok());
  // root, model, layers, 5000 layers x (10 leaves + mlp + 10 "weight") directories.
  EXPECT_EQ(tree->size(), 3u + 5000u * (1 + 7 + 1 + 3 + 10));
}

}  // namespace
}  // namespace stfs
