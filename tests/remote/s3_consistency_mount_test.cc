// s3:// mounts (the stfs binary against s3rver) when the object changes or
// the keys are wrong. s3rver ignores If-Match and checks no signature, so
// the fault proxy in front of it plays the S3 parts it lacks: enforcing
// If-Match (412), rewriting the ETag of an answer, and checking SigV4 with
// the real secret (403 SignatureDoesNotMatch). In every case a read fails
// with ESTALE (or the mount with one line) and never returns other bytes,
// and the mount stays up.
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "tests/fs/mount_harness.h"
#include "tests/remote/remote_test_util.h"
#include "tests/remote/s3_mount_fixture.h"
#include "tests/remote/s3_server.h"
#include "tests/remote/test_servers.h"

namespace stfs::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr char kKey[] = "m/model.safetensors";
constexpr char kLocation[] = "s3://models/m/model.safetensors";

class S3Consistency : public S3rverMountTest {
 protected:
  void TearDown() override {
    S3rverMountTest::TearDown();
    proxy_.reset();
  }

  // Two tensors of 2 and 6 MiB: with 1 MiB blocks, reading "a" leaves most
  // of "b" unfetched.
  static std::vector<TestTensor> TwoTensors() {
    return {{"a", DType::U8, {2 * kMiB}, ""}, {"b", DType::U8, {6 * kMiB}, ""}};
  }

  // Starts the fault proxy in front of s3rver; returns its endpoint option.
  std::string ProxyEndpointOption() {
    std::string error;
    proxy_ = FaultProxy::Start(server_->endpoint().url, &error);
    EXPECT_NE(proxy_, nullptr) << error;
    return proxy_ == nullptr ? "" : "endpoint=" + proxy_->Url("");
  }

  nlohmann::json Stats(const std::string& mnt) {
    return nlohmann::json::parse(ReadWholeFile(mnt + "/__stats__"), nullptr, /*allow_exceptions=*/false);
  }

  // Reads 4 KiB of b's uncached tail: must fail with ESTALE and no bytes.
  void ExpectStaleRead(const std::string& mnt, uint64_t offset) {
    int err = 0;
    std::string got = PreadFile(mnt + "/b/data", &err, offset, 4096);
    EXPECT_EQ(err, ESTALE) << std::strerror(err);
    EXPECT_EQ(got, "") << "bytes were served from a replaced object";
    EXPECT_TRUE(IsMounted(mnt));
  }

  std::unique_ptr<FaultProxy> proxy_;
};

TEST_F(S3Consistency, ReplacedObjectIsEstaleWithTheMountUpAndARemountReadsTheNewBytes) {
  std::vector<TestTensor> first = TwoTensors();
  server_->Put("models", kKey, BuildSafetensors(first));
  std::string mnt = MountFile(kLocation, {"-o", EndpointOption() + ",block_size=1M,retries=1"});
  ASSERT_FALSE(mnt.empty());
  int err = 0;
  ASSERT_EQ(PreadFile(mnt + "/a/data", &err, 0, 2 * kMiB), first[0].bytes) << std::strerror(err);

  std::vector<TestTensor> second = TwoTensors();  // same layout, other bytes
  server_->Put("models", kKey, BuildSafetensors(second));
  ExpectStaleRead(mnt, 4 * kMiB);
  ExpectStaleRead(mnt, 5 * kMiB);  // still stale: no later answer is taken either
  EXPECT_EQ(ReadWholeFile(mnt + "/b/dtype"), "U8\n");  // metadata still answers
  EXPECT_EQ(PreadFile(mnt + "/a/data", &err, kMiB, 1000), first[0].bytes.substr(kMiB, 1000));  // cached
  EXPECT_TRUE(Stats(mnt)["source"]["stale"].get<bool>());

  std::string again = MountFile(kLocation, {"-o", EndpointOption() + ",block_size=1M"});
  ASSERT_FALSE(again.empty());
  for (const TestTensor& t : second) ExpectTensorServed(again, t);
  EXPECT_FALSE(Stats(again)["source"]["stale"].get<bool>());
}

// An S3 that honours If-Match (the proxy, as AWS does) answers 412 once the
// object is replaced. Before that, every range GET passed the precondition:
// stfs sends the ETag exactly as the server gave it.
TEST_F(S3Consistency, IfMatchRefusedByTheServerIsEstale) {
  std::vector<TestTensor> first = TwoTensors();
  server_->Put("models", kKey, BuildSafetensors(first));
  std::string endpoint = ProxyEndpointOption();
  ASSERT_FALSE(endpoint.empty());
  proxy_->Set("fault=if_match");
  std::string mnt = MountFile(kLocation, {"-o", endpoint + ",block_size=1M,retries=1"});
  ASSERT_FALSE(mnt.empty());
  int err = 0;
  ASSERT_EQ(PreadFile(mnt + "/a/data", &err, 0, 2 * kMiB), first[0].bytes) << std::strerror(err);
  nlohmann::json before = nlohmann::json::parse(proxy_->StatsJson());
  ASSERT_GE(before["requests"].get<int>(), 2);
  for (int status : before["statuses"]) EXPECT_EQ(status / 100, 2) << before.dump();

  std::vector<TestTensor> second = TwoTensors();
  server_->Put("models", kKey, BuildSafetensors(second));
  ExpectStaleRead(mnt, 4 * kMiB);
  nlohmann::json after = nlohmann::json::parse(proxy_->StatsJson());
  EXPECT_NE(after["statuses"].dump().find("412"), std::string::npos) << after.dump();
}

// The object is unchanged but an answer carries another ETag (what a server
// that ignores If-Match sends for a replaced object): ESTALE, never its bytes.
TEST_F(S3Consistency, AnswerWithAnotherEtagIsEstaleNeverItsBytes) {
  std::vector<TestTensor> tensors = TwoTensors();
  server_->Put("models", kKey, BuildSafetensors(tensors));
  std::string endpoint = ProxyEndpointOption();
  ASSERT_FALSE(endpoint.empty());
  std::string mnt = MountFile(kLocation, {"-o", endpoint + ",block_size=1M,retries=1"});
  ASSERT_FALSE(mnt.empty());
  int err = 0;
  ASSERT_EQ(PreadFile(mnt + "/a/data", &err, 0, 2 * kMiB), tensors[0].bytes) << std::strerror(err);
  proxy_->Set("fault=etag&etag=%220123456789abcdef0123456789abcdef%22");
  ExpectStaleRead(mnt, 4 * kMiB);
  EXPECT_GE(proxy_->Requests(), 1);
  proxy_->Set("fault=none");  // the pin is lost for good: no later answer is trusted
  ExpectStaleRead(mnt, 5 * kMiB);
  EXPECT_TRUE(Stats(mnt)["source"]["stale"].get<bool>());
}

// The proxy checks each signature with the real secret, as S3 does: stfs's
// signatures of object GETs and of listings pass through a mount, and a
// wrong secret is refused in one line that names the key, not the secret.
TEST_F(S3Consistency, WrongSecretIsRefusedInOneLineAndTheRightOneMounts) {
  std::vector<TestTensor> tensors = TwoTensors();
  server_->Put("models", kKey, BuildSafetensors(tensors));
  std::string endpoint = ProxyEndpointOption();
  ASSERT_FALSE(endpoint.empty());
  proxy_->Set("fault=sigv4&secret=S3RVER");

  for (const std::string location : {kLocation, "s3://models/m/"}) {
    SCOPED_TRACE(location);
    std::string mnt = MountFile(location, {"-o", endpoint});
    ASSERT_FALSE(mnt.empty());
    for (const TestTensor& t : tensors) ExpectTensorServed(mnt, t);
  }
  nlohmann::json stats = nlohmann::json::parse(proxy_->StatsJson());
  for (int status : stats["statuses"]) EXPECT_NE(status, 403) << stats.dump();

  UseS3Keys("S3RVER", "wrong-secret-value");
  for (const std::string location : {kLocation, "s3://models/m/"}) {
    SCOPED_TRACE(location);
    std::string mnt = NewMountpoint();
    CommandResult r = RunStfs({location, mnt, "-o", endpoint});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_FALSE(IsMounted(mnt));
    EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("stfs: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("HTTP 403"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("check the credentials (access key S3RVER from environment"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("wrong-secret"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace stfs::testing
