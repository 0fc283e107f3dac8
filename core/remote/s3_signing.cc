// SigV4 through libcurl, and S3 error messages (see s3_signing.h).
#include "core/remote/s3_signing.h"

#include <cerrno>

#include "core/remote/s3_xml.h"

namespace stfs {

std::vector<std::string> S3RequestHeaders(const S3Credentials& credentials) {
  if (credentials.anonymous()) return {};
  // libcurl 7.88 does not add this header itself; S3 refuses SigV4 without it.
  std::vector<std::string> headers = {"x-amz-content-sha256: UNSIGNED-PAYLOAD"};
  if (!credentials.session_token().empty()) {
    headers.push_back("x-amz-security-token: " + credentials.session_token());
  }
  return headers;
}

Status ConfigureS3Signing(CURL* handle, const S3Endpoint& endpoint, const S3Credentials& credentials) {
  if (credentials.anonymous()) return Status::OK();
  std::string provider = S3SigV4Provider(endpoint);
  if (curl_easy_setopt(handle, CURLOPT_AWS_SIGV4, provider.c_str()) != CURLE_OK ||
      curl_easy_setopt(handle, CURLOPT_USERNAME, credentials.access_key_id().c_str()) != CURLE_OK ||
      curl_easy_setopt(handle, CURLOPT_PASSWORD, credentials.secret_access_key().c_str()) != CURLE_OK) {
    return Status::NotSupported("this libcurl cannot sign AWS SigV4 requests (needs 7.75 or later)");
  }
  return Status::OK();
}

Status S3HttpError(const std::string& what, long http_status, std::string_view body,
                   const S3Credentials& credentials) {
  std::string text = what + ": HTTP " + std::to_string(http_status);
  StatusOr<S3Error> error = ParseS3Error(body);
  if (error.ok()) text += " " + error->code;
  if (http_status == 401 || http_status == 403) {
    text += " (access refused: check the credentials, " + credentials.Describe() + ")";
    return Status::IOError(text, EACCES);
  }
  if (http_status == 404) return Status::NotFound(text);
  if (error.ok() && !error->message.empty()) text += ": " + error->message;
  return Status::IOError(text);
}

}  // namespace stfs
