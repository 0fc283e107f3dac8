// s3:// objects as remote sources: the bridge from an s3:// location and the
// remote options to the request URL and signed HttpSettings that the HTTP
// range source uses unchanged (so every rule of http:// holds: strict 206 +
// Content-Range, ETag pinned with If-Match, bounded retries, ESTALE).
#pragma once

#include <functional>
#include <string>

#include "core/remote/http_client.h"
#include "core/remote/remote_source.h"

namespace stfs {

// Returns the HTTP settings `options` ask for (headers, TLS, timeouts, speed).
HttpSettings HttpSettingsFor(const RemoteOptions& options);

struct S3ObjectRequest {
  std::string url;       // http(s) URL of the object
  std::string describe;  // s3://BUCKET/KEY, for messages
  // True once S3 has named another region for the bucket in an answer to a
  // request signed by these settings (a 301 PermanentRedirect, or a 400
  // AuthorizationHeaderMalformed): PrepareS3Object again then signs for
  // that region (and, for AWS's own endpoint, asks that region's host).
  std::function<bool()> region_moved;
};

// Resolves an s3:// object location: loads the credentials, builds its URL
// and makes `settings` sign requests, for the bucket's region when an
// earlier answer named it (see region_moved; one notice line on stderr per
// bucket when that happens). InvalidArgument for a prefix (a directory of
// shards: list it with ListS3Checkpoint).
StatusOr<S3ObjectRequest> PrepareS3Object(const std::string& location, const RemoteOptions& options,
                                          HttpSettings* settings);

}  // namespace stfs
