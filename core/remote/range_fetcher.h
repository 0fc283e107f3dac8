// RangeFetcher: exact byte ranges of one remote object, or an error.
//
// It owns everything that makes one range read trustworthy: following
// redirects (bounded, extra headers only to the location's own origin),
// re-resolving an expired signed redirect target once, checking that every
// answer is exactly the range asked of exactly the object first seen
// (status, Content-Range, body length, ETag/Last-Modified, size), sending
// If-Match (or If-Unmodified-Since), and retrying transient failures with
// bounded exponential backoff and jitter. It must never hand back bytes it
// has not checked, and never put header values in a message.
#pragma once

#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>
#include <string>
#include <vector>

#include "core/remote/http_client.h"
#include "core/status.h"

namespace stfs {

// What the source reports in StatsJson; updated without locks.
struct FetchCounters {
  std::atomic<uint64_t> requests{0};       // HTTP requests sent (redirect hops included)
  std::atomic<uint64_t> retries{0};        // attempts repeated after a transient failure
  std::atomic<uint64_t> bytes_fetched{0};  // body bytes received into our buffers
  std::atomic<uint64_t> failures{0};       // range reads that ended in an error
  std::atomic<uint64_t> resolves{0};       // re-resolutions of an expired redirect target
};

struct RetryPolicy {
  int retries = 5;
  std::chrono::milliseconds delay{200};
  std::chrono::milliseconds max_delay{10'000};
  // Most time one range read may take, every attempt, backoff and redirect
  // included.
  std::chrono::milliseconds timeout{60'000};
};

using Deadline = std::chrono::steady_clock::time_point;

// The object as first seen; later answers must match it.
struct ObjectIdentity {
  uint64_t size = 0;
  std::string etag;           // as sent by the server, quotes included
  std::string last_modified;  // HTTP date
  timespec mtime{0, 0};       // Last-Modified, or 0

  // What later answers are checked against, strongest first: "etag",
  // "last_modified", or "size" when the server sent neither.
  const char* pinned_by() const {
    if (!etag.empty()) return "etag";
    if (!last_modified.empty()) return "last_modified";
    return "size";
  }
};

class RangeFetcher {
 public:
  // `url` is the http(s) URL to resolve from; `describe` names it in messages.
  RangeFetcher(std::string url, std::string describe, HttpSettings settings, RetryPolicy retry,
               int max_redirects);
  RangeFetcher(const RangeFetcher&) = delete;
  RangeFetcher& operator=(const RangeFetcher&) = delete;

  // Asks for bytes [0, probe_length) (the whole object when smaller), learns
  // the object's size and validator from the answer and returns the bytes.
  // Ends within the policy's timeout.
  StatusOr<std::string> Probe(uint64_t probe_length, const std::atomic<bool>* cancel);

  // Fetches exactly bytes [offset, offset+length) of the object seen by
  // Probe into `segments` (whose lengths sum to `length`), giving up at
  // `deadline`. Errors: Stale when the object changed, IOError when retries
  // or time ran out, the server breaks the protocol or `cancel` was set,
  // NotFound when it is gone.
  Status Fetch(uint64_t offset, uint64_t length, const std::vector<BodySegment>& segments,
               const std::atomic<bool>* cancel, Deadline deadline);

  // The deadline of a read starting now.
  Deadline DeadlineFromNow() const { return std::chrono::steady_clock::now() + retry_.timeout; }

  const ObjectIdentity& identity() const { return identity_; }
  const FetchCounters& counters() const { return counters_; }
  bool stale() const { return stale_.load(); }
  const std::string& describe() const { return describe_; }

 private:
  struct Attempt {
    Status status;
    bool retryable = false;
  };
  enum class Mode { kProbe, kFetch };

  Status RunWithRetries(Mode mode, uint64_t offset, uint64_t length,
                        const std::vector<BodySegment>& segments, const std::atomic<bool>* cancel,
                        Deadline deadline);
  Attempt Exchange(Mode mode, uint64_t offset, uint64_t length,
                   const std::vector<BodySegment>& segments, const std::atomic<bool>* cancel,
                   Deadline deadline);
  Status OutOfTime(uint64_t offset, uint64_t length, const Status& last) const;
  Attempt JudgeProbe(const HttpResponse& r, uint64_t length);
  Attempt JudgeFetch(const HttpResponse& r, uint64_t offset, uint64_t length);
  Attempt JudgeError(const HttpResponse& r, const std::string& what);
  Status MarkStale(const std::string& why);
  std::string EffectiveUrl() const;
  std::chrono::milliseconds Backoff(int attempt) const;

  const std::string url_;
  const std::string origin_;
  const std::string describe_;
  const RetryPolicy retry_;
  const int max_redirects_;
  HttpClient client_;
  ObjectIdentity identity_;  // written by Probe only, before any Fetch

  mutable std::mutex mu_;
  std::string effective_url_;  // guarded by mu_: last URL that answered 2xx
  std::atomic<bool> stale_{false};
  std::string stale_why_;  // guarded by mu_
  FetchCounters counters_;
};

}  // namespace stfs
