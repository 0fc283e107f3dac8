// SigV4 settings for HttpClient, and S3 error messages (see s3_signing.h).
#include "core/remote/s3_signing.h"

#include <cerrno>

#include "core/remote/s3_xml.h"

namespace stfs {
namespace {

std::string CredentialsAdvice(const S3Credentials& credentials) {
  return "check the credentials (" + credentials.Describe() + ")";
}

}  // namespace

std::vector<std::string> S3RequestHeaders(const S3Credentials& credentials) {
  if (credentials.anonymous()) return {};
  // libcurl 7.88 does not add this header itself; S3 refuses SigV4 without it.
  std::vector<std::string> headers = {"x-amz-content-sha256: UNSIGNED-PAYLOAD"};
  if (!credentials.session_token().empty()) {
    headers.push_back("x-amz-security-token: " + credentials.session_token());
  }
  return headers;
}

void ApplyS3Signing(const S3Endpoint& endpoint, const S3Credentials& credentials, HttpSettings* settings) {
  settings->access_advice = CredentialsAdvice(credentials);
  if (credentials.anonymous()) return;
  settings->aws_sigv4 = S3SigV4Provider(endpoint);
  settings->aws_access_key_id = credentials.access_key_id();
  settings->aws_secret_access_key = credentials.secret_access_key();
  for (std::string& header : S3RequestHeaders(credentials)) settings->extra_headers.push_back(std::move(header));
}

Status S3HttpError(const std::string& what, long http_status, std::string_view body,
                   const S3Credentials& credentials) {
  std::string text = what + ": HTTP " + std::to_string(http_status);
  StatusOr<S3Error> error = ParseS3Error(body);
  if (error.ok()) text += " " + error->code;
  if (http_status == 401 || http_status == 403) {
    return Status::IOError(text + " (access denied); " + CredentialsAdvice(credentials), EACCES);
  }
  if (http_status == 404) return Status::NotFound(text);
  if (error.ok() && !error->message.empty()) text += ": " + error->message;
  return Status::IOError(text);
}

}  // namespace stfs
