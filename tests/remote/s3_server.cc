// S3rverServer and S3Request (see s3_server.h).
#include "tests/remote/s3_server.h"

#include <sys/wait.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/remote/http_client.h"
#include "core/remote/s3_signing.h"
#include "tests/remote/test_servers.h"

namespace stfs::testing {
namespace {

// Runs scripts/s3-test-server.sh install; returns the s3rver path, or "" with
// `why` set.
std::string InstallS3rver(std::string* why) {
  std::string command = std::string(STFS_SOURCE_DIR) + "/scripts/s3-test-server.sh install 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *why = "cannot run scripts/s3-test-server.sh";
    return "";
  }
  std::string output;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) output += buf;
  int rc = ::pclose(pipe);
  while (!output.empty() && output.back() == '\n') output.pop_back();
  if (rc != 0) {
    *why = "s3rver unavailable: " + output;
    return "";
  }
  size_t last_line = output.rfind('\n');
  return last_line == std::string::npos ? output : output.substr(last_line + 1);
}

}  // namespace

std::unique_ptr<S3rverServer> S3rverServer::Start(std::string* skip_reason, std::string* error) {
  std::string why;
  std::string binary = InstallS3rver(&why);
  if (binary.empty()) {
    const char* require = std::getenv("STFS_REQUIRE_S3RVER");
    (require != nullptr && std::string(require) == "1" ? *error : *skip_reason) = why;
    return nullptr;
  }
  std::unique_ptr<S3rverServer> server(new S3rverServer());
  // s3rver makes continuation tokens with DES, which OpenSSL 3 keeps in its
  // legacy provider; without it every truncated listing is a 500.
  ::setenv("NODE_OPTIONS", "--openssl-legacy-provider", 1);
  server->port_ = FreePort();
  server->pid_ = Spawn({binary, "-d", server->dir_.path(), "-p", std::to_string(server->port_), "-a",
                        "127.0.0.1", "--silent"});
  if (server->pid_ < 0) {
    *error = "cannot start " + binary;
    return nullptr;
  }
  for (int i = 0; i < 300; ++i) {  // node takes a moment to start
    if (CanConnect(server->port_)) return server;
    if (Exited(server->pid_)) {
      server->pid_ = -1;
      *error = "s3rver exited at start";
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *error = "s3rver did not listen within 15 s";
  return nullptr;
}

S3rverServer::~S3rverServer() { Stop(pid_); }

S3Endpoint S3rverServer::endpoint() const {
  return S3Endpoint{"http://127.0.0.1:" + std::to_string(port_), "", S3Addressing::kAuto};
}

S3Credentials S3rverServer::Credentials() { return S3Credentials::Keys("S3RVER", "S3RVER", "", "test"); }

void S3rverServer::Curl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"curl", "-sSf", "--max-time", "60", "--aws-sigv4", "aws:amz:us-east-1:s3",
                                   "-u", "S3RVER:S3RVER", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = Spawn(argv);
  ASSERT_GT(pid, 0) << "cannot run curl";
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "curl failed for " << args.back();
}

void S3rverServer::CreateBucket(const std::string& bucket) const {
  StatusOr<std::string> url = S3ObjectUrl(endpoint(), bucket, "");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  Curl({"-X", "PUT", *url});
}

void S3rverServer::Put(const std::string& bucket, const std::string& key, const std::string& bytes) const {
  StatusOr<std::string> url = S3ObjectUrl(endpoint(), bucket, key);
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  std::string file = dir_.Write("upload.tmp", bytes);
  Curl({"-T", file, *url});
}

std::unique_ptr<SigV4Checker> SigV4Checker::Start(const std::string& key_id, const std::string& secret,
                                                   std::string* error) {
  std::unique_ptr<SigV4Checker> checker(new SigV4Checker());
  checker->port_ = FreePort();
  checker->pid_ = Spawn({"python3", std::string(STFS_SOURCE_DIR) + "/tests/remote/s3_sigv4_check.py",
                         std::to_string(checker->port_), key_id, secret});
  for (int i = 0; checker->pid_ > 0 && i < 200; ++i) {
    if (CanConnect(checker->port_)) return checker;
    if (Exited(checker->pid_)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  checker->pid_ = -1;
  *error = "tests/remote/s3_sigv4_check.py did not start (python3 from scripts/setup.sh)";
  return nullptr;
}

SigV4Checker::~SigV4Checker() { Stop(pid_); }

std::unique_ptr<FakeMetadataServer> FakeMetadataServer::Start(const std::string& container_token,
                                                               std::string* error) {
  std::unique_ptr<FakeMetadataServer> server(new FakeMetadataServer());
  std::string port_file = server->dir_.path() + "/port";
  std::string script = std::string(STFS_SOURCE_DIR) + "/tests/remote/fake_metadata_server.py";
  server->pid_ = Spawn({"python3", script, container_token, port_file});
  for (int i = 0; server->pid_ > 0 && i < 1000; ++i) {
    std::string text = ReadText(port_file);
    if (!text.empty()) {
      server->port_ = std::atoi(text.c_str());
      if (CanConnect(server->port_)) return server;
    }
    if (Exited(server->pid_)) {
      server->pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  *error = script + " did not start";
  return nullptr;
}

FakeMetadataServer::~FakeMetadataServer() { Stop(pid_); }

void FakeMetadataServer::Set(const std::string& query) const { HttpGet(port_, "/__control__/set?" + query); }

std::string FakeMetadataServer::StatsJson() const { return HttpGet(port_, "/__control__/stats"); }

void FakeMetadataServer::UseWebIdentity(const std::string& token) const {
  ::setenv("AWS_WEB_IDENTITY_TOKEN_FILE", dir_.Write("web-identity-token", token + "\n").c_str(), 1);
  ::setenv("AWS_ROLE_ARN", kRoleArn, 1);
  ::setenv("AWS_ENDPOINT_URL_STS", sts_url().c_str(), 1);
}

void UseMetadataCredentials(const FakeMetadataServer& server) {
  for (const char* name : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                           "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                           "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                           "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_EC2_METADATA_DISABLED",
                           "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ENDPOINT_URL_STS"}) {
    ::unsetenv(name);
  }
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
  ::setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
  ::setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", server.url().c_str(), 1);
}

void UseS3Keys(const char* key_id, const char* secret) {
  ::setenv("AWS_ACCESS_KEY_ID", key_id, 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
  for (const char* name : {"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"}) {
    ::unsetenv(name);
  }
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
  ::setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);  // no region from the user's config
}

namespace {

S3TestResponse Get(const HttpRequest& request, HttpSettings settings) {
  HttpClient client(std::move(settings));
  std::string body(1 << 20, '\0');
  HttpResponse r = client.Perform(request, {{body.data(), body.size()}}, request.url, nullptr);
  EXPECT_FALSE(r.transport_error.has_value()) << r.transport_error->ToString();
  S3TestResponse response;
  response.status = r.status;
  response.content_range = r.content_range_text;
  response.etag = r.etag;
  body.resize(r.body_bytes);
  response.body = std::move(body);
  return response;
}

}  // namespace

S3TestResponse HttpGetWith(const std::string& url, HttpSettings settings) {
  HttpRequest request;
  request.url = url;
  request.send_extra_headers = true;
  return Get(request, std::move(settings));
}

void StartCredentialServers(std::unique_ptr<FakeMetadataServer>* metadata,
                            std::unique_ptr<SigV4Checker>* checker) {
  std::string error;
  *metadata = FakeMetadataServer::Start("container-auth-token", &error);
  ASSERT_NE(*metadata, nullptr) << error;
  *checker = SigV4Checker::Start("-", "derive:secret-for-", &error);
  ASSERT_NE(*checker, nullptr) << error;
  UseMetadataCredentials(**metadata);
}

SignedGetAnswer SignedGet(HttpClient& client, const std::string& url) {
  HttpRequest request;
  request.url = url;
  request.send_extra_headers = true;
  request.time_limit = std::chrono::milliseconds(20'000);
  std::string body(1 << 16, '\0');
  HttpResponse r = client.Perform(request, {{body.data(), body.size()}}, "s3://bucket/k", nullptr);
  body.resize(r.body_bytes);
  SignedGetAnswer answer;
  answer.status = r.status;
  answer.body = r.error_body.empty() ? body : r.error_body;
  answer.error = r.transport_error;
  return answer;
}

std::string KeyThatSigned(HttpClient& client, const std::string& url) {
  SignedGetAnswer a = SignedGet(client, url);
  if (a.error) return "error: " + a.error->message();
  size_t at = a.body.find(" key ");
  if (a.status != 200 || at == std::string::npos) return "HTTP " + std::to_string(a.status) + ": " + a.body;
  return a.body.substr(at + 5);
}

S3TestResponse S3Get(const std::string& url, const S3Endpoint& endpoint, const S3Credentials& credentials,
                     bool has_range, uint64_t first, uint64_t last) {
  HttpSettings settings;
  ApplyS3Signing(endpoint, credentials, &settings);
  HttpRequest request;
  request.url = url;
  request.send_extra_headers = true;
  request.has_range = has_range;
  request.first = first;
  request.last = last;
  return Get(request, std::move(settings));
}

}  // namespace stfs::testing
