// Signing S3 requests: AWS Signature Version 4 by libcurl's own signer
// (CURLOPT_AWS_SIGV4, set by HttpClient), so stfs holds no HMAC code.
//
// libcurl signs the URL exactly as given (path and query), the Host header,
// x-amz-date and every header the caller adds; the URLs must therefore be
// built by s3_location / s3_list (already canonical). Secrets reach libcurl
// only as CURLOPT_USERNAME / CURLOPT_PASSWORD or as a header (the session
// token), which no message or log line ever shows. The keys are taken from
// the S3CredentialProvider for each request, so a refresh applies to the
// next request of every reader.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/remote/http_client.h"
#include "core/remote/s3_credential_provider.h"
#include "core/remote/s3_credentials.h"
#include "core/remote/s3_location.h"

namespace stfs {

// Makes `settings` sign every request to the location's own origin with
// the provider's current keys for the region of `endpoint` (nothing when
// anonymous), send a request refused with ExpiredToken once more with
// refreshed keys, and makes a 401/403 message name the credentials
// (Describe(), no secret).
// `on_region_redirect`, when set, is called with the region S3 names for
// the bucket when it refuses a request signed for another one
// (S3RedirectRegion).
void ApplyS3Signing(const S3Endpoint& endpoint, std::shared_ptr<S3CredentialProvider> provider,
                    HttpSettings* settings,
                    std::function<void(const std::string& region)> on_region_redirect = nullptr);
// The same with fixed keys.
void ApplyS3Signing(const S3Endpoint& endpoint, const S3Credentials& credentials, HttpSettings* settings);

// Returns the region S3 names for the bucket in an answer to a request
// signed for the wrong one: x-amz-bucket-region of a 301 / 307 / 400 answer
// (PermanentRedirect, TemporaryRedirect, AuthorizationHeaderMalformed), else
// the <Region> of its XML body; "" when there is none or it is not a region
// name (a-z, 0-9 and '-', at most 40). Only the region is taken: the bucket
// and key stay the same, whatever <Endpoint> or Location say.
std::string S3RedirectRegion(const HttpResponse& answer);

// True when an S3 error answer says the keys it was signed with expired.
bool IsS3ExpiredTokenError(long http_status, std::string_view body);

// Turns a non-2xx S3 answer into one line naming `what`, the HTTP status, the
// S3 error code when `body` is an S3 <Error>, and, for 401/403, the
// credentials used. 404 is NotFound; 401/403 carry EACCES.
Status S3HttpError(const std::string& what, long http_status, std::string_view body,
                   const S3Credentials& credentials);
// The same, the credentials given by their Describe().
Status S3HttpError(const std::string& what, long http_status, std::string_view body,
                   const std::string& credentials);

}  // namespace stfs
