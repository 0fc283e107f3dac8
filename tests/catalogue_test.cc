// Tests for the catalogue: real shard files on disk built from random
// tensors (every tensor's bytes read back through its shard and compared),
// each refusal of the issue with its one-line message, the directory rules,
// the bounded parallel header reads (a counting opener), and a 50,000-tensor,
// 100-shard index in memory built well within a generous time limit.
#include "core/catalogue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "tests/test_files.h"

namespace stfs {
namespace {

using testing::BuildSafetensors;
using testing::TempDir;
using testing::TestTensor;

// A ByteSource over bytes in memory, for catalogues too large for disk tests.
class MemorySource final : public ByteSource {
 public:
  MemorySource(std::string name, std::string bytes) : name_(std::move(name)), bytes_(std::move(bytes)) {}
  StatusOr<size_t> ReadAt(uint64_t offset, size_t length, char* dst) const override {
    if (offset >= bytes_.size()) return size_t{0};
    size_t n = std::min<uint64_t>(length, bytes_.size() - offset);
    std::copy_n(bytes_.data() + offset, n, dst);
    return n;
  }
  uint64_t Size() const override { return bytes_.size(); }
  const std::string& Describe() const override { return name_; }

 private:
  std::string name_;
  std::string bytes_;
};

// Shard files of a test checkpoint: shard name -> tensors it holds.
using ShardPlan = std::map<std::string, std::vector<TestTensor>>;

// Writes each shard of `plan` into `dir` (random bytes filled in).
void WriteShards(const TempDir& dir, ShardPlan& plan) {
  for (auto& [name, tensors] : plan) {
    dir.Write(name, BuildSafetensors(tensors, "{\"shard\":" + testing::JsonString(name) + "}"));
  }
}

// Returns index JSON mapping every tensor of `plan` to its shard, plus
// `extra` entries ("\"name\": \"shard\"" text) appended to weight_map.
std::string IndexFor(const ShardPlan& plan, const std::string& extra = "") {
  std::string map;
  for (const auto& [name, tensors] : plan) {
    for (const TestTensor& t : tensors) {
      map += (map.empty() ? "" : ", ") + testing::JsonString(t.name) + ": " + testing::JsonString(name);
    }
  }
  if (!extra.empty()) map += ", " + extra;
  return R"({"metadata": {"total_size": 42}, "weight_map": {)" + map + "}}";
}

ShardPlan ThreeShards() {
  return ShardPlan{
      {"model-00001-of-00003.safetensors", {{"embed", DType::F16, {8, 4}, ""}, {"layers.0.w", DType::BF16, {4, 4}, ""}}},
      {"model-00002-of-00003.safetensors", {{"layers.1.w", DType::F32, {3, 5}, ""}, {"scalar", DType::I64, {}, ""}}},
      {"model-00003-of-00003.safetensors", {{"head", DType::U8, {7}, ""}, {"empty", DType::F32, {0, 3}, ""}}},
  };
}

// Checks that every tensor of `plan` is in `catalogue` with its shard's
// name and exactly its bytes.
void ExpectHoldsExactly(const Catalogue& catalogue, const ShardPlan& plan) {
  size_t count = 0;
  for (const auto& [shard_name, tensors] : plan) {
    for (const TestTensor& t : tensors) {
      ++count;
      const CatalogueTensor* found = catalogue.Find(t.name);
      ASSERT_NE(found, nullptr) << t.name;
      EXPECT_EQ(catalogue.ShardOf(*found).name, shard_name);
      EXPECT_EQ(found->info.shape, t.shape);
      EXPECT_EQ(found->info.dtype, t.dtype);
      std::string bytes(found->info.byte_size(), '\0');
      ASSERT_TRUE(ReadExactly(*catalogue.ShardOf(*found).source, catalogue.FileOffset(*found), bytes.size(),
                              bytes.data()).ok());
      EXPECT_EQ(bytes, t.bytes) << t.name;
    }
  }
  EXPECT_EQ(catalogue.tensors().size(), count);
}

// Expects `result` refused with one line holding every fragment.
void ExpectRefused(const StatusOr<Catalogue>& result, std::initializer_list<std::string> fragments) {
  ASSERT_FALSE(result.ok());
  const std::string& message = result.status().message();
  for (const std::string& fragment : fragments) {
    EXPECT_NE(message.find(fragment), std::string::npos) << message << "\n  lacks: " << fragment;
  }
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(Catalogue, OneFileKeepsHeaderOrderAndMetadata) {
  TempDir dir;
  std::vector<TestTensor> tensors = {{"b", DType::F32, {2, 2}, ""}, {"a", DType::I8, {3}, ""}};
  std::string path = dir.Write("one.safetensors", BuildSafetensors(tensors, R"({"k":"v"})"));
  StatusOr<Catalogue> catalogue = OpenLocalCatalogue(path);
  ASSERT_TRUE(catalogue.ok()) << catalogue.status().ToString();
  EXPECT_FALSE(catalogue->sharded());
  EXPECT_EQ(catalogue->metadata_json(), R"({"k":"v"})");
  ASSERT_EQ(catalogue->tensors().size(), 2u);
  EXPECT_EQ(catalogue->tensors()[0].info.name, "b");
  EXPECT_EQ(catalogue->shards().size(), 1u);
  ExpectHoldsExactly(*catalogue, ShardPlan{{path, tensors}});
  EXPECT_EQ(catalogue->Find("missing"), nullptr);
}

TEST(Catalogue, IndexServesEachTensorFromItsShard) {
  TempDir dir;
  ShardPlan plan = ThreeShards();
  WriteShards(dir, plan);
  std::string index_path = dir.Write("model.safetensors.index.json", IndexFor(plan));
  StatusOr<Catalogue> catalogue = OpenLocalCatalogue(index_path);
  ASSERT_TRUE(catalogue.ok()) << catalogue.status().ToString();
  EXPECT_TRUE(catalogue->sharded());
  EXPECT_EQ(catalogue->metadata_json(), R"({"total_size":42})");
  ExpectHoldsExactly(*catalogue, plan);
  ASSERT_EQ(catalogue->shards().size(), 3u);
  for (const CatalogueShard& shard : catalogue->shards()) {
    EXPECT_EQ(shard.metadata_json, "{\"shard\":" + testing::JsonString(shard.name) + "}");
    EXPECT_TRUE(shard.has_metadata);
    EXPECT_EQ(shard.header_size % 8, 0u);
    EXPECT_EQ(shard.file_size, shard.source->Size());
  }
  // weight_map order.
  EXPECT_EQ(catalogue->tensors()[0].info.name, "embed");
  EXPECT_EQ(catalogue->tensors()[5].info.name, "empty");
}

TEST(Catalogue, DirectoryWithOneIndexUsesIt) {
  TempDir dir;
  ShardPlan plan = ThreeShards();
  WriteShards(dir, plan);
  dir.Write("model.safetensors.index.json", IndexFor(plan));
  // A stray shard the index does not name is not opened.
  std::vector<TestTensor> stray = {{"embed", DType::F32, {1}, ""}};
  dir.Write("zzz-stray.safetensors", BuildSafetensors(stray));
  StatusOr<Catalogue> catalogue = OpenLocalCatalogue(dir.path());
  ASSERT_TRUE(catalogue.ok()) << catalogue.status().ToString();
  ExpectHoldsExactly(*catalogue, plan);
  EXPECT_EQ(catalogue->shards().size(), 3u);
}

TEST(Catalogue, DirectoryWithoutIndexTakesEveryShardSorted) {
  TempDir dir;
  ShardPlan plan = ThreeShards();
  WriteShards(dir, plan);
  dir.Write("notes.txt", "not a shard");
  StatusOr<Catalogue> catalogue = OpenLocalCatalogue(dir.path());
  ASSERT_TRUE(catalogue.ok()) << catalogue.status().ToString();
  EXPECT_TRUE(catalogue->sharded());
  EXPECT_EQ(catalogue->metadata_json(), "{}");
  ExpectHoldsExactly(*catalogue, plan);
  EXPECT_EQ(catalogue->shards()[0].name, "model-00001-of-00003.safetensors");
  EXPECT_EQ(catalogue->tensors()[0].info.name, "embed");
  EXPECT_EQ(catalogue->tensors()[2].info.name, "layers.1.w");
}

TEST(Catalogue, DirectoryRefusalsNameTheProblem) {
  TempDir dir;
  ExpectRefused(OpenLocalCatalogue(dir.path()), {dir.path(), "no .safetensors file"});
  dir.Write("a.safetensors.index.json", "{}");
  dir.Write("b.safetensors.index.json", "{}");
  ExpectRefused(OpenLocalCatalogue(dir.path()),
                {dir.path(), "2 index files", "a.safetensors.index.json", "b.safetensors.index.json"});
  ExpectRefused(OpenLocalCatalogue(dir.path() + "/nope"), {"nope"});
}

TEST(Catalogue, DirectoryRefusesATensorInTwoShards) {
  TempDir dir;
  ShardPlan plan = ThreeShards();
  plan["model-00003-of-00003.safetensors"].push_back({"embed", DType::F32, {2}, ""});
  WriteShards(dir, plan);
  ExpectRefused(OpenLocalCatalogue(dir.path()),
                {dir.path(), "\"embed\" is in two shards", "model-00001-of-00003", "model-00003-of-00003"});
}

TEST(Catalogue, IndexRefusesATensorInTwoShards) {
  TempDir dir;
  ShardPlan plan = ThreeShards();
  WriteShards(dir, plan);
  std::string index = IndexFor(plan);
  plan["model-00002-of-00003.safetensors"].push_back({"embed", DType::F32, {2}, ""});
  WriteShards(dir, plan);
  std::string index_path = dir.Write("m.safetensors.index.json", index);
  ExpectRefused(OpenLocalCatalogue(index_path),
                {index_path, "\"embed\" is in two shards", "model-00001-of-00003", "model-00002-of-00003"});
}

TEST(Catalogue, IndexRefusesAMissingShard) {
  TempDir dir;
  ShardPlan plan = ThreeShards();
  WriteShards(dir, plan);
  std::string index_path =
      dir.Write("m.safetensors.index.json", IndexFor(plan, R"("ghost": "model-00004-of-00003.safetensors")"));
  StatusOr<Catalogue> result = OpenLocalCatalogue(index_path);
  ExpectRefused(result, {index_path, "shard \"model-00004-of-00003.safetensors\" cannot be opened"});
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
}

TEST(Catalogue, IndexRefusesATensorItsShardLacks) {
  TempDir dir;
  ShardPlan plan = ThreeShards();
  WriteShards(dir, plan);
  std::string index_path =
      dir.Write("m.safetensors.index.json", IndexFor(plan, R"("ghost": "model-00002-of-00003.safetensors")"));
  ExpectRefused(OpenLocalCatalogue(index_path),
                {index_path, "weight_map puts tensor \"ghost\" in shard \"model-00002-of-00003.safetensors\", which lacks it"});
}

TEST(Catalogue, IndexRefusesATensorMappedToTheWrongShard) {
  TempDir dir;
  ShardPlan plan = ThreeShards();
  WriteShards(dir, plan);
  std::string index = IndexFor(plan);
  // Map "head" (in shard 3) to shard 1.
  std::string from = R"("head": "model-00003-of-00003.safetensors")";
  index.replace(index.find(from), from.size(), R"("head": "model-00001-of-00003.safetensors")");
  std::string index_path = dir.Write("m.safetensors.index.json", index);
  ExpectRefused(OpenLocalCatalogue(index_path),
                {"tensor \"head\" in shard \"model-00001-of-00003.safetensors\", which lacks it",
                 "it is in shard \"model-00003-of-00003.safetensors\""});
}

TEST(Catalogue, IndexRefusesAShardTensorMissingFromTheMap) {
  TempDir dir;
  ShardPlan plan = ThreeShards();
  std::string index = IndexFor(plan);
  plan["model-00002-of-00003.safetensors"].push_back({"unlisted", DType::F32, {2}, ""});
  WriteShards(dir, plan);
  std::string index_path = dir.Write("m.safetensors.index.json", index);
  ExpectRefused(OpenLocalCatalogue(index_path),
                {index_path, "shard \"model-00002-of-00003.safetensors\" holds tensor \"unlisted\", which weight_map lacks"});
}

TEST(Catalogue, IndexRefusesShardPathsLeavingItsDirectory) {
  TempDir outside;
  std::vector<TestTensor> tensors = {{"t", DType::F32, {2}, ""}};
  std::string outside_path = outside.Write("x.safetensors", BuildSafetensors(tensors));
  TempDir dir;
  for (const std::string& shard : {std::string("../x.safetensors"), outside_path, std::string("http://other/x.safetensors")}) {
    std::string index_path = dir.Write("m.safetensors.index.json",
                                       "{\"weight_map\": {\"t\": " + testing::JsonString(shard) + "}}");
    ExpectRefused(OpenLocalCatalogue(index_path), {index_path, "leaves the index's directory"});
  }
}

TEST(Catalogue, IndexRefusesABadShardHeaderNamingTheShard) {
  TempDir dir;
  ShardPlan plan = ThreeShards();
  WriteShards(dir, plan);
  dir.Write("model-00002-of-00003.safetensors", testing::RawFile("{\"t\": 1}"));
  std::string index_path = dir.Write("m.safetensors.index.json", IndexFor(plan));
  ExpectRefused(OpenLocalCatalogue(index_path), {"model-00002-of-00003.safetensors"});
}

TEST(Catalogue, IndexRefusesAMalformedIndexNamingIt) {
  TempDir dir;
  std::string index_path = dir.Write("m.safetensors.index.json", "{\"weight_map\": ");
  ExpectRefused(OpenLocalCatalogue(index_path), {index_path, "not valid JSON"});
}

// Builds an index of `shards` in-memory shards holding `per_shard` tensors
// each, and an opener that counts its calls and the most running at once.
struct MemoryCheckpoint {
  CheckpointIndex index;
  std::map<std::string, std::string> files;
  std::atomic<int> opens{0}, running{0}, most_running{0};
  std::chrono::milliseconds open_delay{0};

  MemoryCheckpoint(int shards, int per_shard) {
    for (int s = 0; s < shards; ++s) {
      std::string shard = "model-" + std::to_string(s) + ".safetensors";
      std::vector<TestTensor> tensors;
      for (int t = 0; t < per_shard; ++t) {
        std::string name = "model.layers." + std::to_string(s) + "." + std::to_string(t) + ".weight";
        tensors.push_back({name, DType::BF16, {2}, "abcd"});
        index.weight_map.push_back({name, static_cast<uint32_t>(s)});
      }
      index.shard_names.push_back(shard);
      files[shard] = BuildSafetensors(tensors);
    }
  }

  ShardOpener Opener() {
    return [this](const std::string& name) -> StatusOr<std::unique_ptr<ByteSource>> {
      ++opens;
      int now = ++running;
      for (int seen = most_running; now > seen && !most_running.compare_exchange_weak(seen, now);) {
      }
      std::this_thread::sleep_for(open_delay);
      --running;
      auto it = files.find(name);
      if (it == files.end()) return Status::NotFound(name + ": no such object");
      return std::unique_ptr<ByteSource>(std::make_unique<MemorySource>(name, it->second));
    };
  }
};

TEST(Catalogue, ReadsShardHeadersInParallelWithinTheBound) {
  MemoryCheckpoint checkpoint(24, 3);
  checkpoint.open_delay = std::chrono::milliseconds(30);
  CatalogueOptions options;
  options.parallel_shard_reads = 4;
  StatusOr<Catalogue> catalogue = Catalogue::FromIndex(checkpoint.index, "mem.index.json", checkpoint.Opener(), options);
  ASSERT_TRUE(catalogue.ok()) << catalogue.status().ToString();
  EXPECT_EQ(checkpoint.opens, 24);  // one source per shard, not per tensor
  EXPECT_LE(checkpoint.most_running, 4);
  EXPECT_GE(checkpoint.most_running, 2);
  EXPECT_EQ(catalogue->tensors().size(), 72u);
}

TEST(Catalogue, FiftyThousandTensorsOverAHundredShardsBuildFast) {
  MemoryCheckpoint checkpoint(100, 500);
  auto start = std::chrono::steady_clock::now();
  StatusOr<Catalogue> catalogue = Catalogue::FromIndex(checkpoint.index, "mem.index.json", checkpoint.Opener());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(catalogue.ok()) << catalogue.status().ToString();
  EXPECT_EQ(checkpoint.opens, 100);
  EXPECT_EQ(catalogue->tensors().size(), 50000u);
  const CatalogueTensor* last = catalogue->Find("model.layers.99.499.weight");
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(catalogue->ShardOf(*last).name, "model-99.safetensors");
  // Generous for a loaded 2-core machine; a quadratic step would take minutes.
  EXPECT_LT(seconds, 10.0);
  std::printf("catalogue of 50000 tensors / 100 shards built in %.3f s\n", seconds);
}

TEST(Catalogue, RepositoryPrefersItsIndex) {
  MemoryCheckpoint checkpoint(3, 2);
  std::string map;
  for (const CheckpointIndex::Entry& entry : checkpoint.index.weight_map) {
    map += (map.empty() ? "" : ",") + testing::JsonString(entry.tensor) + ":" +
           testing::JsonString(checkpoint.index.shard_names[entry.shard]);
  }
  checkpoint.files["model.safetensors.index.json"] = R"({"metadata":{"total_size":24},"weight_map":{)" + map + "}}";
  std::vector<TestTensor> single = {{"only", DType::F32, {1}, ""}};
  checkpoint.files["model.safetensors"] = BuildSafetensors(single);
  StatusOr<Catalogue> catalogue = Catalogue::FromRepository("hf://org/repo", checkpoint.Opener());
  ASSERT_TRUE(catalogue.ok()) << catalogue.status().ToString();
  EXPECT_TRUE(catalogue->sharded());
  EXPECT_EQ(catalogue->tensors().size(), 6u);
  EXPECT_EQ(catalogue->metadata_json(), R"({"total_size":24})");
  EXPECT_EQ(catalogue->source_name(), "model.safetensors.index.json");
}

TEST(Catalogue, RepositoryWithoutIndexUsesModelSafetensors) {
  MemoryCheckpoint checkpoint(0, 0);
  std::vector<TestTensor> single = {{"only", DType::F32, {1}, ""}};
  checkpoint.files["model.safetensors"] = BuildSafetensors(single);
  StatusOr<Catalogue> catalogue = Catalogue::FromRepository("hf://org/repo", checkpoint.Opener());
  ASSERT_TRUE(catalogue.ok()) << catalogue.status().ToString();
  EXPECT_FALSE(catalogue->sharded());
  ASSERT_EQ(catalogue->tensors().size(), 1u);
  EXPECT_EQ(catalogue->tensors()[0].info.name, "only");
  checkpoint.files.clear();
  ExpectRefused(Catalogue::FromRepository("hf://org/repo", checkpoint.Opener()),
                {"hf://org/repo: holds neither model.safetensors.index.json nor model.safetensors"});
}

TEST(Catalogue, StopsOpeningShardsAfterAFailure) {
  MemoryCheckpoint checkpoint(50, 1);
  checkpoint.index.shard_names[0] = "missing.safetensors";
  CatalogueOptions options;
  options.parallel_shard_reads = 2;
  StatusOr<Catalogue> catalogue = Catalogue::FromIndex(checkpoint.index, "mem.index.json", checkpoint.Opener(), options);
  ExpectRefused(catalogue, {"mem.index.json: shard \"missing.safetensors\" cannot be opened", "no such object"});
  EXPECT_LT(checkpoint.opens, 50);
}

}  // namespace
}  // namespace stfs
