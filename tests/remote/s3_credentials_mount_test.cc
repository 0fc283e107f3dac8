// Mounts of s3:// objects signed with keys from the sources a cluster job
// has: credential_process, web identity, the container endpoint, the
// instance role and profiles that assume a role (the last four faked by
// tests/remote/fake_metadata_server.py, handing out s3rver's own key pair).
// Each mount must serve every tensor byte-exact.
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tests/fs/mount_harness.h"
#include "tests/remote/s3_mount_fixture.h"
#include "tests/remote/remote_test_util.h"
#include "tests/remote/s3_server.h"

namespace stfs::testing {
namespace {

class S3CredentialsMount : public S3rverMountTest {
 protected:
  void SetUp() override {
    S3rverMountTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    server_->Put("models", "m.safetensors", BuildSafetensors(tensors_, "{}"));
    std::string error;
    metadata_ = FakeMetadataServer::Start("container-auth-token", &error);
    ASSERT_NE(metadata_, nullptr) << error;
    metadata_->Set("key=S3RVER&secret=S3RVER");
    UseMetadataCredentials(*metadata_);
    ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);  // each test enables the source it tests
  }
  void TearDown() override {
    S3rverMountTest::TearDown();
    for (const char* name : {"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                             "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                             "AWS_ENDPOINT_URL_STS", "AWS_PROFILE"}) {
      ::unsetenv(name);
    }
    ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
  }
  void ExpectServed() {
    std::string mnt = MountFile("s3://models/m.safetensors", {"-o", EndpointOption() + ",block_size=1M,cache_size=16M"});
    ASSERT_FALSE(mnt.empty());
    ExpectRootListing(mnt, tensors_);
    for (const TestTensor& t : tensors_) ExpectTensorServed(mnt, t);
  }

  std::vector<TestTensor> tensors_ = {{"embed", DType::F16, {300, 501}, ""}, {"tail", DType::U8, {(1 << 20) + 3}, ""}};
  std::unique_ptr<FakeMetadataServer> metadata_;
};

TEST_F(S3CredentialsMount, CredentialProcessOfTheDefaultProfile) {
  std::string script = dir_.Write("creds.sh", "#!/bin/sh\necho '{\"Version\": 1, \"AccessKeyId\": \"S3RVER\", "
                                              "\"SecretAccessKey\": \"S3RVER\", \"SessionToken\": \"t\", "
                                              "\"Expiration\": \"2099-01-01T00:00:00Z\"}'\n");
  ::chmod(script.c_str(), 0700);
  ::setenv("AWS_CONFIG_FILE", dir_.Write("config", "[default]\ncredential_process = " + script + "\n").c_str(), 1);
  ExpectServed();
}

TEST_F(S3CredentialsMount, ABrokenCredentialProcessIsOneLineNamingTheProfileNotItsOutput) {
  std::string script = dir_.Write("creds.sh", "#!/bin/sh\necho 'stderr s3cr3t-value' >&2\n"
                                              "echo '{\"Version\": 1, \"AccessKeyId\": \"S3RVER\", s3cr3t-value'\n");
  ::chmod(script.c_str(), 0700);
  std::string config = dir_.Write("config", "[profile ci]\ncredential_process = " + script + " --verbose\n");
  ::setenv("AWS_CONFIG_FILE", config.c_str(), 1);
  CommandResult r = RunStfs({"inspect", "s3://models/m.safetensors", "-o", EndpointOption() + ",profile=ci"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("credential_process of " + config + " [profile ci]: the answer is not a JSON object"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("s3cr3t"), std::string::npos) << r.err;
}

TEST_F(S3CredentialsMount, ContainerCredentials) {
  ::setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", metadata_->container_url().c_str(), 1);
  ::setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "container-auth-token", 1);
  ExpectServed();
}

TEST_F(S3CredentialsMount, WebIdentityCredentials) {
  metadata_->UseWebIdentity("container-auth-token");
  ExpectServed();
}

// A profile with role_arn: STS (the fake checks the AssumeRole is signed
// with the source profile's keys) hands out the role's keys, s3rver's pair.
TEST_F(S3CredentialsMount, AssumedRoleOfAProfile) {
  ::setenv("AWS_ENDPOINT_URL_STS", metadata_->sts_url().c_str(), 1);
  ::setenv("AWS_SHARED_CREDENTIALS_FILE",
           dir_.Write("credentials", "[base]\naws_access_key_id = AKIASOURCEKEY\n"
                                     "aws_secret_access_key = source-secret\n").c_str(), 1);
  ::setenv("AWS_CONFIG_FILE", dir_.Write("config", "[profile models]\nrole_arn = arn:aws:iam::1:role/read-models\n"
                                                   "source_profile = base\n").c_str(), 1);
  ::setenv("AWS_PROFILE", "models", 1);
  ExpectServed();
  EXPECT_NE(metadata_->StatsJson().find("\"role\": \"arn:aws:iam::1:role/read-models\", \"key\": \"AKIASOURCEKEY\""),
            std::string::npos);
}

TEST_F(S3CredentialsMount, ARefusedRoleIsOneLineNamingIt) {
  ::setenv("AWS_ENDPOINT_URL_STS", metadata_->sts_url().c_str(), 1);
  ::setenv("AWS_SHARED_CREDENTIALS_FILE",
           dir_.Write("credentials", "[base]\naws_access_key_id = AKIASOURCEKEY\n"
                                     "aws_secret_access_key = source-secret\n").c_str(), 1);
  std::string config = dir_.Write("config", "[profile models]\nrole_arn = arn:aws:iam::1:role/denied\n"
                                            "source_profile = base\n");
  ::setenv("AWS_CONFIG_FILE", config.c_str(), 1);
  CommandResult r = RunStfs({"inspect", "s3://models/m.safetensors", "-o", EndpointOption() + ",profile=models"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("role arn:aws:iam::1:role/denied of [profile models] in " + config +
                       " (HTTP 403, STS error AccessDenied)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("source-secret"), std::string::npos) << r.err;
}

TEST_F(S3CredentialsMount, InstanceRoleCredentials) {
  ::unsetenv("AWS_EC2_METADATA_DISABLED");
  ExpectServed();
  EXPECT_EQ(metadata_->StatsJson().find("\"fetches\": 0"), std::string::npos);  // the keys came from there
}

// The instance role's keys expire while the mount is up and the service
// fails: reads of data not cached fail (an errno, within a bound, no hang)
// once the keys are dead, and work again once the service answers.
TEST_F(S3CredentialsMount, ExpiredKeysWithAFailingServiceFailReadsThenRecover) {
  ::unsetenv("AWS_EC2_METADATA_DISABLED");
  metadata_->Set("key=S3RVER&secret=S3RVER&expires_in=4");
  std::string mnt = MountFile("s3://models/m.safetensors", {"-o", EndpointOption() + ",block_size=256K,cache_size=4M"});
  ASSERT_FALSE(mnt.empty());
  const std::string& tail = tensors_[1].bytes;
  int err = 0;
  EXPECT_EQ(PreadFile(mnt + "/tail/data", &err, 0, 4096), tail.substr(0, 4096)) << std::strerror(err);
  metadata_->Set("mode=status&status=500");
  std::this_thread::sleep_for(std::chrono::milliseconds(4'500));  // past the keys' expiry

  const auto started = std::chrono::steady_clock::now();
  std::string got = PreadFile(mnt + "/tail/data", &err, 700'000, 4096);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));  // generous: no hang
  EXPECT_EQ(got, "");
  EXPECT_TRUE(err == EIO || err == EACCES) << std::strerror(err);
  EXPECT_TRUE(IsMounted(mnt));

  metadata_->Set("key=S3RVER&secret=S3RVER&expires_in=3600");
  std::this_thread::sleep_for(std::chrono::milliseconds(1'200));  // the retry backoff after a failure
  EXPECT_EQ(PreadFile(mnt + "/tail/data", &err, 700'000, 4096), tail.substr(700'000, 4096)) << std::strerror(err);
}

TEST_F(S3CredentialsMount, NoCredentialsAnywhereIsOneLineListingTheSources) {
  ::unsetenv("AWS_EC2_METADATA_DISABLED");
  metadata_->Set("mode=hang&seconds=60");
  CommandResult r = RunStfs({"inspect", "s3://models/m.safetensors", "-o", EndpointOption()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("no S3 credentials: tried environment"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("instance metadata (no answer in 1 s)"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace stfs::testing
