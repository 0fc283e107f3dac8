// SigV4 settings for HttpClient, and S3 error messages (see s3_signing.h).
#include "core/remote/s3_signing.h"

#include <cerrno>

#include "core/remote/s3_xml.h"

namespace stfs {
namespace {

std::string CredentialsAdvice(const std::string& credentials) {
  return "check the credentials (" + credentials + ")";
}

}  // namespace

void ApplyS3Signing(const S3Endpoint& endpoint, std::shared_ptr<S3CredentialProvider> provider,
                    HttpSettings* settings, std::function<void(const std::string& region)> on_region_redirect) {
  settings->access_advice = CredentialsAdvice(provider->Describe());
  settings->aws_answer = [provider, signed_for = S3Region(endpoint), on_region_redirect](
                             const HttpResponse& answer, const AwsSigningKeys& used) {
    if (used.handle && IsS3ExpiredTokenError(answer.status, answer.error_body)) {
      return provider->Rejected(std::static_pointer_cast<const S3Credentials>(used.handle));
    }
    if (on_region_redirect) {
      std::string region = S3RedirectRegion(answer);
      if (!region.empty() && region != signed_for) on_region_redirect(region);
    }
    return false;
  };
  if (provider->anonymous()) return;
  settings->aws_sigv4 = S3SigV4Provider(endpoint);
  // libcurl 7.88 does not add this header itself; S3 refuses SigV4 without it.
  settings->extra_headers.push_back("x-amz-content-sha256: UNSIGNED-PAYLOAD");
  settings->aws_keys = [provider](std::chrono::steady_clock::time_point wait_until) -> StatusOr<AwsSigningKeys> {
    ASSIGN_OR_RETURN(S3CredentialProvider::Keys keys, provider->Current(wait_until));
    return AwsSigningKeys{keys->access_key_id(), keys->secret_access_key(), keys->session_token(), keys};
  };
}

std::string S3RedirectRegion(const HttpResponse& answer) {
  if (answer.status != 301 && answer.status != 307 && answer.status != 400) return "";
  std::string region = answer.bucket_region;
  if (region.empty()) {
    StatusOr<S3Error> error = ParseS3Error(answer.error_body);
    if (error.ok()) region = error->region;
  }
  if (region.empty() || region.size() > 40) return "";
  for (char c : region) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return "";
  }
  return region;
}

void ApplyS3Signing(const S3Endpoint& endpoint, const S3Credentials& credentials, HttpSettings* settings) {
  ApplyS3Signing(endpoint, std::make_shared<S3CredentialProvider>(credentials), settings);
}

bool IsS3ExpiredTokenError(long http_status, std::string_view body) {
  if (http_status != 400 && http_status != 403) return false;
  if (body.empty()) return false;
  StatusOr<S3Error> error = ParseS3Error(body);
  return error.ok() && (error->code == "ExpiredToken" || error->code == "TokenRefreshRequired");
}

Status S3HttpError(const std::string& what, long http_status, std::string_view body,
                   const S3Credentials& credentials) {
  return S3HttpError(what, http_status, body, credentials.Describe());
}

Status S3HttpError(const std::string& what, long http_status, std::string_view body,
                   const std::string& credentials) {
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
