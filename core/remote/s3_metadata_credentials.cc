// Container and instance metadata credentials (see s3_metadata_credentials.h).
//
// Not HttpClient: that one is a pooled GET-only Range client with buffers
// owned by the caller; these are a few tiny exchanges (one a PUT) per hour.
#include "core/remote/s3_metadata_credentials.h"

#include <curl/curl.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "core/remote/curl_buffers.h"
#include "core/remote/s3_credential_json.h"

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
StatusOr<Answer> Exchange(const std::string& what, const char* method, const std::string& url,
                          const std::vector<std::string>& headers, std::chrono::milliseconds timeout) {
  // The same global init as HttpClient: whichever runs first decides libcurl's allocator.
  InitCurlWithBufferPool();
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return Status::ResourceExhausted(what + ": cannot create a curl handle");
  curl_slist* list = nullptr;
  for (const std::string& h : headers) list = curl_slist_append(list, h.c_str());
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(list, curl_slist_free_all);
  Answer answer;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  if (std::string_view(method) == "PUT") curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");  // link-local services: never through a proxy
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
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
    std::ifstream in(endpoint.token_file);
    if (!in) return Status::IOError(origin + ": cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE " + endpoint.token_file);
    std::stringstream text;
    text << in.rdbuf();
    token = text.str();
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
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
