// `stfs inspect` reports: table and JSON.
#include "fs/inspect.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/test_files.h"

namespace stfs {
namespace {

StatusOr<Catalogue> HeaderOf(std::vector<testing::TestTensor>& t, const std::string& metadata) {
  static testing::TempDir dir;
  return OpenLocalCatalogue(dir.Write("m.safetensors", testing::BuildSafetensors(t, metadata)));
}

TEST(Inspect, TableListsTensorsTotalsAndMetadata) {
  std::vector<testing::TestTensor> t = {{"emb", DType::F16, {4, 8}, ""}, {"a/b", DType::U8, {3}, ""}};
  auto h = HeaderOf(t, R"({"format":"pt"})");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  std::string table = InspectTable(*h);
  EXPECT_NE(table.find("emb"), std::string::npos);
  EXPECT_NE(table.find("a%2Fb"), std::string::npos);
  EXPECT_NE(table.find("[4,8]"), std::string::npos);
  EXPECT_NE(table.find("tensors:     2"), std::string::npos) << table;
  EXPECT_NE(table.find("parameters:  35"), std::string::npos) << table;
  EXPECT_NE(table.find("data bytes:  67"), std::string::npos) << table;
  EXPECT_NE(table.find(R"({"format":"pt"})"), std::string::npos);
}

TEST(Inspect, JsonIsParseableAndComplete) {
  std::vector<testing::TestTensor> t = {{"x\ny", DType::F4, {2, 2}, ""}};
  auto h = HeaderOf(t, "");
  ASSERT_TRUE(h.ok());
  auto j = nlohmann::json::parse(InspectJson(*h));
  EXPECT_EQ(j["tensors"][0]["name"], "x\ny");
  EXPECT_EQ(j["tensors"][0]["directory"], "x%0Ay");
  EXPECT_EQ(j["tensors"][0]["dtype"], "F4");
  EXPECT_EQ(j["tensors"][0]["bytes"], 2);
  EXPECT_EQ(j["tensors"][0]["file_offsets"][0], h->shards()[0].data_start());
  EXPECT_EQ(j["totals"]["parameters"], 4);
  EXPECT_TRUE(j["metadata"].is_null());
}

}  // namespace
}  // namespace stfs
