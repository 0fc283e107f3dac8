// Tests for the index.json parser and the shard-name rule: file order kept,
// each malformed index refused with one line naming the index and the
// problem, and every way a shard path could leave the index's directory.
#include "core/checkpoint_index.h"

#include <gtest/gtest.h>

#include <string>

namespace stfs {
namespace {

StatusOr<CheckpointIndex> Parse(const std::string& json) { return ParseCheckpointIndex(json, "m.index.json"); }

// Expects `json` refused with a one-line message holding `fragment`.
void ExpectRefused(const std::string& json, const std::string& fragment) {
  StatusOr<CheckpointIndex> index = Parse(json);
  ASSERT_FALSE(index.ok()) << json;
  const std::string& message = index.status().message();
  EXPECT_EQ(message.rfind("m.index.json: ", 0), 0u) << message;
  EXPECT_NE(message.find(fragment), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(CheckpointIndex, KeepsWeightMapInFileOrderAndSharesShardIds) {
  StatusOr<CheckpointIndex> index = Parse(R"({
    "metadata": {"total_size": 1234, "format": "pt"},
    "weight_map": {"z.weight": "b.safetensors", "a.weight": "a.safetensors", "m": "b.safetensors"}
  })");
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(index->metadata_json, R"({"total_size":1234,"format":"pt"})");
  EXPECT_EQ(index->shard_names, (std::vector<std::string>{"b.safetensors", "a.safetensors"}));
  ASSERT_EQ(index->weight_map.size(), 3u);
  EXPECT_EQ(index->weight_map[0].tensor, "z.weight");
  EXPECT_EQ(index->weight_map[0].shard, 0u);
  EXPECT_EQ(index->weight_map[1].tensor, "a.weight");
  EXPECT_EQ(index->weight_map[1].shard, 1u);
  EXPECT_EQ(index->weight_map[2].shard, 0u);
}

TEST(CheckpointIndex, MetadataMayBeAbsentOrNullAndOtherKeysAreIgnored) {
  StatusOr<CheckpointIndex> absent = Parse(R"({"weight_map": {"t": "s.safetensors"}, "extra": [1, {"a": 2}]})");
  ASSERT_TRUE(absent.ok()) << absent.status().ToString();
  EXPECT_EQ(absent->metadata_json, "{}");
  StatusOr<CheckpointIndex> null = Parse(R"({"metadata": null, "weight_map": {"t": "s.safetensors"}})");
  ASSERT_TRUE(null.ok());
  EXPECT_EQ(null->metadata_json, "{}");
  // Names with odd bytes survive exactly.
  StatusOr<CheckpointIndex> odd = Parse(R"({"weight_map": {"a/b\u0000c\n": "s.safetensors", "": "s.safetensors"}})");
  ASSERT_TRUE(odd.ok()) << odd.status().ToString();
  EXPECT_EQ(odd->weight_map[0].tensor, std::string("a/b\0c\n", 6));
  EXPECT_EQ(odd->weight_map[1].tensor, "");
}

TEST(CheckpointIndex, RefusesMalformedIndexes) {
  ExpectRefused("", "not valid JSON");
  ExpectRefused("{", "not valid JSON");
  ExpectRefused(std::string("{\"weight_map\": {}}\0", 19), "NUL");
  ExpectRefused("[]", "expected a JSON object");
  ExpectRefused(R"({"metadata": {}})", "no weight_map");
  ExpectRefused(R"({"weight_map": ["a"]})", "weight_map is array");
  ExpectRefused(R"({"weight_map": {}})", "weight_map is empty");
  ExpectRefused(R"({"weight_map": {"t": 3}})", "\"t\" is number");
  ExpectRefused(R"({"weight_map": {"t": null}})", "\"t\" is null");
  ExpectRefused(R"({"weight_map": {"t": {"x": "y"}}})", "\"t\" is not a string");
  ExpectRefused(R"({"weight_map": {"t": ["x"]}})", "\"t\" is not a string");
  ExpectRefused(R"({"weight_map": {"t": "a", "t": "b"}})", "tensor \"t\" appears twice in weight_map");
  ExpectRefused(R"({"weight_map": {"t": "a"}, "weight_map": {"u": "a"}})", "key \"weight_map\" appears twice");
  ExpectRefused(R"({"metadata": {"k": "1", "k": "2"}, "weight_map": {"t": "a"}})", "metadata key \"k\" appears twice");
  ExpectRefused(R"({"metadata": "x", "weight_map": {"t": "a"}})", "metadata is string");
  ExpectRefused("{\"weight_map\": {\"t\": \"\xff\"}}", "not valid JSON");
}

TEST(CheckpointIndex, ParsesFiftyThousandEntries) {
  std::string json = R"({"metadata": {"total_size": 1}, "weight_map": {)";
  for (int i = 0; i < 50000; ++i) {
    if (i) json += ",";
    json += "\"model.layers." + std::to_string(i) + ".weight\": \"model-" + std::to_string(i % 100) + ".safetensors\"";
  }
  json += "}}";
  StatusOr<CheckpointIndex> index = Parse(json);
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->weight_map.size(), 50000u);
  EXPECT_EQ(index->shard_names.size(), 100u);
  EXPECT_EQ(index->weight_map[49999].tensor, "model.layers.49999.weight");
  EXPECT_EQ(index->shard_names[index->weight_map[49999].shard], "model-99.safetensors");
}

TEST(ShardName, AcceptsPlainRelativePaths) {
  for (const char* name : {"model-00001-of-00002.safetensors", "sub/dir/x.safetensors", "a..b", "...", ".hidden",
                           "x%41y", "name with space"}) {
    EXPECT_TRUE(ValidateShardName(name).ok()) << name;
  }
}

TEST(ShardName, RefusesPathsLeavingTheDirectory) {
  for (const char* name : {"", "/etc/passwd", "../x.safetensors", "a/../../x", "a/..", "./x", "a//b", "a/",
                           "%2e%2E/x", "a/%2E", "http://evil/x.safetensors", "//evil/x", "https:x",
                           "C:\\x", "a\\..\\b", "x?y=1", "x#frag", "a\nb"}) {
    Status status = ValidateShardName(name);
    EXPECT_FALSE(status.ok()) << name;
    EXPECT_NE(status.message().find("leaves the index's directory"), std::string::npos) << status.message();
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace stfs
