// Conformance: files written by other people's tools parse, and every
// tensor's bytes are where the header says. Skips when ../shared is absent.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/header.h"
#include "tests/test_files.h"

namespace stfs {
namespace {

struct Expected {
  const char* file;
  size_t tensors;
  const char* metadata;
};

constexpr Expected kFixtures[] = {
    {"distilbert_lora.safetensors", 28, R"({"format":"pt"})"},
    {"gpt2_lora.safetensors", 25, R"({"format":"pt"})"},
    {"mnist_tinygrad.safetensors", 2, "{}"},
    {"small_custom_metadata.safetensors", 4, R"({"version":"1.0","git_tag":"v1.45"})"},
};

std::string FixtureDir() { return std::string(STFS_SOURCE_DIR) + "/../shared/fixtures/real"; }

TEST(RealFixtures, ParseWithExpectedTensorsAndMetadata) {
  if (!std::filesystem::is_directory(FixtureDir())) GTEST_SKIP() << FixtureDir() << " is absent; skipping";
  for (const Expected& e : kFixtures) {
    std::string path = FixtureDir() + "/" + e.file;
    auto source = OpenLocalFile(path);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    auto header = ReadHeader(**source);
    ASSERT_TRUE(header.ok()) << header.status().ToString();
    EXPECT_EQ(header->tensors.size(), e.tensors) << e.file;
    EXPECT_EQ(header->MetadataJson(), e.metadata) << e.file;
    std::string bytes = testing::ReadWholeFile(path);
    for (const TensorInfo& t : header->tensors) {
      EXPECT_EQ(t.dtype, DType::F32);
      std::string via_source(t.byte_size(), '\0');
      ASSERT_TRUE(ReadExactly(**source, header->data_start() + t.begin, t.byte_size(), via_source.data()).ok());
      EXPECT_EQ(via_source, bytes.substr(header->data_start() + t.begin, t.byte_size())) << t.name;
    }
  }
}

}  // namespace
}  // namespace stfs
