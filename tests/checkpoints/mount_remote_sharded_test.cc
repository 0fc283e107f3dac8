// Real mounts of sharded checkpoints over HTTP (nginx): an index URL and a
// hub repository (hf://ORG/REPO[@REV]: its index, else its model.safetensors)
// mount as one tree byte-exact, with the index's metadata and each shard's
// own under __shards__/, __stats__ listing every shard's source; a broken
// remote index is refused with one line and nothing mounted.
#include <sys/stat.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "tests/remote/nginx_mount_fixture.h"

namespace stfs::testing {
namespace {

struct Shard {
  std::string file;
  std::vector<TestTensor> tensors;
  std::string bytes;
};

std::vector<Shard> MakeShards() {
  std::vector<Shard> shards = {
      {"model-00001-of-00003.safetensors", {{"a.weight", DType::BF16, {64, 32}, ""}, {"a.bias", DType::F32, {64}, ""}}, ""},
      {"model-00002-of-00003.safetensors", {{"b.weight", DType::F16, {300, 1000}, ""}}, ""},
      {"sub/model-00003-of-00003.safetensors", {{"c", DType::I64, {5, 3}, ""}, {"d/e", DType::U8, {7}, ""}}, ""},
  };
  for (Shard& s : shards) s.bytes = BuildSafetensors(s.tensors, R"({"format":"pt"})");
  return shards;
}

std::string IndexOf(const std::vector<Shard>& shards) {
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", 123}};
  for (const Shard& s : shards) {
    for (const TestTensor& t : s.tensors) index["weight_map"][t.name] = s.file;
  }
  return index.dump();
}

void MakeDirs(const std::string& root, const std::string& relative) {
  for (size_t slash = relative.find('/'); slash != std::string::npos; slash = relative.find('/', slash + 1)) {
    ::mkdir((root + "/" + relative.substr(0, slash)).c_str(), 0755);
  }
}

class RemoteSharded : public NginxMountTest {
 protected:
  void TearDown() override {
    NginxMountTest::TearDown();
    unsetenv("HF_ENDPOINT");
  }
  // Serves the checkpoint under `prefix` (with its index when `index_name` is given).
  void Serve(const std::string& prefix, const std::vector<Shard>& shards, const std::string& index_name) {
    for (const Shard& s : shards) {
      MakeDirs(dir_.path(), prefix + s.file);
      dir_.Write(prefix + s.file, s.bytes);
    }
    if (!index_name.empty()) {
      MakeDirs(dir_.path(), prefix + index_name);
      dir_.Write(prefix + index_name, IndexOf(shards));
    }
  }
  void ExpectOneTree(const std::string& mnt, const std::vector<Shard>& shards) {
    for (const Shard& s : shards) {
      for (const TestTensor& t : s.tensors) ExpectTensorServed(mnt, t);
      EXPECT_EQ(ReadWholeFile(mnt + "/__shards__/" + ExpectedDirName(s.file) + "/__metadata__"),
                "{\"format\":\"pt\"}\n");
    }
    EXPECT_EQ(ReadWholeFile(mnt + "/__metadata__"), "{\"total_size\":123}\n");
    auto stats = nlohmann::json::parse(ReadWholeFile(mnt + "/__stats__"));
    ASSERT_TRUE(stats["source"].is_array()) << stats.dump();
    EXPECT_EQ(stats["source"].size(), shards.size());
  }
};

TEST_F(RemoteSharded, IndexUrlMountsAsOneTree) {
  std::vector<Shard> shards = MakeShards();
  Serve("ckpt/", shards, "model.safetensors.index.json");
  std::string mnt = MountFile(nginx_->Url("/ckpt/model.safetensors.index.json"));
  ASSERT_FALSE(mnt.empty());
  ExpectOneTree(mnt, shards);
  // stfs inspect takes the same URL and names each tensor's shard.
  CommandResult r = RunStfs({"inspect", nginx_->Url("/ckpt/model.safetensors.index.json"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tensors"][4]["shard"], "sub/model-00003-of-00003.safetensors");
}

TEST_F(RemoteSharded, HubRepositoryMountsItsIndexElseItsSingleFile) {
  // The test nginx redirects /hub/ORG/REPO/resolve/REV/FILE to /FILE.
  std::vector<Shard> shards = MakeShards();
  Serve("", shards, "model.safetensors.index.json");
  setenv("HF_ENDPOINT", nginx_->Url("/hub").c_str(), 1);
  std::string mnt = MountFile("hf://org/repo");
  ASSERT_FALSE(mnt.empty());
  ExpectOneTree(mnt, shards);
  bool asked_for_index = false;
  for (const LoggedRequest& r : nginx_->Requests()) {
    asked_for_index |= r.uri == "/hub/org/repo/resolve/main/model.safetensors.index.json";
  }
  EXPECT_TRUE(asked_for_index);
  // Without an index: the repository's model.safetensors, at the revision asked.
  ::unlink((dir_.path() + "/model.safetensors.index.json").c_str());
  std::vector<TestTensor> single = {{"w", DType::F32, {10, 10}, ""}};
  dir_.Write("model.safetensors", BuildSafetensors(single));
  nginx_->ClearLog();
  std::string mnt2 = MountFile("hf://org/single@v1");
  ASSERT_FALSE(mnt2.empty());
  ExpectTensorServed(mnt2, single[0]);
  struct stat st;
  EXPECT_NE(::stat((mnt2 + "/__shards__").c_str(), &st), 0) << "a single file has no __shards__";
  std::vector<LoggedRequest> log = nginx_->Requests();
  ASSERT_GE(log.size(), 2u);
  EXPECT_EQ(log[0].uri, "/hub/org/single/resolve/v1/model.safetensors.index.json");
  EXPECT_EQ(log[0].status, 302);
  ::unlink((dir_.path() + "/model.safetensors").c_str());
  CommandResult r = RunStfs({"inspect", "hf://org/nothing"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("holds neither model.safetensors.index.json nor model.safetensors"), std::string::npos) << r.err;
}

TEST_F(RemoteSharded, BrokenRemoteIndexIsRefusedWithOneLine) {
  std::vector<Shard> shards = MakeShards();
  Serve("broken/", shards, "model.safetensors.index.json");
  auto index = nlohmann::ordered_json::parse(IndexOf(shards));
  index["weight_map"]["c"] = "gone.safetensors";
  dir_.Write("broken/model.safetensors.index.json", index.dump());
  std::string mnt = NewMountpoint();
  CommandResult r = RunStfs({nginx_->Url("/broken/model.safetensors.index.json"), mnt});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("shard \"gone.safetensors\" cannot be opened"), std::string::npos) << r.err;
  EXPECT_FALSE(IsMounted(mnt));
}

}  // namespace
}  // namespace stfs::testing
