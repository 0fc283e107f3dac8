// credential_process (split, run, parse, deadline), the credential JSON, and
// the chain's order and its one-line "nothing found" error. No server: the
// process is a script in a temp dir.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <map>

#include "core/remote/s3_credential_json.h"
#include "core/remote/s3_credential_process.h"
#include "core/remote/s3_credential_provider.h"
#include "tests/test_files.h"

namespace stfs {
namespace {

using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string Iso(std::chrono::system_clock::time_point t) { return FormatIso8601(t); }

// An executable shell script `name` in `dir` with `body`.
std::string Script(const testing::TempDir& dir, const std::string& name, const std::string& body) {
  std::string path = dir.Write(name, "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0700);
  return path;
}

void ExpectOneLineWithout(const Status& status, const std::string& secret) {
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find(secret), std::string::npos) << status.message();
}

TEST(SplitCommandLine, SplitsAsShlexDoes) {
  auto split = [](std::string_view text) {
    StatusOr<std::vector<std::string>> words = SplitCommandLine(text);
    EXPECT_TRUE(words.ok()) << words.status().ToString();
    return words.ok() ? *words : std::vector<std::string>{};
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("aws-vault  export --format=json dev"), (V{"aws-vault", "export", "--format=json", "dev"}));
  EXPECT_EQ(split("'/opt/my tools/get creds' \"a b\" c\\ d"), (V{"/opt/my tools/get creds", "a b", "c d"}));
  EXPECT_EQ(split(R"(x "say \"hi\" \n" 'it\'s)"), (V{"x", "say \"hi\" \\n", "it\\s"}));
  EXPECT_EQ(split("a''b \"\""), (V{"ab", ""}));
  EXPECT_FALSE(SplitCommandLine("x 'open").ok());
  EXPECT_FALSE(SplitCommandLine("x \"open").ok());
  EXPECT_FALSE(SplitCommandLine("   ").ok());
}

TEST(S3CredentialJson, ParsesBothFormatsAndNamesFieldsNotValues) {
  StatusOr<S3Credentials> process = ParseS3CredentialJson(
      R"({"Version": 1, "AccessKeyId": "AKID", "SecretAccessKey": "s3cr3t", "SessionToken": "tok",
          "Expiration": "2030-01-02T03:04:05Z"})",
      S3CredentialJsonFormat::kProcess, "test");
  ASSERT_TRUE(process.ok()) << process.status().ToString();
  EXPECT_EQ(process->access_key_id(), "AKID");
  EXPECT_EQ(process->session_token(), "tok");
  ASSERT_TRUE(process->expiration().has_value());
  EXPECT_EQ(Iso(*process->expiration()), "2030-01-02T03:04:05Z");

  StatusOr<S3Credentials> metadata = ParseS3CredentialJson(
      R"({"Code": "Success", "AccessKeyId": "ASIA", "SecretAccessKey": "s3cr3t", "Token": "tok",
          "Expiration": "2030-01-02T04:04:05.123+01:00"})",
      S3CredentialJsonFormat::kMetadata, "test");
  ASSERT_TRUE(metadata.ok()) << metadata.status().ToString();
  EXPECT_EQ(Iso(*metadata->expiration()), "2030-01-02T03:04:05Z");
  EXPECT_EQ(metadata->session_token(), "tok");

  // No Expiration: fine for a process (keys that never expire), not for metadata.
  StatusOr<S3Credentials> forever = ParseS3CredentialJson(
      R"({"Version": 1, "AccessKeyId": "AKID", "SecretAccessKey": "s3cr3t"})", S3CredentialJsonFormat::kProcess, "t");
  ASSERT_TRUE(forever.ok());
  EXPECT_FALSE(forever->expiration().has_value());

  for (const char* bad : {R"({"Version": 2, "AccessKeyId": "AKID", "SecretAccessKey": "s3cr3t"})",
                          R"({"Version": 1, "AccessKeyId": "AKID"})",
                          R"({"Version": 1, "AccessKeyId": "AKID", "SecretAccessKey": "s3cr3t", "Expiration": "soon"})",
                          "s3cr3t not json", "[\"s3cr3t\"]"}) {
    StatusOr<S3Credentials> c = ParseS3CredentialJson(bad, S3CredentialJsonFormat::kProcess, "test");
    ASSERT_FALSE(c.ok()) << bad;
    ExpectOneLineWithout(c.status(), "s3cr3t");
  }
  EXPECT_FALSE(ParseS3CredentialJson(R"({"AccessKeyId": "A", "SecretAccessKey": "s3cr3t"})",
                                     S3CredentialJsonFormat::kMetadata, "t").ok());
}

TEST(CredentialProcess, RunsTheCommandAndReadsItsKeys) {
  testing::TempDir dir;
  std::string script = Script(dir, "creds", R"(printf '{"Version":1,"AccessKeyId":"%s","SecretAccessKey":"s3cr3t",)"
                                            R"("SessionToken":"tok","Expiration":"2031-05-06T07:08:09Z"}' "$1")");
  StatusOr<S3Credentials> c = RunCredentialProcess("'" + script + "' PROCKEY", "origin", seconds(20));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id(), "PROCKEY");
  EXPECT_EQ(c->secret_access_key(), "s3cr3t");
  EXPECT_EQ(Iso(*c->expiration()), "2031-05-06T07:08:09Z");
  EXPECT_EQ(c->Describe(), "access key PROCKEY from origin (secret and session token hidden)");
}

TEST(CredentialProcess, FailuresAreOneLineWithoutItsOutput) {
  testing::TempDir dir;
  std::string fails = Script(dir, "fails", "echo 'AKIA s3cr3t-on-stdout'\necho 's3cr3t-on-stderr' >&2\nexit 3\n");
  StatusOr<S3Credentials> exit3 = RunCredentialProcess(fails, "credential_process of C [profile p]", seconds(20));
  ASSERT_FALSE(exit3.ok());
  EXPECT_EQ(exit3.status().message(),
            "credential_process of C [profile p]: exited with status 3 (its output is not shown; run it yourself "
            "to see why)");

  std::string garbage = Script(dir, "garbage", "echo '{\"Version\": 1, \"AccessKeyId\": s3cr3t'\n");
  StatusOr<S3Credentials> bad_json = RunCredentialProcess(garbage, "credential_process of C [profile p]", seconds(20));
  ASSERT_FALSE(bad_json.ok());
  EXPECT_EQ(bad_json.status().message(), "credential_process of C [profile p]: the answer is not a JSON object");
  ExpectOneLineWithout(bad_json.status(), "s3cr3t");

  StatusOr<S3Credentials> missing = RunCredentialProcess(dir.path() + "/absent --flag", "origin", seconds(20));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot run"), std::string::npos) << missing.status().message();
}

TEST(CredentialProcess, AHangingCommandIsKilledAtItsDeadline) {
  testing::TempDir dir;
  // The child of the script holds stdout open too: the whole group must go.
  std::string hangs = Script(dir, "hangs", "sleep 600 &\nsleep 600\n");
  const auto started = Clock::now();
  StatusOr<S3Credentials> c = RunCredentialProcess(hangs, "credential_process of C [profile p]",
                                                   std::chrono::milliseconds(300));
  EXPECT_LT(Clock::now() - started, seconds(20));  // generous: the deadline is 0.3 s
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "credential_process of C [profile p]: no answer within 300 ms (killed)");
}

TEST(S3CredentialChain, CredentialProcessOfTheProfileComesAfterTheFiles) {
  testing::TempDir dir;
  std::string script = Script(dir, "creds", R"(echo '{"Version":1,"AccessKeyId":"PROCKEY","SecretAccessKey":"x"}')");
  std::string config = dir.Write("config", "[profile dev]\ncredential_process = " + script + "\n");
  std::string creds = dir.Write("credentials", "[other]\naws_access_key_id = FILEKEY\naws_secret_access_key = y\n");
  std::map<std::string, std::string> env = {{"AWS_CONFIG_FILE", config},
                                            {"AWS_SHARED_CREDENTIALS_FILE", creds},
                                            {"AWS_EC2_METADATA_DISABLED", "true"}};
  S3CredentialOptions options;
  options.profile = "dev";
  StatusOr<std::shared_ptr<S3CredentialProvider>> by_option = ResolveS3Credentials(options, FakeEnv(env));
  ASSERT_TRUE(by_option.ok()) << by_option.status().ToString();
  EXPECT_EQ((*by_option)->Describe(),
            "access key PROCKEY from credential_process of " + config + " [profile dev] (secret hidden)");

  env["AWS_PROFILE"] = "dev";
  StatusOr<S3Credentials> by_env = LoadS3Credentials({}, FakeEnv(env));
  ASSERT_TRUE(by_env.ok()) << by_env.status().ToString();
  EXPECT_EQ(by_env->access_key_id(), "PROCKEY");

  // The credentials file's keys for the same profile come first.
  env["AWS_PROFILE"] = "other";
  dir.Write("config", "[profile other]\ncredential_process = " + script + "\n");
  StatusOr<S3Credentials> file_first = LoadS3Credentials({}, FakeEnv(env));
  ASSERT_TRUE(file_first.ok());
  EXPECT_EQ(file_first->access_key_id(), "FILEKEY");
}

TEST(S3CredentialChain, AFailingCredentialProcessIsAnErrorNamingTheProfile) {
  testing::TempDir dir;
  std::string script = Script(dir, "fails", "echo s3cr3t >&2\nexit 1\n");
  std::string config = dir.Write("config", "[default]\ncredential_process = " + script + "\n");
  StatusOr<S3Credentials> c = LoadS3Credentials(
      {}, FakeEnv({{"AWS_CONFIG_FILE", config}, {"AWS_SHARED_CREDENTIALS_FILE", dir.path() + "/absent"},
                   {"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:1/never-asked"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().rfind("credential_process of " + config + " [default]: exited with status 1", 0),
            0u)
      << c.status().message();
  ExpectOneLineWithout(c.status(), "s3cr3t");
}

TEST(S3CredentialChain, NothingFoundIsOneLineListingWhatWasTried) {
  testing::TempDir dir;
  StatusOr<S3Credentials> c = LoadS3Credentials(
      {}, FakeEnv({{"AWS_CONFIG_FILE", dir.path() + "/config"}, {"AWS_SHARED_CREDENTIALS_FILE", dir.path() + "/creds"},
                   {"AWS_EC2_METADATA_DISABLED", "TRUE"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c.status().message(),
            "no S3 credentials: tried environment (AWS_ACCESS_KEY_ID not set), " + dir.path() +
                "/creds [default] (cannot be read), credential_process (none in " + dir.path() +
                "/config [default]), container (AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI not set), "
                "instance metadata (AWS_EC2_METADATA_DISABLED=true); use -o no_sign for public buckets");
}

TEST(S3CredentialChain, WebIdentityWithoutARoleIsAnError) {
  StatusOr<S3Credentials> c = LoadS3Credentials(
      {}, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"}, {"AWS_CONFIG_FILE", "/nonexistent"},
                   {"AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/secrets/token"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not");
}

TEST(S3CredentialChain, ContainerUriOverPlainHttpElsewhereIsRefused) {
  StatusOr<S3Credentials> c = LoadS3Credentials(
      {}, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"}, {"AWS_CONFIG_FILE", "/nonexistent"},
                   {"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://example.com/creds"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("AWS_CONTAINER_CREDENTIALS_FULL_URI must be https"), std::string::npos);
}

}  // namespace
}  // namespace stfs
