// s3:// objects and prefix listings over HttpClient (see s3_source.h).
#include "core/remote/s3_source.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "core/remote/s3_list.h"
#include "core/remote/s3_signing.h"

namespace stfs {
namespace {

// Largest ListObjectsV2 page accepted: 1000 keys of at most 1024 bytes each,
// XML-escaped, fit with room to spare.
constexpr size_t kMaxListPageBytes = 8 << 20;

StatusOr<std::shared_ptr<S3CredentialProvider>> CredentialsFor(const RemoteOptions& options) {
  S3CredentialOptions credential_options;
  credential_options.profile = options.s3_profile;
  credential_options.no_sign = options.s3_no_sign;
  return ResolveS3Credentials(credential_options);
}

// Regions S3 named for buckets (by endpoint URL and bucket) in redirects,
// for the life of the process: every later object of the bucket is signed
// for its region at once, and the notice is printed once.
std::mutex learned_mu;
std::map<std::string, std::string>& LearnedRegions() {
  static auto* regions = new std::map<std::string, std::string>();
  return *regions;
}

std::string LearnedKey(const S3Endpoint& endpoint, const std::string& bucket) {
  return endpoint.url + "\n" + bucket;
}

std::string LearnedRegion(const S3Endpoint& endpoint, const std::string& bucket) {
  std::lock_guard<std::mutex> lock(learned_mu);
  auto it = LearnedRegions().find(LearnedKey(endpoint, bucket));
  return it == LearnedRegions().end() ? "" : it->second;
}

// Called from an answer that named `region` for `bucket` while the request
// was signed for endpoint's region.
void LearnRegion(const S3Endpoint& signed_for, const std::string& bucket, const std::string& region) {
  {
    std::lock_guard<std::mutex> lock(learned_mu);
    std::string& known = LearnedRegions()[LearnedKey(signed_for, bucket)];
    if (known == region) return;
    known = region;
  }
  std::fprintf(stderr,
               "stfs: s3://%s is in region %s, not %s (S3 said so): signing for %s%s (-o region=%s saves "
               "this request)\n",
               bucket.c_str(), region.c_str(), S3Region(signed_for).c_str(), region.c_str(),
               signed_for.url.empty() ? " at its regional endpoint" : "", region.c_str());
}

// options.s3 for `bucket`: with the region S3 named for it, else that of the
// profile in ~/.aws/config when neither -o region= nor AWS_REGION /
// AWS_DEFAULT_REGION gave one.
StatusOr<S3Endpoint> EndpointFor(const RemoteOptions& options, const std::string& bucket) {
  S3Endpoint endpoint = options.s3;
  if (std::string learned = LearnedRegion(endpoint, bucket); !learned.empty()) {
    endpoint.region = learned;
  } else if (endpoint.region.empty()) {
    ASSIGN_OR_RETURN(endpoint.region, LoadS3ConfigRegion(options.s3_profile));
  }
  return endpoint;
}

// Signs `settings` for `endpoint` with `credentials`, noting a region that
// S3 names for `bucket`.
void SignFor(const S3Endpoint& endpoint, const std::string& bucket,
             std::shared_ptr<S3CredentialProvider> credentials, HttpSettings* settings) {
  ApplyS3Signing(endpoint, std::move(credentials), settings,
                 [endpoint, bucket](const std::string& region) { LearnRegion(endpoint, bucket, region); });
}

// True when S3 named a region for the bucket other than endpoint's.
bool RegionMoved(const S3Endpoint& endpoint, const std::string& bucket) {
  std::string learned = LearnedRegion(endpoint, bucket);
  return !learned.empty() && learned != S3Region(endpoint);
}

// GETs one listing page, retrying 5xx (S3's SlowDown is a 503), 429 and
// transport failures with doubling backoff, all within options.timeout.
StatusOr<std::string> GetPage(HttpClient& client, const std::string& url, const RemoteOptions& options,
                              const S3CredentialProvider& credentials) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + options.timeout;
  std::string body(kMaxListPageBytes, '\0');
  std::chrono::milliseconds delay = options.retry_delay;
  Status last;
  for (int attempt = 0; attempt <= options.retries; ++attempt) {
    if (attempt > 0) {
      if (Clock::now() + delay >= deadline) break;
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, options.retry_max_delay);
    }
    HttpRequest request;
    request.url = url;
    request.send_extra_headers = true;
    request.time_limit = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    HttpResponse r = client.Perform(request, {{body.data(), body.size()}}, "listing", nullptr);
    if (r.transport_error) {
      last = *r.transport_error;
      if (r.transport_retryable && !r.timed_out) continue;
      return last;
    }
    if (r.status >= 200 && r.status < 300) {
      if (r.body_overflow) return Status::ResourceExhausted("a listing page over 8 MiB");
      body.resize(r.body_bytes);
      return body;
    }
    last = S3HttpError("HTTP GET of a listing page", r.status, r.error_body, credentials.Describe());
    if (r.status != 429 && r.status < 500) return last;
  }
  return last.ok() ? Status::IOError("listing ran out of time") : last;
}

}  // namespace

HttpSettings HttpSettingsFor(const RemoteOptions& options) {
  HttpSettings settings;
  settings.extra_headers = options.headers;
  settings.ca_file = options.ca_file;
  settings.user_agent = options.user_agent;
  settings.connect_timeout = options.connect_timeout;
  settings.min_speed = options.min_speed;
  settings.speed_window = options.stall_timeout;
  return settings;
}

StatusOr<S3ObjectRequest> PrepareS3Object(const std::string& location, const RemoteOptions& options,
                                          HttpSettings* settings) {
  ASSIGN_OR_RETURN(S3Location parsed, ParseS3Location(location));
  S3ObjectRequest request;
  request.describe = parsed.ToString();
  if (parsed.IsPrefix()) {
    return Status::InvalidArgument(request.describe +
                                   ": a prefix (ending in '/') is a directory of shards, not one object");
  }
  StatusOr<std::shared_ptr<S3CredentialProvider>> credentials = CredentialsFor(options);
  if (!credentials.ok()) return credentials.status().WithContext(request.describe);
  StatusOr<S3Endpoint> endpoint = EndpointFor(options, parsed.bucket);
  if (!endpoint.ok()) return endpoint.status().WithContext(request.describe);
  StatusOr<std::string> url = S3ObjectUrl(*endpoint, parsed.bucket, parsed.key);
  if (!url.ok()) return url.status().WithContext(request.describe);
  request.url = *url;
  SignFor(*endpoint, parsed.bucket, *credentials, settings);
  request.region_moved = [endpoint = *endpoint, bucket = parsed.bucket] { return RegionMoved(endpoint, bucket); };
  return request;
}

StatusOr<S3PrefixContents> ListS3Checkpoint(const std::string& location, const RemoteOptions& options) {
  ASSIGN_OR_RETURN(S3Location parsed, ParseS3Location(location));
  const std::string describe = parsed.ToString();
  if (!parsed.IsPrefix()) return Status::InvalidArgument(describe + ": not a prefix (it must end in '/')");
  StatusOr<std::shared_ptr<S3CredentialProvider>> credentials = CredentialsFor(options);
  if (!credentials.ok()) return credentials.status().WithContext(describe);
  // At most twice: again once S3 named the bucket's region.
  StatusOr<std::vector<S3Object>> objects = Status::Internal("not listed");
  for (int attempt = 0; attempt < 2; ++attempt) {
    StatusOr<S3Endpoint> endpoint = EndpointFor(options, parsed.bucket);
    if (!endpoint.ok()) return endpoint.status().WithContext(describe);
    HttpSettings settings = HttpSettingsFor(options);
    SignFor(*endpoint, parsed.bucket, *credentials, &settings);
    HttpClient client(std::move(settings));
    S3PageGetter get = [&](const std::string& url) { return GetPage(client, url, options, **credentials); };
    objects = ListS3Prefix(*endpoint, parsed.bucket, parsed.key, get);
    if (objects.ok() || !RegionMoved(*endpoint, parsed.bucket)) break;
  }
  if (!objects.ok()) return objects.status();
  StatusOr<S3PrefixContents> contents = ChooseS3PrefixContents(parsed.key, *objects);
  if (!contents.ok()) return contents.status().WithContext(describe);
  return contents;
}

}  // namespace stfs
