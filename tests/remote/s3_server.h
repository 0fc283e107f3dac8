// s3rver (an S3-compatible server from npm) for the s3:// tests, and a signed
// GET through stfs's own HttpClient with its SigV4 settings. Uploads go
// through the curl command line (--aws-sigv4), as docs/REMOTE.md shows.
//
// s3rver is installed on first use by scripts/s3-test-server.sh into a cache
// folder. When node/npm are missing or the install fails, Start() gives a
// skip reason (tests skip with it) unless STFS_REQUIRE_S3RVER=1, where a
// skip would hide a broken CI setup: then it is an error. What s3rver does
// not check (secrets, If-Match) is listed in docs/REMOTE.md.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/remote/http_client.h"
#include "core/remote/s3_credentials.h"
#include "core/remote/s3_location.h"
#include "tests/test_files.h"

namespace stfs::testing {

class S3rverServer {
 public:
  // Starts s3rver on a free port of 127.0.0.1 with a temp data folder. On
  // failure returns null and sets `skip_reason` (s3rver unavailable) or
  // `error` (it did not start).
  static std::unique_ptr<S3rverServer> Start(std::string* skip_reason, std::string* error);
  ~S3rverServer();
  S3rverServer(const S3rverServer&) = delete;
  S3rverServer& operator=(const S3rverServer&) = delete;

  // http://127.0.0.1:PORT, path-style (s3rver has no virtual hosts here).
  S3Endpoint endpoint() const;
  // The key pair s3rver knows: S3RVER / S3RVER.
  static S3Credentials Credentials();
  // Creates `bucket`; uploads `bytes` as `key` (signed PUTs by curl(1)).
  void CreateBucket(const std::string& bucket) const;
  void Put(const std::string& bucket, const std::string& key, const std::string& bytes) const;

 private:
  S3rverServer() = default;
  // Runs curl(1) with SigV4 for S3RVER; fails the test unless it succeeds.
  void Curl(const std::vector<std::string>& args) const;

  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// tests/remote/s3_sigv4_check.py on a free port: answers 200 to a GET whose
// SigV4 signature it recomputes the same (for one key pair), 403 otherwise.
class SigV4Checker {
 public:
  static std::unique_ptr<SigV4Checker> Start(const std::string& key_id, const std::string& secret,
                                             std::string* error);
  ~SigV4Checker();
  SigV4Checker(const SigV4Checker&) = delete;
  SigV4Checker& operator=(const SigV4Checker&) = delete;
  // http://127.0.0.1:PORT
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  SigV4Checker() = default;
  pid_t pid_ = -1;
  int port_ = 0;
};

// tests/remote/fake_metadata_server.py: EC2 instance metadata (IMDSv2) and
// the container credentials endpoint, with knobs (expiring and rotating
// keys, a hang, an error status). See the script for the knobs.
class FakeMetadataServer {
 public:
  // `container_token` is the Authorization value the container endpoint wants.
  static std::unique_ptr<FakeMetadataServer> Start(const std::string& container_token, std::string* error);
  ~FakeMetadataServer();
  FakeMetadataServer(const FakeMetadataServer&) = delete;
  FakeMetadataServer& operator=(const FakeMetadataServer&) = delete;

  // http://127.0.0.1:PORT (AWS_EC2_METADATA_SERVICE_ENDPOINT)
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  // http://127.0.0.1:PORT/container/creds (AWS_CONTAINER_CREDENTIALS_FULL_URI)
  std::string container_url() const { return url() + "/container/creds"; }
  // http://127.0.0.1:PORT/sts/ (AWS_ENDPOINT_URL_STS); the role it knows.
  std::string sts_url() const { return url() + "/sts/"; }
  static constexpr const char* kRoleArn = "arn:aws:iam::123456789012:role/test-role";
  // Sets AWS_WEB_IDENTITY_TOKEN_FILE (a file in its temp dir holding
  // `token`), AWS_ROLE_ARN and AWS_ENDPOINT_URL_STS for this server.
  void UseWebIdentity(const std::string& token) const;
  // Sets the knobs, e.g. "expires_in=3&mode=ok".
  void Set(const std::string& query) const;
  // {"fetches": N, "tokens": M, "unauthorized": K}
  std::string StatsJson() const;

 private:
  FakeMetadataServer() = default;
  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Points the process at `server` for credentials: clears the keys and files
// that come first in the chain, sets AWS_EC2_METADATA_SERVICE_ENDPOINT, and
// unsets the web identity and container variables and AWS_EC2_METADATA_DISABLED.
void UseMetadataCredentials(const FakeMetadataServer& server);

// Starts a FakeMetadataServer (container token "container-auth-token") and a
// SigV4Checker in derive mode (it names the key that signed), then
// UseMetadataCredentials. A server that does not start fails the test.
void StartCredentialServers(std::unique_ptr<FakeMetadataServer>* metadata,
                            std::unique_ptr<SigV4Checker>* checker);

struct S3TestResponse {
  long status = 0;
  std::string content_range;
  std::string etag;
  std::string body;  // of a 2xx answer (at most 1 MiB)
};

// Sets the process's AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (how users
// give keys) and clears what could override them (token, profile, endpoint,
// shared credentials and config files).
void UseS3Keys(const char* key_id, const char* secret);

// GETs `url` (whole) with `settings` as they are (e.g. from PrepareS3Object).
// A transport failure fails the test.
S3TestResponse HttpGetWith(const std::string& url, HttpSettings settings);

// One GET of `url` with `client` (extra headers sent, 20 s limit): the
// status, the body (an error answer's body when there is one) and any
// transport error.
struct SignedGetAnswer {
  long status = 0;
  std::string body;
  std::optional<Status> error;
};
SignedGetAnswer SignedGet(HttpClient& client, const std::string& url);

// SignedGet from a SigV4Checker in derive mode: the key id it names in its
// "signature ok" answer, else "HTTP N: BODY" or "error: MESSAGE".
std::string KeyThatSigned(HttpClient& client, const std::string& url);

// GETs `url` with HttpClient signed by ApplyS3Signing(endpoint, credentials);
// bytes [first, last] when `has_range`. A transport failure fails the test.
S3TestResponse S3Get(const std::string& url, const S3Endpoint& endpoint, const S3Credentials& credentials,
                     bool has_range = false, uint64_t first = 0, uint64_t last = 0);

}  // namespace stfs::testing
