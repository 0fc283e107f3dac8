// Tests of TensorSource: safetensors files, tensor directories of an stfs
// mount (dtype / shape / data), and the errors for everything else.
#include "core/cuda/tensor_source.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "core/cuda/loader.h"
#include "tests/test_files.h"

namespace stfs::gpu {
namespace {

using stfs::testing::BuildSafetensors;
using stfs::testing::RandomBytes;
using stfs::testing::TempDir;
using stfs::testing::TestTensor;

// Writes a tensor directory the way an stfs mount presents one.
std::string WriteTensorDir(const TempDir& dir, const std::string& name, const std::string& dtype,
                           const std::string& shape, const std::string& data) {
  const std::string path = dir.path() + "/" + name;
  EXPECT_EQ(::mkdir(path.c_str(), 0755), 0);
  dir.Write(name + "/dtype", dtype);
  dir.Write(name + "/shape", shape);
  dir.Write(name + "/data", data);
  return path;
}

TEST(TensorSourceTest, ListsTensorsOfAFileInHeaderOrder) {
  TempDir dir;
  std::vector<TestTensor> tensors = {{"b", DType::F16, {2, 3}, ""}, {std::string("a\0z", 3), DType::U8, {4}, ""}};
  auto source = TensorSource::Open(dir.Write("m.safetensors", BuildSafetensors(tensors, "{\"k\":\"v\"}")));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->tensors().size(), 2u);
  EXPECT_EQ((*source)->tensors()[0].name, "b");
  const TensorInfo* a = (*source)->Find(std::string("a\0z", 3));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->byte_size(), 4u);
  EXPECT_EQ((*source)->Find("a"), nullptr);
  EXPECT_EQ((*source)->Get("zzz").status().code(), StatusCode::kNotFound);
  ASSERT_EQ((*source)->metadata().size(), 1u);
  EXPECT_FALSE((*source)->local_path().empty());
}

TEST(TensorSourceTest, OpensATensorDirectoryThroughItsDataFile) {
  TempDir dir;
  const std::string data = RandomBytes(6 * 10 * 2);
  const std::string path = WriteTensorDir(dir, "model.embed", "BF16\n", "[6,10]\n", data);
  auto source = TensorSource::Open(path);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->tensors().size(), 1u);
  const TensorInfo& t = (*source)->tensors()[0];
  EXPECT_EQ(t.name, "model.embed");
  EXPECT_EQ(t.dtype, DType::BF16);
  EXPECT_EQ(t.shape, (std::vector<uint64_t>{6, 10}));
  EXPECT_EQ((*source)->FileOffset(t), 0u);

  auto loader = NewHostLoader(LoaderOptions{});
  ASSERT_TRUE(loader.ok());
  std::string got(6 * 2 * 2, '\0');  // columns 4:6 of every row
  ASSERT_TRUE((*loader)->LoadInto(**source, "model.embed", ":, 4:6", got.data(), got.size()).ok());
  for (int r = 0; r < 6; ++r) EXPECT_EQ(got.substr(r * 4, 4), data.substr(r * 20 + 8, 4)) << "row " << r;

  auto trailing_slash = TensorSource::Open(path + "/");
  ASSERT_TRUE(trailing_slash.ok());
  EXPECT_EQ((*trailing_slash)->tensors()[0].name, "model.embed");
}

TEST(TensorSourceTest, TensorDirectoryScalarAndSpaces) {
  TempDir dir;
  const std::string path = WriteTensorDir(dir, "s", "I64", " [ ] \n", RandomBytes(8));
  auto source = TensorSource::Open(path);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_TRUE((*source)->tensors()[0].shape.empty());
}

TEST(TensorSourceTest, RefusesBrokenTensorDirectories) {
  TempDir dir;
  struct Case {
    const char* dtype;
    const char* shape;
    size_t bytes;
    const char* expect;  // in the message
  } cases[] = {
      {"F17\n", "[2]\n", 4, "dtype"},
      {"f16\n", "[2]\n", 4, "dtype"},
      {"F16\n", "[2,]\n", 4, "shape"},
      {"F16\n", "[-2]\n", 4, "shape"},
      {"F16\n", "2\n", 4, "shape"},
      {"F16\n", "[99999999999999999999]\n", 4, "shape"},
      {"F16\n", "[3]\n", 4, "data"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string path = WriteTensorDir(dir, "t" + std::to_string(i++), c.dtype, c.shape, RandomBytes(c.bytes));
    auto source = TensorSource::Open(path);
    ASSERT_FALSE(source.ok()) << c.dtype << c.shape;
    EXPECT_EQ(source.status().code(), StatusCode::kCorruption) << source.status().ToString();
    EXPECT_NE(source.status().message().find(path), std::string::npos) << source.status().message();
    EXPECT_NE(source.status().message().find(c.expect), std::string::npos) << source.status().message();
  }
}

TEST(TensorSourceTest, RefusesWhatIsNotASource) {
  TempDir dir;
  auto missing = TensorSource::Open(dir.path() + "/nope.safetensors");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
  auto plain_dir = TensorSource::Open(dir.path());
  EXPECT_EQ(plain_dir.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plain_dir.status().message().find("dtype, shape and data"), std::string::npos);
  auto garbage = TensorSource::Open(dir.Write("g.safetensors", "not a safetensors file at all"));
  EXPECT_EQ(garbage.status().code(), StatusCode::kCorruption) << garbage.status().ToString();
  // A URL: either the HTTP source tries it (and fails: nothing listens on
  // port 1), or a build without it says so.
  auto url = TensorSource::Open("http://127.0.0.1:1/m.safetensors");
  ASSERT_FALSE(url.ok());
  EXPECT_NE(url.status().message().find("127.0.0.1"), std::string::npos) << url.status().ToString();
}

TEST(ParseShapeTextTest, ParsesWhatTheMountWrites) {
  EXPECT_EQ(*ParseShapeText("[32000,4096]\n"), (std::vector<uint64_t>{32000, 4096}));
  EXPECT_EQ(*ParseShapeText("[0]"), (std::vector<uint64_t>{0}));
  EXPECT_EQ(*ParseShapeText("[ 1 , 2 ]"), (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(ParseShapeText("[]")->empty());
  EXPECT_FALSE(ParseShapeText("[1 2]").ok());
  EXPECT_FALSE(ParseShapeText("[1.0]").ok());
  EXPECT_FALSE(ParseShapeText("").ok());
}

}  // namespace
}  // namespace stfs::gpu
