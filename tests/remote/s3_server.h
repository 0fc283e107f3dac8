// s3rver (an S3-compatible server from npm) for the s3:// tests, and a signed
// request helper built on the same libcurl SigV4 wiring stfs uses.
//
// s3rver is installed on first use by scripts/s3-test-server.sh into a cache
// folder. When node/npm are missing or the install fails, Start() gives a
// skip reason (tests skip with it) unless STFS_REQUIRE_S3RVER=1, where a
// skip would hide a broken CI setup: then it is an error. What s3rver does
// not check (secrets, If-Match) is listed in docs/REMOTE.md.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

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
  // Creates `bucket`; uploads `bytes` as `key` (signed PUTs).
  void CreateBucket(const std::string& bucket) const;
  void Put(const std::string& bucket, const std::string& key, const std::string& bytes) const;

 private:
  S3rverServer() = default;
  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

struct S3TestResponse {
  long status = 0;
  std::string content_range;
  std::string etag;
  std::string body;
};

// Sends one request ("GET" or "PUT" of `put_body`) to `url`, signed with
// `credentials` for `endpoint` (ConfigureS3Signing + S3RequestHeaders);
// `range` is "A-B" or "". A transport failure fails the current test.
S3TestResponse S3Request(const std::string& method, const std::string& url, const S3Endpoint& endpoint,
                         const S3Credentials& credentials, const std::string& range = "",
                         const std::string& put_body = "");

}  // namespace stfs::testing
