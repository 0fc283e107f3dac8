// Web identity, container and instance metadata credentials (see
// s3_metadata_credentials.h).
//
// Not HttpClient: that one is a pooled GET-only Range client with buffers
// owned by the caller; these are a few tiny exchanges (a PUT, a POST) per hour.
#include "core/remote/s3_metadata_credentials.h"

#include <curl/curl.h>

#include <cctype>
#include <cerrno>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "core/remote/curl_buffers.h"
#include "core/remote/s3_credential_json.h"
#include "core/remote/s3_xml.h"

namespace stfs {
namespace {

constexpr size_t kMaxAnswerBytes = 64 << 10;
constexpr const char* kContainerHost = "http://169.254.170.2";
constexpr const char* kInstanceHost = "http://169.254.169.254";

struct Answer {
  long status = 0;
  std::string body;
  bool too_long = false;
};

size_t Collect(char* data, size_t size, size_t nmemb, void* user) {
  Answer* a = static_cast<Answer*>(user);
  size_t n = size * nmemb;
  if (a->body.size() + n > kMaxAnswerBytes) {
    a->too_long = true;
    return 0;
  }
  a->body.append(data, n);
  return n;
}

std::string Seconds(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

// One exchange; `headers` are "Name: value". Errors are one line naming
// `what` (never a header or the body).
// `signer`, when given, signs the request (SigV4 for `sigv4`, libcurl's
// signer as for S3 requests: see s3_signing.h).
StatusOr<Answer> Exchange(const std::string& what, const char* method, const std::string& url,
                          std::vector<std::string> headers, std::chrono::milliseconds timeout,
                          const std::string& body = "", const S3Credentials* signer = nullptr,
                          const std::string& sigv4 = "") {
  // The same global init as HttpClient: whichever runs first decides libcurl's allocator.
  InitCurlWithBufferPool();
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return Status::ResourceExhausted(what + ": cannot create a curl handle");
  if (signer && !signer->session_token().empty()) {
    headers.push_back("x-amz-security-token: " + signer->session_token());
  }
  curl_slist* list = nullptr;
  for (const std::string& h : headers) list = curl_slist_append(list, h.c_str());
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(list, curl_slist_free_all);
  Answer answer;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  if (std::string_view(method) != "GET") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  }
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");  // link-local services: never through a proxy
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
  if (signer) {
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(c, CURLOPT_USERNAME, signer->access_key_id().c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, signer->secret_access_key().c_str());
  }
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
  CURLcode code = curl_easy_perform(c);
  if (answer.too_long) return Status::IOError(what + ": answer over 64 KiB");
  if (code == CURLE_OPERATION_TIMEDOUT) return Status::IOError(what + " (no answer in " + Seconds(timeout) + ")");
  if (code != CURLE_OK) return Status::IOError(what + " (" + curl_easy_strerror(code) + ")");
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &answer.status);
  return answer;
}

Status StatusError(const std::string& what, const Answer& a) {
  return Status::IOError(what + " (HTTP " + std::to_string(a.status) + ")", a.status == 401 || a.status == 403 ? EACCES : 0);
}

// Reads a token file whole, without the trailing line break.
StatusOr<std::string> ReadTokenFile(const std::string& what, const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::IOError(what + ": cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

std::string FormEscape(const std::string& value) {
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      static const char* kHex = "0123456789ABCDEF";
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

bool Truthy(const std::optional<std::string>& v) {
  if (!v) return false;
  std::string s = *v;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "true";
}

std::string Host(const std::string& url) {
  size_t start = url.find("://");
  if (start == std::string::npos) return "";
  start += 3;
  size_t end = url.find_first_of("/?#", start);
  std::string authority = url.substr(start, end == std::string::npos ? std::string::npos : end - start);
  size_t at = authority.rfind('@');
  if (at != std::string::npos) authority = authority.substr(at + 1);
  if (!authority.empty() && authority.front() == '[') return authority.substr(0, authority.find(']') + 1);
  return authority.substr(0, authority.find(':'));
}

}  // namespace

StatusOr<std::optional<S3ContainerEndpoint>> S3ContainerEndpointFromEnv(const EnvLookup& env) {
  std::optional<std::string> full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  std::optional<std::string> relative = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  S3ContainerEndpoint endpoint;
  if (relative && !relative->empty()) {
    endpoint.url = kContainerHost + *relative;
  } else if (full && !full->empty()) {
    endpoint.url = *full;
    // As the SDKs: keys only over https, or over http to this machine or to
    // the ECS / EKS agents' link-local addresses.
    const std::string host = Host(endpoint.url);
    bool https = endpoint.url.rfind("https://", 0) == 0;
    bool allowed_http = endpoint.url.rfind("http://", 0) == 0 &&
                        (host == "localhost" || host.rfind("127.", 0) == 0 || host == "[::1]" ||
                         host == "169.254.170.2" || host == "169.254.170.23" || host == "[fd00:ec2::23]");
    if (!https && !allowed_http) {
      return Status::InvalidArgument(
          "AWS_CONTAINER_CREDENTIALS_FULL_URI must be https, or http to loopback or the ECS/EKS agent address");
    }
  } else {
    return std::optional<S3ContainerEndpoint>();
  }
  if (auto file = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); file && !file->empty()) {
    endpoint.token_file = *file;
  } else if (auto token = env("AWS_CONTAINER_AUTHORIZATION_TOKEN")) {
    endpoint.token = *token;
  }
  return std::optional<S3ContainerEndpoint>(std::move(endpoint));
}

StatusOr<S3Credentials> FetchS3ContainerCredentials(const S3ContainerEndpoint& endpoint,
                                                    std::chrono::milliseconds timeout) {
  const std::string origin = "container credentials";
  std::string token = endpoint.token;
  if (!endpoint.token_file.empty()) {
    ASSIGN_OR_RETURN(token, ReadTokenFile(origin + " (AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE)", endpoint.token_file));
  }
  if (token.find_first_of("\r\n") != std::string::npos) {
    return Status::InvalidArgument(origin + ": the authorization token holds a line break");
  }
  std::vector<std::string> headers = {"Accept: application/json"};
  if (!token.empty()) headers.push_back("Authorization: " + token);
  ASSIGN_OR_RETURN(Answer a, Exchange(origin, "GET", endpoint.url, headers, timeout));
  if (a.status != 200) return StatusError(origin, a);
  return ParseS3CredentialJson(a.body, S3CredentialJsonFormat::kMetadata, origin);
}

StatusOr<std::optional<S3WebIdentity>> S3WebIdentityFromEnv(const EnvLookup& env) {
  S3WebIdentity identity;
  identity.token_file = env("AWS_WEB_IDENTITY_TOKEN_FILE").value_or("");
  if (identity.token_file.empty()) return std::optional<S3WebIdentity>();
  identity.role_arn = env("AWS_ROLE_ARN").value_or("");
  if (identity.role_arn.empty()) {
    return Status::InvalidArgument("AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not");
  }
  identity.session_name = env("AWS_ROLE_SESSION_NAME").value_or("");
  if (identity.session_name.empty()) identity.session_name = S3DefaultSessionName();
  identity.sts_url = S3StsUrl(env);
  return std::optional<S3WebIdentity>(std::move(identity));
}

StatusOr<S3Credentials> FetchS3WebIdentityCredentials(const S3WebIdentity& identity,
                                                      std::chrono::milliseconds timeout) {
  const std::string origin = "web identity (role " + identity.role_arn + ")";
  ASSIGN_OR_RETURN(std::string token, ReadTokenFile(origin + " (AWS_WEB_IDENTITY_TOKEN_FILE)", identity.token_file));
  if (token.empty()) return Status::InvalidArgument(origin + ": the token file is empty");
  // A POST: the token stays out of URLs (and so out of any access log).
  std::string form = "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" + FormEscape(identity.role_arn) +
                     "&RoleSessionName=" + FormEscape(identity.session_name) +
                     "&WebIdentityToken=" + FormEscape(token);
  // Unsigned: the token is the proof.
  return FetchS3StsCredentials(origin, "AssumeRoleWithWebIdentity", identity.sts_url, form, nullptr, "", timeout);
}

std::string S3StsRegion(const EnvLookup& env) {
  std::string region = env("AWS_REGION").value_or("");
  if (region.empty()) region = env("AWS_DEFAULT_REGION").value_or("");
  return region;
}

std::string S3StsUrl(const EnvLookup& env) {
  std::string url = env("AWS_ENDPOINT_URL_STS").value_or("");
  if (!url.empty()) return url;
  const std::string region = S3StsRegion(env);
  return region.empty() ? "https://sts.amazonaws.com" : "https://sts." + region + ".amazonaws.com";
}

std::string S3DefaultSessionName() {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  return "stfs-" + std::to_string(ms.count());
}

std::string S3StsFormEscape(const std::string& value) { return FormEscape(value); }

StatusOr<S3Credentials> FetchS3StsCredentials(const std::string& origin, const std::string& action,
                                              const std::string& sts_url, const std::string& form,
                                              const S3Credentials* signer, const std::string& region,
                                              std::chrono::milliseconds timeout) {
  // The global endpoint signs for us-east-1, as the SDKs do.
  const std::string sigv4 = "aws:amz:" + (region.empty() ? std::string("us-east-1") : region) + ":sts";
  ASSIGN_OR_RETURN(Answer a, Exchange(origin, "POST", sts_url, {"Accept: application/xml"}, timeout, form, signer,
                                      sigv4));
  if (a.status != 200) {
    StatusOr<StsCredentials> refusal = ParseStsCredentials(a.body, action);
    std::string code = refusal.ok() ? "" : refusal.status().message();
    return Status::IOError(origin + " (HTTP " + std::to_string(a.status) +
                               (code.rfind("STS error ", 0) == 0 ? ", " + code : "") + ")",
                           a.status == 401 || a.status == 403 ? EACCES : 0);
  }
  StatusOr<StsCredentials> keys = ParseStsCredentials(a.body, action);
  if (!keys.ok()) return Status::IOError(origin + ": " + keys.status().message());
  std::optional<std::chrono::system_clock::time_point> expiration = ParseIso8601(keys->expiration);
  if (!expiration) return Status::IOError(origin + ": <Expiration> is not an ISO 8601 UTC time");
  return S3Credentials::Keys(std::move(keys->access_key_id), std::move(keys->secret_access_key),
                             std::move(keys->session_token), origin)
      .WithExpiration(expiration);
}

std::optional<std::string> S3InstanceMetadataEndpoint(const EnvLookup& env) {
  if (Truthy(env("AWS_EC2_METADATA_DISABLED"))) return std::nullopt;
  std::optional<std::string> endpoint = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  std::string url = endpoint && !endpoint->empty() ? *endpoint : kInstanceHost;
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

StatusOr<S3Credentials> FetchS3InstanceCredentials(const std::string& endpoint, std::chrono::milliseconds timeout) {
  const std::string what = "instance metadata";
  // IMDSv2 only: the token PUT also keeps a container's requests from
  // reaching the host's role through a forwarded hop (its TTL is 1 hop).
  ASSIGN_OR_RETURN(Answer token, Exchange(what, "PUT", endpoint + "/latest/api/token",
                                          {"X-aws-ec2-metadata-token-ttl-seconds: 21600"}, timeout));
  if (token.status != 200 || token.body.empty()) return StatusError(what + " token", token);
  if (token.body.find_first_of("\r\n") != std::string::npos) return Status::IOError(what + ": malformed token");
  const std::vector<std::string> headers = {"X-aws-ec2-metadata-token: " + token.body};
  const std::string base = endpoint + "/latest/meta-data/iam/security-credentials/";
  ASSIGN_OR_RETURN(Answer roles, Exchange(what, "GET", base, headers, timeout));
  if (roles.status == 404) return Status::NotFound(what + " (no instance role attached)");
  if (roles.status != 200) return StatusError(what + " role", roles);
  std::string role = roles.body.substr(0, roles.body.find('\n'));
  while (!role.empty() && (role.back() == '\r' || role.back() == ' ')) role.pop_back();
  if (role.empty() || role.find_first_of("/?#% ") != std::string::npos) {
    return Status::IOError(what + ": malformed role name");
  }
  const std::string origin = what + " (role " + role + ")";
  ASSIGN_OR_RETURN(Answer keys, Exchange(origin, "GET", base + role, headers, timeout));
  if (keys.status != 200) return StatusError(origin, keys);
  return ParseS3CredentialJson(keys.body, S3CredentialJsonFormat::kMetadata, origin);
}

}  // namespace stfs
