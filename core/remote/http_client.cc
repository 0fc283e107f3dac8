// HttpClient over libcurl easy handles (see http_client.h).
//
// Each pooled handle keeps its own connection cache, so a handle returned to
// the pool keeps its keep-alive connection for the next request; several
// threads each hold one handle, which gives several transfers in flight.
// Redirects are not followed here: RangeFetcher follows them itself so that
// extra headers (tokens) go only to the location's own origin.
#include "core/remote/http_client.h"

#include "core/remote/curl_buffers.h"

#include <curl/curl.h>

#include <cctype>
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <mutex>
#include <string>

namespace stfs {
namespace {

// Idle handles kept for reuse; more may exist while many threads read.
constexpr size_t kMaxIdleHandles = 32;

void InitCurlOnce() { InitCurlWithBufferPool(); }

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

bool Append(Slist* list, const std::string& line) {
  curl_slist* next = curl_slist_append(list->get(), line.c_str());
  if (!next) return false;
  list->release();
  list->reset(next);
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool ParseDecimal(std::string_view text, uint64_t* value) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    uint64_t next = v * 10 + static_cast<uint64_t>(c - '0');
    if (next / 10 != v) return false;
    v = next;
  }
  *value = v;
  return true;
}

// Per-transfer state shared with the curl callbacks.
struct Transfer {
  HttpResponse* response = nullptr;
  const std::vector<BodySegment>* segments = nullptr;
  size_t segment = 0;         // current segment
  size_t segment_offset = 0;  // bytes written into it
  const std::atomic<bool>* cancel = nullptr;
  uint64_t error_body_bytes = 0;  // non-2xx body bytes seen (and dropped)
  bool cancelled = false;
};

bool IsSuccess(long status) { return status >= 200 && status < 300; }

size_t OnHeader(char* buffer, size_t size, size_t nitems, void* user) {
  Transfer* t = static_cast<Transfer*>(user);
  size_t n = size * nitems;
  std::string_view line(buffer, n);
  HttpResponse* r = t->response;
  if (line.substr(0, 5) == "HTTP/") {
    // A new response (e.g. after 100 Continue): forget earlier headers.
    *r = HttpResponse();
    return n;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string_view name = Trim(line.substr(0, colon));
  std::string_view value = Trim(line.substr(colon + 1));
  if (EqualsNoCase(name, "Content-Range")) {
    r->content_range_text = std::string(value);
    r->content_range = ParseContentRange(value);
    r->content_range_malformed = !r->content_range.has_value();
  } else if (EqualsNoCase(name, "Content-Length")) {
    uint64_t length = 0;
    if (ParseDecimal(value, &length)) r->content_length = length;
  } else if (EqualsNoCase(name, "Content-Encoding")) {
    r->content_encoding = std::string(value);
  } else if (EqualsNoCase(name, "ETag")) {
    r->etag = std::string(value);
  } else if (EqualsNoCase(name, "Last-Modified")) {
    r->last_modified = std::string(value);
  } else if (EqualsNoCase(name, "x-amz-bucket-region")) {
    r->bucket_region = std::string(value);
  }
  return n;
}

size_t OnBody(char* data, size_t size, size_t nmemb, void* user) {
  Transfer* t = static_cast<Transfer*>(user);
  size_t n = size * nmemb;
  HttpResponse* r = t->response;
  // Bodies of non-2xx answers (error pages, redirects) are dropped, and one
  // that goes on past a small cap ends the transfer: its status is all we use.
  if (!t->segments) {
    if (r->error_body.size() < kKeptErrorBodyBytes) {
      r->error_body.append(data, std::min(n, kKeptErrorBodyBytes - r->error_body.size()));
    }
    t->error_body_bytes += n;
    if (t->error_body_bytes > kMaxErrorBodyBytes) {
      r->error_body_dropped = true;
      return 0;
    }
    return n;
  }
  size_t done = 0;
  while (done < n) {
    if (t->segment >= t->segments->size()) {
      r->body_overflow = true;
      return 0;  // aborts the transfer: the server sends more than we asked for
    }
    const BodySegment& seg = (*t->segments)[t->segment];
    size_t room = seg.length - t->segment_offset;
    size_t take = std::min(room, n - done);
    if (take > 0) std::memcpy(seg.data + t->segment_offset, data + done, take);
    done += take;
    t->segment_offset += take;
    r->body_bytes += take;
    if (t->segment_offset == seg.length) {
      ++t->segment;
      t->segment_offset = 0;
    }
  }
  return n;
}

// Slowness and time limits are libcurl's own (LOW_SPEED_*, TIMEOUT_MS);
// this only aborts a transfer whose owner is going away.
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  Transfer* t = static_cast<Transfer*>(user);
  if (t->cancel && t->cancel->load(std::memory_order_relaxed)) {
    t->cancelled = true;
    return 1;
  }
  return 0;
}

bool RetryableCurlCode(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

Status CheckRangeBody(const HttpResponse& r, const std::string& describe, const std::string& what) {
  if (!r.content_encoding.empty() && !EqualsNoCase(r.content_encoding, "identity")) {
    return Status::IOError(describe + ": server applied Content-Encoding '" + r.content_encoding +
                           "' to a byte range");
  }
  if (r.status == 206 &&
      (!r.content_range || r.content_range->unsatisfied || !r.content_range->total)) {
    return Status::IOError(describe + ": HTTP 206 with an unusable Content-Range '" +
                           r.content_range_text + "' for " + what);
  }
  return Status::OK();
}

std::optional<ContentRange> ParseContentRange(std::string_view value) {
  ContentRange range;
  range.text = std::string(value);
  value = Trim(value);
  if (value.size() < 6 || !EqualsNoCase(value.substr(0, 6), "bytes ")) return std::nullopt;
  value = Trim(value.substr(6));
  size_t slash = value.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::string_view span = value.substr(0, slash);
  std::string_view total = value.substr(slash + 1);
  if (total != "*") {
    uint64_t t = 0;
    if (!ParseDecimal(total, &t)) return std::nullopt;
    range.total = t;
  }
  if (span == "*") {
    if (!range.total) return std::nullopt;
    range.unsatisfied = true;
    return range;
  }
  size_t dash = span.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  if (!ParseDecimal(span.substr(0, dash), &range.first) ||
      !ParseDecimal(span.substr(dash + 1), &range.last) || range.last < range.first) {
    return std::nullopt;
  }
  if (range.total && range.last >= *range.total) return std::nullopt;
  return range;
}

struct HttpClient::Handle {
  CURL* curl = nullptr;
  char error[CURL_ERROR_SIZE] = {0};
  const std::function<void(int64_t)>* account;
  explicit Handle(const std::function<void(int64_t)>* account_memory)
      : curl(curl_easy_init()), account(account_memory) {
    if (curl && *account) (*account)(kCurlBufferBytes);
  }
  ~Handle() {
    if (!curl) return;
    curl_easy_cleanup(curl);
    if (*account) (*account)(-kCurlBufferBytes);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

HttpClient::HttpClient(HttpSettings settings) : settings_(std::move(settings)) { InitCurlOnce(); }

HttpClient::~HttpClient() = default;

std::unique_ptr<HttpClient::Handle> HttpClient::AcquireHandle() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Handle> handle = std::move(idle_.back());
      idle_.pop_back();
      return handle;
    }
  }
  return std::make_unique<Handle>(&settings_.account_memory);
}

void HttpClient::ReleaseHandle(std::unique_ptr<Handle> handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kMaxIdleHandles) idle_.push_back(std::move(handle));
}

HttpResponse HttpClient::Perform(const HttpRequest& request,
                                 const std::vector<BodySegment>& segments,
                                 const std::string& describe, const std::atomic<bool>* cancel) {
  const bool sign = request.send_extra_headers && !settings_.aws_sigv4.empty() && settings_.aws_keys;
  if (!sign) {
    HttpResponse response = PerformOnce(request, segments, describe, cancel, nullptr);
    // Anonymous S3 requests (no_sign) still learn the bucket's region.
    if (request.send_extra_headers && settings_.aws_answer && !response.transport_error &&
        (response.status < 200 || response.status >= 300)) {
      settings_.aws_answer(response, AwsSigningKeys{});
    }
    return response;
  }
  const auto deadline = std::chrono::steady_clock::now() + request.time_limit;
  for (int attempt = 0;; ++attempt) {
    StatusOr<AwsSigningKeys> keys = settings_.aws_keys(deadline);
    if (!keys.ok()) {
      HttpResponse response;
      response.transport_error = Status::IOError(describe + ": " + keys.status().message(), keys.status().sys_errno());
      return response;
    }
    HttpRequest this_try = request;
    this_try.time_limit =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    HttpResponse response = PerformOnce(this_try, segments, describe, cancel, &*keys);
    // Nothing went into `segments` (not a 2xx): sending again is safe.
    if (!response.transport_error && (response.status < 200 || response.status >= 300) && settings_.aws_answer &&
        settings_.aws_answer(response, *keys) && attempt == 0) {
      continue;
    }
    return response;
  }
}

HttpResponse HttpClient::PerformOnce(const HttpRequest& request,
                                     const std::vector<BodySegment>& segments,
                                     const std::string& describe, const std::atomic<bool>* cancel,
                                     const AwsSigningKeys* keys) {
  HttpResponse response;
  std::unique_ptr<Handle> handle = AcquireHandle();
  if (!handle->curl) {
    response.transport_error =
        Status::ResourceExhausted(describe + ": cannot create a curl handle");
    return response;
  }
  CURL* curl = handle->curl;
  // Options persist on a reused handle: reset, then set everything we use.
  curl_easy_reset(curl);
  handle->error[0] = '\0';

  Slist headers;
  bool headers_ok = true;
  // No "Accept-Encoding": ranges must address the stored bytes, not an encoding.
  // Not when signing: libcurl's SigV4 would sign the removed header as if it
  // were sent empty, and S3 would compute another signature.
  const bool sign = keys != nullptr;
  if (!sign) headers_ok &= Append(&headers, "Accept-Encoding:");
  if (sign && !keys->session_token.empty()) {
    headers_ok &= Append(&headers, "x-amz-security-token: " + keys->session_token);
  }
  if (!request.if_match.empty()) headers_ok &= Append(&headers, "If-Match: " + request.if_match);
  if (!request.if_unmodified_since.empty()) {
    headers_ok &= Append(&headers, "If-Unmodified-Since: " + request.if_unmodified_since);
  }
  if (request.send_extra_headers) {
    for (const std::string& h : settings_.extra_headers) headers_ok &= Append(&headers, h);
  }
  if (!headers_ok) {
    response.transport_error = Status::ResourceExhausted(describe + ": out of memory for headers");
    return response;
  }

  if (request.time_limit.count() <= 0) {
    response.timed_out = true;
    response.transport_error = Status::IOError(describe + ": out of time");
    ReleaseHandle(std::move(handle));
    return response;
  }
  Transfer transfer;
  transfer.response = &response;
  transfer.cancel = cancel;
  std::string range_text;
  if (request.has_range) {
    range_text = std::to_string(request.first) + "-" + std::to_string(request.last);
  }

  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, handle->error);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(curl, CURLOPT_USERAGENT, settings_.user_agent.c_str());
  if (!range_text.empty()) curl_easy_setopt(curl, CURLOPT_RANGE, range_text.c_str());
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min(settings_.connect_timeout, request.time_limit).count()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.time_limit.count()));
  if (settings_.min_speed > 0) {
    long window_s = static_cast<long>(std::max<int64_t>(1, (settings_.speed_window.count() + 999) / 1000));
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT,
                     static_cast<long>(std::min<uint64_t>(settings_.min_speed, LONG_MAX)));
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, window_s);
  }
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, static_cast<long>(kCurlBufferBytes));
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!settings_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, settings_.ca_file.c_str());
  if (sign) {
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, settings_.aws_sigv4.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, keys->access_key_id.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, keys->secret_access_key.c_str());
  }

  // The write callback needs the status to decide where the body goes; curl
  // has parsed the status line before it delivers any body byte.
  struct BodyRouter {
    Transfer* transfer;
    CURL* curl;
    const std::vector<BodySegment>* segments;
    bool decided = false;
  } router{&transfer, curl, &segments};
  auto route = [](char* data, size_t size, size_t nmemb, void* user) -> size_t {
    BodyRouter* r = static_cast<BodyRouter*>(user);
    if (!r->decided) {
      long code = 0;
      curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &code);
      r->transfer->segments = IsSuccess(code) ? r->segments : nullptr;
      r->decided = true;
    }
    return OnBody(data, size, nmemb, r->transfer);
  };
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, static_cast<curl_write_callback>(route));
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &router);

  const auto started = std::chrono::steady_clock::now();
  CURLcode code = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  response.status = status;
  if (status >= 300 && status < 400) {
    char* location = nullptr;
    if (curl_easy_getinfo(curl, CURLINFO_REDIRECT_URL, &location) == CURLE_OK && location) {
      response.redirect_url = location;
    }
  }
  // Drop the header list pointer before `headers` goes away.
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);

  if (code != CURLE_OK) {
    if (transfer.cancelled) {
      response.cancelled = true;
      response.transport_error = Status::IOError(describe + ": transfer cancelled");
    } else if (response.body_overflow || response.error_body_dropped) {
      // Judged by the caller from body_overflow / the status.
    } else {
      std::string why = handle->error[0] ? handle->error : curl_easy_strerror(code);
      response.transport_retryable = RetryableCurlCode(code);
      response.connect_failed = code == CURLE_COULDNT_CONNECT;
      // TIMEOUT_MS, CONNECTTIMEOUT_MS and LOW_SPEED_* all end in
      // CURLE_OPERATION_TIMEDOUT; only the first means the caller's time is up.
      response.timed_out = code == CURLE_OPERATION_TIMEDOUT &&
                           std::chrono::steady_clock::now() - started >= request.time_limit;
      response.transport_error = Status::IOError(describe + ": " + why);
    }
  }
  ReleaseHandle(std::move(handle));
  return response;
}

}  // namespace stfs
