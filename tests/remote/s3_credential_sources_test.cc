// Temporary keys end to end: the EC2 instance metadata service (IMDSv2), the
// container endpoint and STS for web identity, faked by
// tests/remote/fake_metadata_server.py, and
// requests signed with them checked by tests/remote/s3_sigv4_check.py, which
// recomputes each signature, names the key it was made with, and refuses a
// key after its real expiry as S3 does (400 ExpiredToken). So a 200 after the
// first keys expired proves the refreshed keys signed the request.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "core/remote/remote_source.h"
#include "core/remote/s3_credential_provider.h"
#include "core/remote/s3_source.h"
#include "tests/remote/s3_server.h"
#include "tests/remote/test_servers.h"

namespace stfs::testing {
namespace {

using Clock = std::chrono::steady_clock;

class MetadataCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartCredentialServers(&metadata_, &checker_);
    if (HasFatalFailure()) return;
  }
  void TearDown() override {
    for (const char* name : {"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                             "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                             "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ENDPOINT_URL_STS"}) {
      ::unsetenv(name);
    }
    ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);  // never the real service from a later test
  }

  RemoteOptions Options() const {
    RemoteOptions options;
    options.s3 = S3Endpoint{checker_->url(), "us-east-1", S3Addressing::kPath};
    return options;
  }

  struct Opened {
    std::unique_ptr<HttpClient> client;
    std::string url;
  };
  Opened Open() const {
    HttpSettings settings = HttpSettingsFor(Options());
    StatusOr<S3ObjectRequest> request = PrepareS3Object("s3://bucket/k", Options(), &settings);
    EXPECT_TRUE(request.ok()) << request.status().ToString();
    if (!request.ok()) return {};
    return {std::make_unique<HttpClient>(std::move(settings)), request->url};
  }

  // Opens s3://bucket/k and returns what its first GET was signed with.
  std::string KeyOfAFreshOpen() const {
    Opened s3 = Open();
    return s3.client ? KeyThatSigned(*s3.client, s3.url) : "open failed";
  }

  std::unique_ptr<FakeMetadataServer> metadata_;
  std::unique_ptr<SigV4Checker> checker_;
};

TEST_F(MetadataCredentialsTest, InstanceRoleKeysSignRequestsWithItsSessionToken) {
  std::string key = KeyOfAFreshOpen();
  EXPECT_EQ(key.rfind("ASIAFAKE0001E", 0), 0u) << key;  // the checker also checked its token
  std::string stats = metadata_->StatsJson();
  EXPECT_NE(stats.find("\"tokens\": 1"), std::string::npos) << stats;  // IMDSv2: a token first
  EXPECT_NE(stats.find("\"unauthorized\": 0"), std::string::npos) << stats;
  // ... which the fake insists on, as IMDSv2-only instances do.
  EXPECT_EQ(HttpGet(metadata_->port(), "/latest/meta-data/iam/security-credentials/"), "unauthorized");
}

TEST_F(MetadataCredentialsTest, ExpiringKeysAreRefreshedAndTheNewKeySignsAfterExpiry) {
  metadata_->Set("expires_in=3");
  Opened s3 = Open();
  ASSERT_NE(s3.client, nullptr);
  std::string first = KeyThatSigned(*s3.client, s3.url);
  ASSERT_EQ(first.rfind("ASIAFAKE", 0), 0u) << first;
  std::this_thread::sleep_for(std::chrono::milliseconds(3'500));  // the first keys are dead now
  std::string later = KeyThatSigned(*s3.client, s3.url);
  EXPECT_EQ(later.rfind("ASIAFAKE", 0), 0u) << later;  // a 200: the checker refuses expired keys
  EXPECT_NE(later, first);
}

TEST_F(MetadataCredentialsTest, ExpiredTokenAnswerFetchesNewKeysOnceAndSendsAgain) {
  // The keys claim an hour but die in 4 s (revoked, or a skewed clock).
  metadata_->Set("expires_in=3600&real_expires_in=4");
  Opened s3 = Open();
  ASSERT_NE(s3.client, nullptr);
  std::string first = KeyThatSigned(*s3.client, s3.url);
  ASSERT_EQ(first.rfind("ASIAFAKE0001", 0), 0u) << first;
  std::this_thread::sleep_for(std::chrono::milliseconds(4'500));
  std::string later = KeyThatSigned(*s3.client, s3.url);
  EXPECT_EQ(later.rfind("ASIAFAKE0002", 0), 0u) << later;
}

TEST_F(MetadataCredentialsTest, AFailedRefreshFailsReadsInOneLineAfterExpiryThenRecovers) {
  metadata_->Set("expires_in=3");
  Opened s3 = Open();
  ASSERT_NE(s3.client, nullptr);
  ASSERT_EQ(KeyThatSigned(*s3.client, s3.url).rfind("ASIAFAKE", 0), 0u);
  metadata_->Set("mode=status&status=500");
  std::this_thread::sleep_for(std::chrono::milliseconds(3'500));
  const auto started = Clock::now();
  SignedGetAnswer failed = SignedGet(*s3.client, s3.url);
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(15));  // generous: no hang
  ASSERT_TRUE(failed.error.has_value()) << failed.status << failed.body;
  const std::string& line = failed.error->message();
  EXPECT_EQ(failed.error->sys_errno(), EACCES);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find("no valid S3 credentials"), std::string::npos) << line;
  EXPECT_NE(line.find("(HTTP 500)"), std::string::npos) << line;
  EXPECT_EQ(line.find("secret-for-"), std::string::npos) << line;
  EXPECT_EQ(line.find("token-for-"), std::string::npos) << line;

  metadata_->Set("expires_in=3600");
  std::this_thread::sleep_for(std::chrono::milliseconds(1'200));  // the retry backoff after a failure
  std::string later = KeyThatSigned(*s3.client, s3.url);
  EXPECT_EQ(later.rfind("ASIAFAKE", 0), 0u) << later;
}

TEST_F(MetadataCredentialsTest, AHangingServiceFailsWithinItsDeadlineInOneLine) {
  metadata_->Set("mode=hang&seconds=60");
  const auto started = Clock::now();
  StatusOr<std::shared_ptr<S3CredentialProvider>> c = ResolveS3Credentials({});
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(15));  // generous: the deadline is 1 s per exchange
  ASSERT_FALSE(c.ok());
  const std::string& line = c.status().message();
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_EQ(line.rfind("no S3 credentials: tried environment (AWS_ACCESS_KEY_ID not set), ", 0), 0u) << line;
  EXPECT_NE(line.find(", instance metadata (no answer in 1 s); use -o no_sign"), std::string::npos) << line;
}

TEST_F(MetadataCredentialsTest, ABrokenAnswerIsOneLineWithoutItsText) {
  metadata_->Set("mode=garbage");
  StatusOr<std::shared_ptr<S3CredentialProvider>> c = ResolveS3Credentials({});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("instance metadata (role test-role): the answer is not a JSON object"),
            std::string::npos)
      << c.status().message();
  EXPECT_EQ(c.status().message().find("AKIASECRET"), std::string::npos);
}

TEST_F(MetadataCredentialsTest, ContainerEndpointGetsItsAuthorizationToken) {
  ::setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", metadata_->container_url().c_str(), 1);
  ::setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "container-auth-token", 1);
  std::string key = KeyOfAFreshOpen();
  EXPECT_EQ(key.rfind("ASIAFAKE", 0), 0u) << key;
  EXPECT_NE(metadata_->StatsJson().find("\"tokens\": 0"), std::string::npos);  // IMDS never asked
  // From a token file (EKS Pod Identity), which wins over the variable.
  TempDir dir;
  ::setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", dir.Write("token", "container-auth-token\n").c_str(), 1);
  ::setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "wrong-token", 1);
  {
    // Dropped at the end of the block: the next resolve asks again.
    StatusOr<std::shared_ptr<S3CredentialProvider>> from_file = ResolveS3Credentials({});
    EXPECT_TRUE(from_file.ok()) << from_file.status().ToString();
  }

  ::unsetenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  StatusOr<std::shared_ptr<S3CredentialProvider>> refused = ResolveS3Credentials({});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "container credentials (HTTP 401)");
}

TEST_F(MetadataCredentialsTest, WebIdentityTradesTheTokenFileForTheRolesKeysAtSts) {
  metadata_->UseWebIdentity("container-auth-token");
  std::string key = KeyOfAFreshOpen();
  EXPECT_EQ(key.rfind("ASIAFAKE", 0), 0u) << key;
  EXPECT_NE(metadata_->StatsJson().find("\"tokens\": 0"), std::string::npos);  // IMDS never asked
  metadata_->UseWebIdentity("a-stale-token");
  StatusOr<std::shared_ptr<S3CredentialProvider>> refused = ResolveS3Credentials({});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            std::string("web identity (role ") + FakeMetadataServer::kRoleArn +
                ") (HTTP 403, STS error InvalidIdentityToken)");
  EXPECT_EQ(refused.status().message().find("a-stale-token"), std::string::npos);
}

}  // namespace
}  // namespace stfs::testing
