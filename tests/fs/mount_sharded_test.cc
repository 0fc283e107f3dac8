// Real mounts of sharded checkpoints: a directory holding an index, the
// index file itself and a directory of shards without an index each mount as
// one tree whose tensors read byte-exact from their shards, with the index's
// metadata at the root and each shard's own under __shards__/; every broken
// index is refused with one line naming the problem and nothing mounted;
// `stfs inspect` adds a shard column.
#include <sys/stat.h>

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "tests/fs/mount_harness.h"

namespace stfs::testing {
namespace {

using MountSharded = MountTest;

struct Shard {
  std::string file;  // relative to the checkpoint directory
  std::vector<TestTensor> tensors;
  std::string metadata;  // the shard's own __metadata__ JSON, "" for none
  std::string bytes;
};

// A checkpoint of three shards (one in a subdirectory), random tensors.
std::vector<Shard> MakeShards() {
  std::vector<Shard> shards = {
      {"model-00001-of-00003.safetensors",
       {{"embed.weight", DType::BF16, {16, 8}, ""}, {"layers.0.attn.q", DType::F32, {8, 8}, ""}},
       R"({"format":"pt","shard":"1"})", ""},
      {"model-00002-of-00003.safetensors",
       {{"layers.0.mlp.up", DType::F16, {8, 32}, ""}, {"layers.0.norm", DType::F32, {8}, ""},
        {"odd/name", DType::U8, {5}, ""}},
       "", ""},
      {"sub/model-00003-of-00003.safetensors", {{"lm_head.weight", DType::I64, {3, 4}, ""}}, R"({"k":"v"})", ""},
  };
  for (Shard& s : shards) s.bytes = BuildSafetensors(s.tensors, s.metadata);
  return shards;
}

std::string IndexJson(const std::vector<Shard>& shards, const std::string& metadata) {
  nlohmann::ordered_json index = nlohmann::ordered_json::object();
  index["metadata"] = nlohmann::ordered_json::parse(metadata);
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  for (const Shard& s : shards) {
    for (const TestTensor& t : s.tensors) map[t.name] = s.file;
  }
  index["weight_map"] = map;
  return index.dump(2);
}

uint64_t HeaderSizeOf(const std::string& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[i]);
  return n;
}

// Writes the shards under `dir` (made here), and the index when given.
std::string WriteCheckpoint(const TempDir& tmp, const std::string& dir, const std::vector<Shard>& shards,
                            const std::string& index_name = "", const std::string& index = "") {
  std::string root = tmp.path() + "/" + dir;
  ::mkdir(root.c_str(), 0755);
  ::mkdir((root + "/sub").c_str(), 0755);
  for (const Shard& s : shards) tmp.Write(dir + "/" + s.file, s.bytes);
  if (!index_name.empty()) tmp.Write(dir + "/" + index_name, index);
  return root;
}

void ExpectOneTree(const std::string& mnt, const std::vector<Shard>& shards, const std::string& metadata) {
  std::vector<std::string> expected = {"__metadata__", "__shards__", "__stats__"};
  for (const Shard& s : shards) {
    for (const TestTensor& t : s.tensors) expected.push_back(ExpectedDirName(t.name));
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ListDir(mnt), expected);
  for (const Shard& s : shards) {
    for (const TestTensor& t : s.tensors) ExpectTensorServed(mnt, t);
  }
  EXPECT_EQ(ReadWholeFile(mnt + "/__metadata__"), metadata + "\n");
  std::vector<std::string> shard_dirs;
  for (const Shard& s : shards) shard_dirs.push_back(ExpectedDirName(s.file));
  std::sort(shard_dirs.begin(), shard_dirs.end());
  EXPECT_EQ(ListDir(mnt + "/__shards__"), shard_dirs);
  for (const Shard& s : shards) {
    const std::string dir = mnt + "/__shards__/" + ExpectedDirName(s.file);
    EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"__metadata__", "header_size"}));
    std::string own = s.metadata.empty() ? "{}" : nlohmann::json::parse(s.metadata).dump();
    EXPECT_EQ(ReadWholeFile(dir + "/__metadata__"), own + "\n") << s.file;
    EXPECT_EQ(ReadWholeFile(dir + "/header_size"), std::to_string(HeaderSizeOf(s.bytes)) + "\n") << s.file;
  }
}

TEST_F(MountSharded, IndexDirectoryAndIndexFileMountAsOneTree) {
  std::vector<Shard> shards = MakeShards();
  const std::string metadata = R"({"total_size":1234,"format":"pt"})";
  std::string root = WriteCheckpoint(dir_, "ckpt", shards, "model.safetensors.index.json", IndexJson(shards, metadata));
  for (const std::string& source : {root, root + "/model.safetensors.index.json"}) {
    SCOPED_TRACE(source);
    std::string mnt = MountFile(source);
    ASSERT_FALSE(mnt.empty());
    ExpectOneTree(mnt, shards, metadata);
  }
}

TEST_F(MountSharded, DirectoryOfShardsWithoutIndexMountsEveryShard) {
  std::vector<Shard> shards = MakeShards();
  shards.pop_back();  // a directory without an index takes only its own *.safetensors files
  std::string root = WriteCheckpoint(dir_, "plain", shards);
  std::string mnt = MountFile(root);
  ASSERT_FALSE(mnt.empty());
  ExpectOneTree(mnt, shards, "{}");
}

TEST_F(MountSharded, BrokenIndexesAreRefusedWithOneLine) {
  std::vector<Shard> shards = MakeShards();
  struct Case {
    std::string name;
    std::function<void(nlohmann::ordered_json&)> edit;
    std::string problem;
  };
  std::vector<Case> cases = {
      {"missing shard", [](auto& j) { j["weight_map"]["lm_head.weight"] = "gone.safetensors"; },
       "shard \"gone.safetensors\" cannot be opened"},
      {"tensor its shard lacks", [](auto& j) { j["weight_map"]["layers.0.norm"] = "model-00001-of-00003.safetensors"; },
       "weight_map puts tensor \"layers.0.norm\" in shard \"model-00001-of-00003.safetensors\", which lacks it"},
      {"shard tensor missing from the map", [](auto& j) { j["weight_map"].erase("odd/name"); },
       "holds tensor \"odd/name\", which weight_map lacks"},
      {"path leaving the directory", [](auto& j) { j["weight_map"]["lm_head.weight"] = "../x.safetensors"; },
       "leaves the index's directory"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    auto index = nlohmann::ordered_json::parse(IndexJson(shards, "{}"));
    cases[i].edit(index);
    std::string root = WriteCheckpoint(dir_, "broken" + std::to_string(i), shards, "m.safetensors.index.json", index.dump());
    std::string mnt = NewMountpoint();
    CommandResult r = RunStfs({root, mnt});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("stfs: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("m.safetensors.index.json"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(cases[i].problem), std::string::npos) << r.err;
    EXPECT_FALSE(IsMounted(mnt));
  }
  // A tensor in two shards: a second shard repeating a tensor of the first.
  std::vector<Shard> twice = MakeShards();
  twice[1].tensors.push_back({"embed.weight", DType::BF16, {16, 8}, ""});
  twice[1].bytes = BuildSafetensors(twice[1].tensors, "");
  std::string root = WriteCheckpoint(dir_, "twice", twice);
  std::string mnt = NewMountpoint();
  CommandResult r = RunStfs({root, mnt});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("tensor \"embed.weight\" is in two shards"), std::string::npos) << r.err;
  EXPECT_FALSE(IsMounted(mnt));
}

TEST_F(MountSharded, TwoHundredShardsTakeOneOpenFileEachNotOnePerTensor) {
  // 200 shards of 10 tensors: the daemon holds about 200 shard descriptors
  // (plus a handful of its own), never 2,000, and every tensor reads right.
  nlohmann::ordered_json index;
  std::vector<TestTensor> all;
  std::string root = dir_.path() + "/many";
  ::mkdir(root.c_str(), 0755);
  for (int s = 0; s < 200; ++s) {
    std::vector<TestTensor> tensors;
    for (int i = 0; i < 10; ++i) tensors.push_back({"s" + std::to_string(s) + ".t" + std::to_string(i), DType::U8, {3}, ""});
    std::string file = "shard-" + std::to_string(s) + ".safetensors";
    dir_.Write("many/" + file, BuildSafetensors(tensors));
    for (const TestTensor& t : tensors) index["weight_map"][t.name] = file;
    all.insert(all.end(), tensors.begin(), tensors.end());
  }
  dir_.Write("many/model.safetensors.index.json", index.dump());
  std::string mnt = MountFile(root);
  ASSERT_FALSE(mnt.empty());
  std::vector<int> pids = ProcessesWithArgument(mnt, "stfs");
  ASSERT_EQ(pids.size(), 1u);
  size_t fds = ListDir("/proc/" + std::to_string(pids[0]) + "/fd").size();
  EXPECT_GE(fds, 200u);
  EXPECT_LE(fds, 240u);
  for (size_t i = 0; i < all.size(); i += 97) {
    EXPECT_EQ(ReadWholeFile(mnt + "/" + all[i].name + "/data"), all[i].bytes) << all[i].name;
  }
}

TEST_F(MountSharded, InspectAddsAShardColumn) {
  std::vector<Shard> shards = MakeShards();
  std::string root = WriteCheckpoint(dir_, "ckpt", shards, "model.safetensors.index.json", IndexJson(shards, "{}"));
  CommandResult table = RunStfs({"inspect", root});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  std::vector<std::string> lines = Lines(table.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("SHARD"), std::string::npos) << lines[0];
  std::map<std::string, std::string> shard_of;
  for (const Shard& s : shards) {
    for (const TestTensor& t : s.tensors) shard_of[t.name] = s.file;
  }
  for (const auto& [tensor, file] : shard_of) {
    bool found = std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
      return line.rfind(tensor + " ", 0) == 0 && line.size() >= file.size() &&
             line.compare(line.size() - file.size(), file.size(), file) == 0;
    });
    EXPECT_TRUE(found) << tensor << " with shard " << file << " in\n" << table.out;
  }
  EXPECT_NE(table.out.find("shards:      3"), std::string::npos) << table.out;
  CommandResult json = RunStfs({"inspect", root + "/model.safetensors.index.json", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["tensors"].size(), shard_of.size());
  for (const auto& t : j["tensors"]) EXPECT_EQ(t["shard"], shard_of[t["name"].get<std::string>()]);
  ASSERT_EQ(j["shards"].size(), 3u);
  EXPECT_EQ(j["shards"][2]["header_size"], HeaderSizeOf(shards[2].bytes));
}

}  // namespace
}  // namespace stfs::testing
