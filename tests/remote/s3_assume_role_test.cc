// Profiles with role_arn end to end: STS AssumeRole faked by
// tests/remote/fake_metadata_server.py, which recomputes each AssumeRole's
// SigV4 signature and takes only its source key pair (AKIASOURCEKEY) or keys
// it handed out, and records what each AssumeRole asked (role, signing key,
// session name, ExternalId, DurationSeconds); S3 requests signed with the
// role's keys checked by tests/remote/s3_sigv4_check.py (derive mode: it
// names the key a request was signed with and refuses it after its expiry).
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/remote/remote_source.h"
#include "core/remote/s3_assume_role.h"
#include "core/remote/s3_credential_provider.h"
#include "core/remote/s3_source.h"
#include "tests/remote/s3_server.h"
#include "tests/remote/test_servers.h"

namespace stfs::testing {
namespace {

constexpr const char* kBaseKeys =
    "[base]\naws_access_key_id = AKIASOURCEKEY\naws_secret_access_key = source-secret\n"
    "[other]\naws_access_key_id = AKIAOTHERKEY\naws_secret_access_key = other-secret\n"
    "[badsecret]\naws_access_key_id = AKIASOURCEKEY\naws_secret_access_key = not-the-secret\n";
constexpr const char* kModelsRole = "arn:aws:iam::123456789012:role/read-models";

class AssumeRoleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartCredentialServers(&metadata_, &checker_);
    if (HasFatalFailure()) return;
    ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);  // a test that wants it unsets this
    ::setenv("AWS_ENDPOINT_URL_STS", metadata_->sts_url().c_str(), 1);
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", dir_.Write("credentials", kBaseKeys).c_str(), 1);
  }
  void TearDown() override {
    for (const char* name : {"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_ENDPOINT_URL_STS", "AWS_PROFILE",
                             "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}) {
      ::unsetenv(name);
    }
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
    ::setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
    ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
  }

  // Writes the config file; returns its path.
  std::string Config(const std::string& text) {
    std::string path = dir_.Write("config", text);
    ::setenv("AWS_CONFIG_FILE", path.c_str(), 1);
    return path;
  }

  // What the first signed GET of s3://bucket/k was signed with, the
  // credentials from -o profile=`profile` ("" = the chain).
  std::string KeyOfAFreshOpen(const std::string& profile) const {
    RemoteOptions options;
    options.s3 = S3Endpoint{checker_->url(), "us-east-1", S3Addressing::kPath};
    options.s3_profile = profile;
    HttpSettings settings = HttpSettingsFor(options);
    StatusOr<S3ObjectRequest> request = PrepareS3Object("s3://bucket/k", options, &settings);
    if (!request.ok()) return "open failed: " + request.status().message();
    HttpClient client(std::move(settings));
    return KeyThatSigned(client, request->url);
  }

  // The fake's record of one AssumeRole (fake_metadata_server.py's layout).
  static std::string Assumed(const std::string& role, const std::string& key, const std::string& session,
                             const std::string& external_id = "", const std::string& duration = "") {
    return "{\"role\": \"" + role + "\", \"key\": \"" + key + "\", \"session\": \"" + session +
           "\", \"external_id\": \"" + external_id + "\", \"duration\": \"" + duration + "\"}";
  }

  // Resolving fails; returns the one line, checked for secrets.
  std::string ResolveError(const std::string& profile) const {
    S3CredentialOptions options;
    options.profile = profile;
    StatusOr<std::shared_ptr<S3CredentialProvider>> c = ResolveS3Credentials(options);
    EXPECT_FALSE(c.ok());
    if (c.ok()) return "resolved: " + (*c)->Describe();
    const std::string& line = c.status().message();
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    for (const char* secret : {"source-secret", "other-secret", "not-the-secret", "secret-for-", "token-for-"}) {
      EXPECT_EQ(line.find(secret), std::string::npos) << line;
    }
    return line;
  }

  TempDir dir_;
  std::unique_ptr<FakeMetadataServer> metadata_;
  std::unique_ptr<SigV4Checker> checker_;
};

TEST_F(AssumeRoleTest, TheRolesKeysSignS3RequestsAndTheProfilesSettingsReachSts) {
  // The role wins over the profile's own static keys, as in the AWS CLI.
  ::setenv("AWS_SHARED_CREDENTIALS_FILE",
           dir_.Write("credentials", std::string(kBaseKeys) +
                                         "[models]\naws_access_key_id = AKIAOTHERKEY\naws_secret_access_key = x\n")
               .c_str(),
           1);
  Config(std::string("[profile models]\nrole_arn = ") + kModelsRole +
         "\nsource_profile = base\nrole_session_name = stfs-test\nexternal_id = ext-42\nduration_seconds = 1800\n");
  std::string key = KeyOfAFreshOpen("models");
  EXPECT_EQ(key.rfind("ASIAFAKE0001E", 0), 0u) << key;  // the checker also checked its session token
  std::string stats = metadata_->StatsJson();
  EXPECT_NE(stats.find(Assumed(kModelsRole, "AKIASOURCEKEY", "stfs-test", "ext-42", "1800")), std::string::npos)
      << stats;
}

TEST_F(AssumeRoleTest, AChainOfTwoRolesIsAssumedFromTheSourceOutwards) {
  Config(
      "[profile outer]\nrole_arn = arn:aws:iam::222222222222:role/outer\nsource_profile = inner\n"
      "role_session_name = s-outer\n"
      "[profile inner]\nrole_arn = arn:aws:iam::111111111111:role/inner\nsource_profile = base\n"
      "role_session_name = s-inner\n");
  ::setenv("AWS_PROFILE", "outer", 1);  // the chain's profile, not -o profile=
  std::string key = KeyOfAFreshOpen("");
  EXPECT_EQ(key.rfind("ASIAFAKE0002E", 0), 0u) << key;
  std::string stats = metadata_->StatsJson();
  size_t inner = stats.find(Assumed("arn:aws:iam::111111111111:role/inner", "AKIASOURCEKEY", "s-inner"));
  // The outer role signed with the inner role's keys (the first the fake handed out).
  size_t outer = stats.find("{\"role\": \"arn:aws:iam::222222222222:role/outer\", \"key\": \"ASIAFAKE0001E");
  ASSERT_NE(inner, std::string::npos) << stats;
  ASSERT_NE(outer, std::string::npos) << stats;
  EXPECT_LT(inner, outer) << stats;
}

TEST_F(AssumeRoleTest, ASourceProfileLoopIsOneLineAndAsksStsNothing) {
  std::string config = Config(
      "[profile a]\nrole_arn = arn:aws:iam::1:role/a\nsource_profile = b\n"
      "[profile b]\nrole_arn = arn:aws:iam::1:role/b\nsource_profile = a\n");
  EXPECT_EQ(ResolveError("a"), "the source_profile chain of [profile a] in " + config + " loops: a -> b -> a");
  EXPECT_NE(metadata_->StatsJson().find("\"assumed\": []"), std::string::npos);

  std::string chain;  // p0 -> p1 -> ... -> p6: one role more than the limit
  for (int i = 0; i <= kMaxS3RoleChain; ++i) {
    chain += "[profile p" + std::to_string(i) + "]\nrole_arn = arn:aws:iam::1:role/r" + std::to_string(i) +
             "\nsource_profile = p" + std::to_string(i + 1) + "\n";
  }
  config = Config(chain + "[profile p" + std::to_string(kMaxS3RoleChain + 1) + "]\naws_access_key_id = A\n");
  EXPECT_EQ(ResolveError("p0"), "the source_profile chain of [profile p0] in " + config + " is longer than " +
                                    std::to_string(kMaxS3RoleChain) + " roles");
}

TEST_F(AssumeRoleTest, AProfileThatIsItsOwnSourceSignsWithItsOwnKeys) {
  Config(std::string("[profile self]\nrole_arn = ") + kModelsRole +
         "\nsource_profile = self\nrole_session_name = self\n"
         "aws_access_key_id = AKIASOURCEKEY\naws_secret_access_key = source-secret\n");
  std::string key = KeyOfAFreshOpen("self");
  EXPECT_EQ(key.rfind("ASIAFAKE", 0), 0u) << key;
  EXPECT_NE(metadata_->StatsJson().find(Assumed(kModelsRole, "AKIASOURCEKEY", "self")), std::string::npos);
}

TEST_F(AssumeRoleTest, StsRefusalsAreOneLineNamingTheProfileAndTheRole) {
  std::string config = Config(
      "[profile denied]\nrole_arn = arn:aws:iam::123456789012:role/denied\nsource_profile = base\n"
      "[profile unknown_key]\nrole_arn = arn:aws:iam::123456789012:role/r\nsource_profile = other\n"
      "[profile bad_signature]\nrole_arn = arn:aws:iam::123456789012:role/r\nsource_profile = badsecret\n");
  EXPECT_EQ(ResolveError("denied"), "role arn:aws:iam::123456789012:role/denied of [profile denied] in " + config +
                                        " (HTTP 403, STS error AccessDenied)");
  // The fake takes only the source key pair: STS saw the key and the signature stfs made.
  EXPECT_EQ(ResolveError("unknown_key"), "role arn:aws:iam::123456789012:role/r of [profile unknown_key] in " +
                                             config + " (HTTP 403, STS error InvalidClientTokenId)");
  EXPECT_EQ(ResolveError("bad_signature"), "role arn:aws:iam::123456789012:role/r of [profile bad_signature] in " +
                                               config + " (HTTP 403, STS error SignatureDoesNotMatch)");
}

TEST_F(AssumeRoleTest, CredentialSourcesSignTheAssumeRole) {
  Config(std::string("[profile from_env]\nrole_arn = ") + kModelsRole +
         "\ncredential_source = Environment\nrole_session_name = env\n"
         "[profile from_imds]\nrole_arn = " + kModelsRole +
         "\ncredential_source = Ec2InstanceMetadata\nrole_session_name = imds\n"
         "[profile both]\nrole_arn = " + kModelsRole + "\ncredential_source = Environment\nsource_profile = base\n");
  ::setenv("AWS_ACCESS_KEY_ID", "AKIASOURCEKEY", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "source-secret", 1);
  std::string key = KeyOfAFreshOpen("from_env");
  EXPECT_EQ(key.rfind("ASIAFAKE", 0), 0u) << key;
  EXPECT_NE(metadata_->StatsJson().find(Assumed(kModelsRole, "AKIASOURCEKEY", "env")), std::string::npos);

  ::unsetenv("AWS_EC2_METADATA_DISABLED");
  key = KeyOfAFreshOpen("from_imds");
  EXPECT_EQ(key.rfind("ASIAFAKE", 0), 0u) << key;
  std::string stats = metadata_->StatsJson();
  // Signed with the instance role's keys (handed out before the role's).
  EXPECT_NE(stats.find("\"key\": \"ASIAFAKE0002E"), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"session\": \"imds\""), std::string::npos) << stats;

  EXPECT_NE(ResolveError("both").find("needs exactly one of source_profile and credential_source"),
            std::string::npos);
}

TEST_F(AssumeRoleTest, ASourceProfileWithACredentialProcessSignsTheAssumeRole) {
  std::string script = dir_.Write("creds.sh", "#!/bin/sh\necho '{\"Version\": 1, \"AccessKeyId\": \"AKIASOURCEKEY\", "
                                              "\"SecretAccessKey\": \"source-secret\"}'\n");
  ::chmod(script.c_str(), 0700);
  Config(std::string("[profile models]\nrole_arn = ") + kModelsRole +
         "\nsource_profile = sso\nrole_session_name = proc\n[profile sso]\ncredential_process = " + script + "\n");
  std::string key = KeyOfAFreshOpen("models");
  EXPECT_EQ(key.rfind("ASIAFAKE", 0), 0u) << key;
  std::string stats = metadata_->StatsJson();
  EXPECT_NE(stats.find(Assumed(kModelsRole, "AKIASOURCEKEY", "proc")), std::string::npos) << stats;
}

TEST_F(AssumeRoleTest, TheRolesKeysAreRefreshedBeforeAndAfterTheyExpire) {
  metadata_->Set("expires_in=8");
  Config(std::string("[profile models]\nrole_arn = ") + kModelsRole + "\nsource_profile = base\n");
  RemoteOptions options;
  options.s3 = S3Endpoint{checker_->url(), "us-east-1", S3Addressing::kPath};
  options.s3_profile = "models";
  HttpSettings settings = HttpSettingsFor(options);
  StatusOr<S3ObjectRequest> request = PrepareS3Object("s3://bucket/k", options, &settings);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  HttpClient client(std::move(settings));
  std::string first = KeyThatSigned(client, request->url);
  ASSERT_EQ(first.rfind("ASIAFAKE", 0), 0u) << first;
  std::this_thread::sleep_for(std::chrono::milliseconds(8'500));  // the first keys are dead now
  std::string later = KeyThatSigned(client, request->url);
  EXPECT_EQ(later.rfind("ASIAFAKE", 0), 0u) << later;  // a 200: the checker refuses expired keys
  EXPECT_NE(later, first);
}

}  // namespace
}  // namespace stfs::testing
