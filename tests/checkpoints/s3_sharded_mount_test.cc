// s3://BUCKET/PREFIX/ checkpoints through the stfs binary against s3rver: a
// prefix holding an index and its shards, and a prefix of shards without an
// index, each mount as one tree byte-exact with __shards__/.
#include <nlohmann/json.hpp>

#include "tests/fs/mount_harness.h"
#include "tests/remote/remote_test_util.h"
#include "tests/remote/s3_mount_fixture.h"
#include "tests/remote/s3_server.h"

namespace stfs::testing {
namespace {

class S3Checkpoint : public S3rverMountTest {
 protected:
  // Uploads two shards under `prefix`, and their index when `with_index`.
  std::vector<TestTensor> PutCheckpoint(const std::string& prefix, bool with_index) {
    std::vector<TestTensor> a = {{"x.weight", DType::F16, {300, 700}, ""}, {"x.bias", DType::F32, {300}, ""}};
    std::vector<TestTensor> b = {{"y", DType::BF16, {5, 9}, ""}};
    server_->Put("models", prefix + "model-00001-of-00002.safetensors", BuildSafetensors(a));
    server_->Put("models", prefix + "model-00002-of-00002.safetensors", BuildSafetensors(b));
    if (with_index) {
      nlohmann::ordered_json index;
      index["metadata"] = {{"total_size", 1}};
      for (const TestTensor& t : a) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
      for (const TestTensor& t : b) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
      server_->Put("models", prefix + "model.safetensors.index.json", index.dump());
    }
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
};

TEST_F(S3Checkpoint, PrefixWithAnIndexAndPrefixOfShardsMountAsOneTree) {
  for (bool with_index : {true, false}) {
    SCOPED_TRACE(with_index ? "index" : "shards only");
    std::string prefix = with_index ? "indexed/" : "plain/";
    std::vector<TestTensor> tensors = PutCheckpoint(prefix, with_index);
    std::string mnt = MountFile("s3://models/" + prefix, {"-o", EndpointOption()});
    ASSERT_FALSE(mnt.empty());
    for (const TestTensor& t : tensors) ExpectTensorServed(mnt, t);
    EXPECT_EQ(ListDir(mnt + "/__shards__"),
              (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
    EXPECT_EQ(ReadWholeFile(mnt + "/__metadata__"), with_index ? "{\"total_size\":1}\n" : "{}\n");
  }
}

}  // namespace
}  // namespace stfs::testing
