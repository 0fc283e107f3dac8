// Credential lookup order, the shared credentials file, and redaction.
#include "core/remote/s3_credentials.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <map>

#include "tests/test_files.h"

namespace stfs {
namespace {

// An environment made of `vars` only.
EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

constexpr const char* kFile =
    "# shared credentials\n"
    "[default]\n"
    "aws_access_key_id=DEFAULTKEY\n"
    "aws_secret_access_key = default/secret+1\n"
    "\n"
    "  ; another comment\n"
    "[ build ]\n"
    "\taws_access_key_id =  BUILDKEY  \r\n"
    "aws_secret_access_key=build=secret==\n"
    "aws_session_token = TOKEN/abc\n"
    "region = eu-west-1\n"
    "[half]\n"
    "aws_access_key_id = HALFKEY\n";

TEST(S3Credentials, EnvironmentComesFirst) {
  StatusOr<S3Credentials> c = LoadS3Credentials(
      {}, FakeEnv({{"AWS_ACCESS_KEY_ID", "ENVKEY"}, {"AWS_SECRET_ACCESS_KEY", "envsecret"},
                   {"AWS_SESSION_TOKEN", "envtoken"}, {"AWS_PROFILE", "build"}, {"HOME", "/nonexistent"}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->anonymous());
  EXPECT_EQ(c->access_key_id(), "ENVKEY");
  EXPECT_EQ(c->secret_access_key(), "envsecret");
  EXPECT_EQ(c->session_token(), "envtoken");
  EXPECT_EQ(c->Describe(), "access key ENVKEY from environment (secret and session token hidden)");
}

TEST(S3Credentials, HalfAnEnvironmentPairIsAnError) {
  StatusOr<S3Credentials> c = LoadS3Credentials({}, FakeEnv({{"AWS_ACCESS_KEY_ID", "ENVKEY"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
}

TEST(S3Credentials, ReadsDefaultProfileOfHomeFile) {
  testing::TempDir home;
  ::mkdir((home.path() + "/.aws").c_str(), 0700);
  home.Write(".aws/credentials", kFile);
  StatusOr<S3Credentials> c = LoadS3Credentials({}, FakeEnv({{"HOME", home.path()}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id(), "DEFAULTKEY");
  EXPECT_EQ(c->secret_access_key(), "default/secret+1");
  EXPECT_EQ(c->session_token(), "");
  EXPECT_EQ(c->Describe(), "access key DEFAULTKEY from " + home.path() + "/.aws/credentials [default] (secret hidden)");
}

TEST(S3Credentials, SelectsProfileFromEnvironmentOrOption) {
  testing::TempDir dir;
  std::string file = dir.Write("creds", kFile);
  StatusOr<S3Credentials> by_env =
      LoadS3Credentials({}, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", file}, {"AWS_PROFILE", "build"}}));
  ASSERT_TRUE(by_env.ok()) << by_env.status().ToString();
  EXPECT_EQ(by_env->access_key_id(), "BUILDKEY");
  EXPECT_EQ(by_env->secret_access_key(), "build=secret==");
  EXPECT_EQ(by_env->session_token(), "TOKEN/abc");

  // -o profile= wins over the environment's keys.
  S3CredentialOptions options;
  options.profile = "build";
  StatusOr<S3Credentials> by_option = LoadS3Credentials(
      options, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", file}, {"AWS_ACCESS_KEY_ID", "ENVKEY"},
                        {"AWS_SECRET_ACCESS_KEY", "envsecret"}}));
  ASSERT_TRUE(by_option.ok());
  EXPECT_EQ(by_option->access_key_id(), "BUILDKEY");
}

TEST(S3Credentials, NamesMissingProfileFileAndHalfProfilesWithoutValues) {
  testing::TempDir dir;
  std::string file = dir.Write("creds", kFile);
  S3CredentialOptions options;
  options.profile = "nope";
  StatusOr<S3Credentials> missing = LoadS3Credentials(options, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", file}}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("[nope]"), std::string::npos);

  options.profile = "half";
  StatusOr<S3Credentials> half = LoadS3Credentials(options, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", file}}));
  ASSERT_FALSE(half.ok());
  EXPECT_EQ(half.status().message().find("HALFKEY"), std::string::npos);

  StatusOr<S3Credentials> no_file = LoadS3Credentials(
      {}, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", dir.path() + "/absent"}, {"AWS_EC2_METADATA_DISABLED", "true"}}));
  ASSERT_FALSE(no_file.ok());
  EXPECT_NE(no_file.status().message().find("no_sign"), std::string::npos);
}

TEST(S3Credentials, MalformedLineIsRefusedWithoutEchoingIt) {
  testing::TempDir dir;
  std::string file = dir.Write("creds", "[default]\naws_access_key_id = K\nTOPSECRETVALUE\n");
  StatusOr<S3Credentials> c = ReadS3CredentialsFile(file, "default");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(file + ":3"), std::string::npos) << c.status().message();
  EXPECT_EQ(c.status().message().find("TOPSECRET"), std::string::npos);
}

TEST(S3Credentials, NoSignIsAnonymousWhateverTheEnvironmentHolds) {
  S3CredentialOptions options;
  options.no_sign = true;
  StatusOr<S3Credentials> c = LoadS3Credentials(
      options, FakeEnv({{"AWS_ACCESS_KEY_ID", "ENVKEY"}, {"AWS_SECRET_ACCESS_KEY", "envsecret"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->anonymous());
  EXPECT_EQ(c->Describe(), "anonymous (no_sign)");
}

constexpr const char* kConfig =
    "[default]\n"
    "region = us-west-2\n"
    "[profile build]\n"
    "output = json\n"
    "s3 =\n"
    "  region = nested-not-a-region\n"
    "region=eu-west-1\n"
    "[plain]\n"
    "region = ap-south-1\n";

TEST(S3Config, RegionOfTheProfileFromOptionThenEnvironmentThenDefault) {
  testing::TempDir home;
  ::mkdir((home.path() + "/.aws").c_str(), 0700);
  home.Write(".aws/config", kConfig);
  auto region = [&](const std::string& option, std::map<std::string, std::string> env) {
    env["HOME"] = home.path();
    StatusOr<std::string> r = LoadS3ConfigRegion(option, FakeEnv(env));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : "error";
  };
  EXPECT_EQ(region("", {}), "us-west-2");
  EXPECT_EQ(region("", {{"AWS_PROFILE", "build"}}), "eu-west-1");  // not the nested s3 region
  EXPECT_EQ(region("build", {{"AWS_PROFILE", "other"}}), "eu-west-1");
  // Profiles other than default are "[profile NAME]" in the config file.
  EXPECT_EQ(region("plain", {}), "");
  EXPECT_EQ(region("absent", {}), "");
}

TEST(S3Config, NoFileIsNoRegionAndAMalformedLineIsAnError) {
  testing::TempDir dir;
  StatusOr<std::string> none = LoadS3ConfigRegion("", FakeEnv({{"AWS_CONFIG_FILE", dir.path() + "/nope"}}));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, "");
  std::string file = dir.Write("config", "[default]\nregion = eu-north-1\nsecret-looking-garbage\n");
  StatusOr<std::string> bad = LoadS3ConfigRegion("", FakeEnv({{"AWS_CONFIG_FILE", file}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), file + ":3: expected 'name = value'");
}

TEST(S3Credentials, DescribeNeverHoldsTheSecret) {
  S3Credentials c = S3Credentials::Keys("KEYID", "s3cr3t-value", "t0ken-value", "test");
  EXPECT_EQ(c.Describe().find("s3cr3t"), std::string::npos);
  EXPECT_EQ(c.Describe().find("t0ken"), std::string::npos);
  EXPECT_NE(c.Describe().find("KEYID"), std::string::npos);
}

}  // namespace
}  // namespace stfs
