// s3:// objects as remote sources: the bridge from an s3:// location and the
// remote options to the request URL and signed HttpSettings that the HTTP
// range source uses unchanged (so every rule of http:// holds: strict 206 +
// Content-Range, ETag pinned with If-Match, bounded retries, ESTALE).
#pragma once

#include <string>

#include "core/remote/http_client.h"
#include "core/remote/remote_source.h"

namespace stfs {

// Returns the HTTP settings `options` ask for (headers, TLS, timeouts, speed).
HttpSettings HttpSettingsFor(const RemoteOptions& options);

struct S3ObjectRequest {
  std::string url;       // http(s) URL of the object
  std::string describe;  // s3://BUCKET/KEY, for messages
};

// Resolves an s3:// object location: loads the credentials, builds its URL
// and makes `settings` sign requests. InvalidArgument for a prefix (a
// directory of shards: list it with ListS3Checkpoint).
StatusOr<S3ObjectRequest> PrepareS3Object(const std::string& location, const RemoteOptions& options,
                                          HttpSettings* settings);

}  // namespace stfs
