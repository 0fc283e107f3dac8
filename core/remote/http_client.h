// HttpClient: one HTTP GET exchange at a time per call, over pooled libcurl
// handles that keep their connections alive between calls.
//
// This layer only speaks HTTP: it sends one request (no redirect following,
// no retries; the one exception: a SigV4-signed request whose keys S3
// refused as expired goes once more with fresh keys, see aws_answer),
// reports what came back, and writes a 2xx body into the caller's buffers,
// never past them. Judging the response (is this the range
// we asked for, retry or not) belongs to RangeFetcher. It never logs, and its
// messages never contain request headers.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace stfs {

// The keys one request is signed with. `handle` identifies them to the
// signer (aws_refused), which owns them; no message ever shows a field.
struct AwsSigningKeys {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // "" when none; sent as x-amz-security-token
  std::shared_ptr<const void> handle;
};
// Returns the keys for a request, waiting until `wait_until` at most; an
// error fails the request (one line, no retry).
using AwsKeySource = std::function<StatusOr<AwsSigningKeys>(std::chrono::steady_clock::time_point wait_until)>;
struct HttpResponse;
using AwsAnswerCheck = std::function<bool(const HttpResponse& answer, const AwsSigningKeys& used)>;

struct HttpSettings {
  std::vector<std::string> extra_headers;  // "Name: value"
  std::string ca_file;
  std::string user_agent;
  std::chrono::milliseconds connect_timeout{10'000};
  // A transfer slower than min_speed bytes/s over a whole window of
  // speed_window is aborted (libcurl's LOW_SPEED_LIMIT / LOW_SPEED_TIME;
  // the window is counted in whole seconds, at least one).
  uint64_t min_speed = 1024;
  std::chrono::milliseconds speed_window{30'000};
  // Called with +bytes when a curl handle (and its receive buffer) is made
  // and -bytes when it is freed, so the owner can count them in its memory
  // budget. May be empty.
  std::function<void(int64_t)> account_memory;
  // AWS Signature V4 by libcurl itself (CURLOPT_AWS_SIGV4), for s3://: the
  // provider "aws:amz:REGION:s3"; "" = unsigned. Applied only to requests
  // that carry the extra headers (the location's origin), with the keys
  // aws_keys gives for each request (they may be refreshed meanwhile).
  std::string aws_sigv4;
  AwsKeySource aws_keys;
  // Shown each non-2xx answer to a signed request: returns true when the
  // keys were refused as expired and newer ones may come; the request is
  // then sent once more, signed with aws_keys' next answer. May be empty.
  AwsAnswerCheck aws_answer;
  // Advice appended to a 401/403 message; "" = the token / -o header= advice.
  std::string access_advice;
};

// Receive buffer of each curl handle (CURLOPT_BUFFERSIZE): what one handle
// costs beyond its small fixed state.
inline constexpr int64_t kCurlBufferBytes = 256 << 10;

// The largest body of a non-2xx answer read before the transfer is dropped
// (an error page is only ever looked at for its status).
inline constexpr uint64_t kMaxErrorBodyBytes = 64 << 10;
// Of which this much is kept (S3's <Error> XML: code, region, message).
inline constexpr size_t kKeptErrorBodyBytes = 4 << 10;

// A buffer the body of a 2xx response is written into; segments are filled
// in order, as if they were one contiguous buffer.
struct BodySegment {
  char* data = nullptr;
  size_t length = 0;
};

struct HttpRequest {
  std::string url;
  bool send_extra_headers = false;  // only to the location's own origin
  bool has_range = false;
  uint64_t first = 0;  // Range: bytes=first-last (inclusive)
  uint64_t last = 0;
  std::string if_match;             // empty: not sent
  std::string if_unmodified_since;  // empty: not sent
  // Longest the whole exchange may take (connect, headers, body); the
  // caller passes what is left of its deadline. Zero or less: fails at once.
  std::chrono::milliseconds time_limit{60'000};
};

// Content-Range: bytes FIRST-LAST/TOTAL, or bytes */TOTAL (unsatisfied).
struct ContentRange {
  bool unsatisfied = false;
  uint64_t first = 0;
  uint64_t last = 0;
  std::optional<uint64_t> total;  // nullopt for "*"
  std::string text;               // as received, for messages
};

struct HttpResponse {
  // Set when no complete HTTP response arrived (reset, timeout, stall, TLS).
  std::optional<Status> transport_error;
  bool transport_retryable = false;
  bool connect_failed = false;  // nothing listens there (or it refused us)
  long status = 0;
  std::optional<ContentRange> content_range;
  bool content_range_malformed = false;
  std::string content_range_text;
  std::optional<uint64_t> content_length;
  std::string content_encoding;
  std::string etag;
  std::string last_modified;
  std::string redirect_url;    // absolute, from Location, for 3xx
  std::string bucket_region;   // x-amz-bucket-region (S3 names the bucket's region)
  std::string error_body;      // the first kKeptErrorBodyBytes of a non-2xx body
  uint64_t body_bytes = 0;     // 2xx body bytes written into the segments
  bool body_overflow = false;  // a 2xx body longer than the segments
  bool timed_out = false;      // the transfer ran out of time_limit
  bool cancelled = false;      // `cancel` was set during the transfer
  bool error_body_dropped = false;  // a non-2xx body past kMaxErrorBodyBytes was cut off
};

// Parses a Content-Range value; nullopt when malformed.
std::optional<ContentRange> ParseContentRange(std::string_view value);

// Refuses a 2xx body stfs cannot use as raw bytes: a Content-Encoding other
// than identity, or a 206 without a usable Content-Range (missing, malformed,
// unsatisfied or without a total). `describe` names the location and `what`
// the range asked for, in the message. Pure: no I/O, no curl.
Status CheckRangeBody(const HttpResponse& r, const std::string& describe, const std::string& what);

// Compares ASCII case-insensitively (header names, tokens like "identity").
bool EqualsNoCase(std::string_view a, std::string_view b);

class HttpClient {
 public:
  explicit HttpClient(HttpSettings settings);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Performs one GET. Body bytes of a 2xx response go into `segments`; a
  // longer body aborts the transfer (body_overflow). `cancel`, when set and
  // true, aborts the transfer within about a second (libcurl calls the
  // progress function at least once a second). `describe` names the
  // location in errors. The exchange ends within request.time_limit. A
  // signed request refused as expired (aws_refused) is sent once more,
  // within the same time limit.
  HttpResponse Perform(const HttpRequest& request, const std::vector<BodySegment>& segments,
                       const std::string& describe, const std::atomic<bool>* cancel);

  const HttpSettings& settings() const { return settings_; }

 private:
  struct Handle;
  std::unique_ptr<Handle> AcquireHandle();
  void ReleaseHandle(std::unique_ptr<Handle> handle);
  // One exchange, signed with `keys` when not null.
  HttpResponse PerformOnce(const HttpRequest& request, const std::vector<BodySegment>& segments,
                           const std::string& describe, const std::atomic<bool>* cancel,
                           const AwsSigningKeys* keys);

  const HttpSettings settings_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Handle>> idle_;  // guarded by mu_
};

}  // namespace stfs
