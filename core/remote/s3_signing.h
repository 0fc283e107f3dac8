// Signing S3 requests: AWS Signature Version 4 through libcurl's own signer
// (CURLOPT_AWS_SIGV4), so stfs holds no hand-written HMAC code.
//
// libcurl signs the URL exactly as given (path and query), the Host header,
// x-amz-date and every header the caller adds; the caller must therefore send
// URLs built by s3_location / s3_list (already canonical). Secrets go to
// libcurl only through CURLOPT_USERNAME / CURLOPT_PASSWORD, never into a
// header list, message or log line.
#pragma once

#include <curl/curl.h>

#include <string>
#include <vector>

#include "core/remote/s3_credentials.h"
#include "core/remote/s3_location.h"

namespace stfs {

// Returns the headers every S3 request carries: x-amz-content-sha256 (an
// unsigned payload: GETs have none, and S3 wants the header with SigV4) and,
// with temporary credentials, x-amz-security-token. None when anonymous.
std::vector<std::string> S3RequestHeaders(const S3Credentials& credentials);

// Sets CURLOPT_AWS_SIGV4 and the key pair on `handle` (nothing when
// anonymous). The caller also sends S3RequestHeaders.
Status ConfigureS3Signing(CURL* handle, const S3Endpoint& endpoint, const S3Credentials& credentials);

// Turns a non-2xx S3 answer into one line naming `what`, the HTTP status, the
// S3 error code and, for 401/403, the credentials used (Describe(): never the
// secret). `body` may be empty or not XML.
Status S3HttpError(const std::string& what, long http_status, std::string_view body,
                   const S3Credentials& credentials);

}  // namespace stfs
