// S3 locations: s3://BUCKET/KEY (an object) and s3://BUCKET/PREFIX/ (a
// "directory"), the endpoint they are reached through, and the request URL
// for path-style or virtual-host addressing.
//
// Pure string functions, no network, no credentials. Keys are encoded the way
// SigV4 expects the canonical URI of S3 (every byte outside the unreserved set
// encoded once, '/' kept), so the URL that is sent is also the one signed.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace stfs {

// True for locations that start with s3:// (any case).
bool IsS3Location(std::string_view location);

struct S3Location {
  std::string bucket;
  std::string key;  // "" (the whole bucket) or a key; a prefix ends in '/'
  // True for "s3://BUCKET" and "s3://BUCKET/.../" (listed like a directory).
  bool IsPrefix() const { return key.empty() || key.back() == '/'; }
  // Returns "s3://BUCKET/KEY" (for messages).
  std::string ToString() const;
};

// Parses s3://BUCKET[/KEY]. The bucket must follow the S3 naming rules
// (ValidateBucketName); the key may hold any byte but control characters.
StatusOr<S3Location> ParseS3Location(std::string_view location);

// Checks the rules of S3 bucket names: 3-63 characters of a-z 0-9 . -,
// starting and ending with a letter or digit, no "..", not an IPv4 address.
Status ValidateBucketName(std::string_view bucket);

enum class S3Addressing {
  kAuto,     // path-style for IP-literal and localhost endpoints and for
             // bucket names with '.', else virtual-host (as the AWS SDKs do)
  kPath,     // ENDPOINT/BUCKET/KEY
  kVirtual,  // SCHEME://BUCKET.HOST/KEY (refused for an IP-literal host)
};

// Parses "auto", "path" or "virtual".
StatusOr<S3Addressing> ParseS3Addressing(std::string_view text);

struct S3Endpoint {
  std::string url;     // "http(s)://HOST[:PORT][/BASE]"; "" = AWS for `region`
  std::string region;  // "" = us-east-1
  S3Addressing addressing = S3Addressing::kAuto;
};

// Returns the region to sign for: endpoint.region, else "us-east-1".
std::string S3Region(const S3Endpoint& endpoint);

// Returns the CURLOPT_AWS_SIGV4 parameter: "aws:amz:REGION:s3".
std::string S3SigV4Provider(const S3Endpoint& endpoint);

// True when requests for `bucket` go path-style through `endpoint`.
StatusOr<bool> S3UsesPathStyle(const S3Endpoint& endpoint, std::string_view bucket);

// Returns the URL of `key` in `bucket` ("" key: the bucket itself, with a
// trailing '/'), without a query string. InvalidArgument for a malformed
// endpoint, or virtual-host addressing of a bucket that is not one DNS label.
StatusOr<std::string> S3ObjectUrl(const S3Endpoint& endpoint, std::string_view bucket,
                                  std::string_view key);

}  // namespace stfs
