// A bucket in another region than the one requests are signed for: S3
// answers 301 PermanentRedirect (x-amz-bucket-region) or 400
// AuthorizationHeaderMalformed (<Region> in the body). The fault proxy in
// front of s3rver answers so to every request not signed for eu-west-1; the
// mount must follow once, print one notice line, and read byte-exact.
#include <nlohmann/json.hpp>

#include "tests/fs/mount_harness.h"
#include "tests/remote/s3_mount_fixture.h"
#include "tests/remote/s3_server.h"
#include "tests/remote/test_servers.h"

namespace stfs::testing {
namespace {

constexpr char kNotice[] =
    "stfs: s3://models is in region eu-west-1, not us-east-1 (S3 said so): signing for eu-west-1 "
    "(-o region=eu-west-1 saves this request)\n";

class S3RegionRedirect : public S3rverMountTest {
 protected:
  void TearDown() override {
    S3rverMountTest::TearDown();
    proxy_.reset();
  }
  // Starts the proxy answering `status` to requests signed for another
  // region than eu-west-1; returns the -o options for it, signing for us-east-1.
  std::string ProxyOptions(int status) {
    std::string error;
    proxy_ = FaultProxy::Start(server_->endpoint().url, &error);
    EXPECT_NE(proxy_, nullptr) << error;
    if (proxy_ == nullptr) return "";
    proxy_->Set("fault=wrong_region&region=eu-west-1&status=" + std::to_string(status));
    return "endpoint=" + proxy_->Url("") + ",region=us-east-1,block_size=1M,cache_size=16M";
  }
  // Mounts `source`; returns the mount point and the mount command's stderr.
  std::string Mount(const std::string& source, const std::string& options, std::string* err) {
    std::string mnt = NewMountpoint();
    CommandResult r = RunStfs({"-o", options, source, mnt});
    *err = r.err;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 && IsMounted(mnt) ? mnt : "";
  }

  std::unique_ptr<FaultProxy> proxy_;
};

TEST_F(S3RegionRedirect, PermanentRedirectIsFollowedOnceWithANotice) {
  std::vector<TestTensor> tensors = {{"embed", DType::F16, {300, 501}, ""}, {"tail", DType::U8, {(1 << 20) + 3}, ""}};
  server_->Put("models", "m.safetensors", BuildSafetensors(tensors, "{}"));
  std::string err;
  std::string mnt = Mount("s3://models/m.safetensors", ProxyOptions(301), &err);
  ASSERT_FALSE(mnt.empty());
  EXPECT_EQ(err, kNotice);
  ExpectRootListing(mnt, tensors);
  for (const TestTensor& t : tensors) ExpectTensorServed(mnt, t);
  // One refused request (the first), then only requests signed for eu-west-1.
  nlohmann::json stats = nlohmann::json::parse(proxy_->StatsJson());
  std::vector<int> statuses = stats["statuses"];
  ASSERT_FALSE(statuses.empty());
  EXPECT_EQ(statuses.front(), 301);
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 301), 1) << stats.dump();
}

TEST_F(S3RegionRedirect, AuthorizationHeaderMalformedNamingTheRegionWorksForAPrefixToo) {
  std::vector<TestTensor> first = {{"a", DType::F32, {100, 7}, ""}};
  std::vector<TestTensor> second = {{"b", DType::BF16, {3, 1000}, ""}};
  server_->Put("models", "sharded/model-1.safetensors", BuildSafetensors(first, "{}"));
  server_->Put("models", "sharded/model-2.safetensors", BuildSafetensors(second, "{}"));
  std::string err;
  std::string mnt = Mount("s3://models/sharded/", ProxyOptions(400), &err);
  ASSERT_FALSE(mnt.empty());
  EXPECT_EQ(err, kNotice);  // once for the bucket: the listing learned it, the shards used it
  ExpectTensorServed(mnt, first[0]);
  ExpectTensorServed(mnt, second[0]);
  nlohmann::json stats = nlohmann::json::parse(proxy_->StatsJson());
  std::vector<int> statuses = stats["statuses"];
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 400), 1) << stats.dump();
}

TEST_F(S3RegionRedirect, TheRightRegionNeedsNoRedirect) {
  std::vector<TestTensor> tensors = {{"x", DType::U8, {4096}, ""}};
  server_->Put("models", "m.safetensors", BuildSafetensors(tensors, "{}"));
  std::string options = ProxyOptions(301);
  options.replace(options.find("region=us-east-1"), 16, "region=eu-west-1");
  std::string err;
  std::string mnt = Mount("s3://models/m.safetensors", options, &err);
  ASSERT_FALSE(mnt.empty());
  EXPECT_EQ(err, "");
  ExpectTensorServed(mnt, tensors[0]);
}

}  // namespace
}  // namespace stfs::testing
