// RangeFetcher (see range_fetcher.h).
#include "core/remote/range_fetcher.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <random>
#include <thread>

#include "core/remote/remote_location.h"

namespace stfs {
namespace {

bool IsRedirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

std::string RangeText(uint64_t offset, uint64_t length) {
  return "bytes " + std::to_string(offset) + "-" + std::to_string(offset + length - 1);
}

bool IsWeakETag(const std::string& etag) {
  return etag.size() >= 2 && etag.compare(0, 2, "W/") == 0;
}

bool IsHttps(const std::string& url) {
  return url.size() >= 8 && EqualsNoCase(std::string_view(url).substr(0, 8), "https://");
}

std::chrono::milliseconds TimeLeft(Deadline deadline) {
  auto left = deadline - std::chrono::steady_clock::now();
  return std::chrono::ceil<std::chrono::milliseconds>(left);
}

// Sleeps `delay`, waking early when `cancel` becomes true.
void SleepUnlessCancelled(std::chrono::milliseconds delay, const std::atomic<bool>* cancel) {
  auto until = std::chrono::steady_clock::now() + delay;
  while (std::chrono::steady_clock::now() < until) {
    if (cancel && cancel->load()) return;
    auto left = until - std::chrono::steady_clock::now();
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(20)));
  }
}

}  // namespace

RangeFetcher::RangeFetcher(std::string url, std::string describe, HttpSettings settings,
                           RetryPolicy retry, int max_redirects)
    : url_(std::move(url)),
      origin_(UrlOrigin(url_)),
      describe_(std::move(describe)),
      retry_(retry),
      max_redirects_(max_redirects),
      client_(std::move(settings)),
      effective_url_(url_) {}

std::string RangeFetcher::EffectiveUrl() const {
  std::lock_guard<std::mutex> lock(mu_);
  return effective_url_;
}

std::chrono::milliseconds RangeFetcher::Backoff(int attempt) const {
  // Equal jitter: half fixed, half random, so retries of many readers spread out.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  int64_t base = retry_.delay.count();
  int64_t cap = std::max<int64_t>(retry_.max_delay.count(), base);
  int64_t d = base;
  for (int i = 0; i < attempt && d < cap; ++i) d *= 2;
  d = std::min(d, cap);
  std::uniform_int_distribution<int64_t> jitter(0, d / 2);
  return std::chrono::milliseconds(d - d / 2 + jitter(rng));
}

Status RangeFetcher::MarkStale(const std::string& why) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stale_.load()) {
      stale_why_ = why;
      stale_.store(true);
      first = true;
    }
  }
  if (first) {
    std::fprintf(stderr,
                 "stfs: %s: the object changed on the server (%s); reads of data not "
                 "already cached fail with ESTALE\n",
                 describe_.c_str(), why.c_str());
  }
  std::lock_guard<std::mutex> lock(mu_);
  return Status::Stale(describe_ + ": the object changed on the server (" + stale_why_ + ")");
}

StatusOr<std::string> RangeFetcher::Probe(uint64_t probe_length, const std::atomic<bool>* cancel) {
  std::string bytes(probe_length, '\0');
  std::vector<BodySegment> segments{{bytes.data(), bytes.size()}};
  RETURN_IF_ERROR(
      RunWithRetries(Mode::kProbe, 0, probe_length, segments, cancel, DeadlineFromNow()));
  bytes.resize(std::min<uint64_t>(identity_.size, probe_length));
  return bytes;
}

Status RangeFetcher::Fetch(uint64_t offset, uint64_t length,
                           const std::vector<BodySegment>& segments,
                           const std::atomic<bool>* cancel, Deadline deadline) {
  if (length == 0) return Status::OK();
  if (offset > identity_.size || length > identity_.size - offset) {
    return Status::OutOfRange(describe_ + ": " + RangeText(offset, length) + " is past the end (" +
                              std::to_string(identity_.size) + " bytes)");
  }
  return RunWithRetries(Mode::kFetch, offset, length, segments, cancel, deadline);
}

Status RangeFetcher::OutOfTime(uint64_t offset, uint64_t length, const Status& last) const {
  std::string why = describe_ + ": no complete answer for " + RangeText(offset, length) +
                    " within " + std::to_string(retry_.timeout.count()) + " ms (-o timeout)";
  if (!last.ok()) why += "; last error: " + last.message();
  return Status::IOError(why);
}

Status RangeFetcher::RunWithRetries(Mode mode, uint64_t offset, uint64_t length,
                                    const std::vector<BodySegment>& segments,
                                    const std::atomic<bool>* cancel, Deadline deadline) {
  Status last;
  for (int attempt = 0;; ++attempt) {
    if (stale_.load()) return MarkStale("");
    if (cancel && cancel->load()) return Status::IOError(describe_ + ": source shut down");
    if (TimeLeft(deadline).count() <= 0) {
      counters_.failures.fetch_add(1);
      return OutOfTime(offset, length, last);
    }
    Attempt a = Exchange(mode, offset, length, segments, cancel, deadline);
    if (a.status.ok()) return a.status;
    last = a.status;
    if (cancel && cancel->load()) {
      counters_.failures.fetch_add(1);
      return Status::IOError(describe_ + ": source shut down");
    }
    if (!a.retryable) {
      counters_.failures.fetch_add(1);
      return a.status;
    }
    if (attempt >= retry_.retries) {
      counters_.failures.fetch_add(1);
      // Not logged here: the caller reports it once (the mount logs each
      // failed read, inspect prints one error line).
      return Status::IOError(a.status.message() + " (gave up after " +
                             std::to_string(attempt + 1) + " attempts)");
    }
    counters_.retries.fetch_add(1);
    // Never sleep past the deadline: the next round reports it.
    SleepUnlessCancelled(std::min(Backoff(attempt), std::max(TimeLeft(deadline),
                                                             std::chrono::milliseconds(0))),
                         cancel);
  }
}

RangeFetcher::Attempt RangeFetcher::Exchange(Mode mode, uint64_t offset, uint64_t length,
                                             const std::vector<BodySegment>& segments,
                                             const std::atomic<bool>* cancel, Deadline deadline) {
  HttpRequest request;
  request.has_range = true;
  request.first = offset;
  request.last = offset + length - 1;
  if (mode == Mode::kFetch) {
    // A weak ETag never passes If-Match (strong comparison): fall back to the date.
    if (!identity_.etag.empty() && !IsWeakETag(identity_.etag)) {
      request.if_match = identity_.etag;
    } else if (!identity_.last_modified.empty()) {
      request.if_unmodified_since = identity_.last_modified;
    }
  }
  const std::string cached = mode == Mode::kProbe ? url_ : EffectiveUrl();
  std::string url = cached;
  bool reresolved = false;
  int hops = 0;
  for (;;) {
    request.url = url;
    request.send_extra_headers = !origin_.empty() && UrlOrigin(url) == origin_;
    request.time_limit = TimeLeft(deadline);
    HttpResponse r = client_.Perform(request, segments, describe_, cancel);
    counters_.requests.fetch_add(1);
    counters_.bytes_fetched.fetch_add(r.body_bytes);
    if (r.transport_error) {
      const Status& e = *r.transport_error;
      if (r.timed_out) return {OutOfTime(offset, length, e), false};
      // A refused connection at open is a wrong URL far more often than a
      // restarting server: say so at once instead of after every backoff.
      bool retryable = r.transport_retryable && !(mode == Mode::kProbe && r.connect_failed);
      if (e.code() != StatusCode::kIOError) return {e, retryable};
      return {Status::IOError(e.message() + " for " + RangeText(offset, length)), retryable};
    }
    if (IsRedirect(r.status)) {
      if (r.redirect_url.empty()) {
        return {Status::IOError(describe_ + ": HTTP " + std::to_string(r.status) +
                                " redirect without a Location"),
                false};
      }
      if (++hops > max_redirects_) {
        return {Status::IOError(describe_ + ": more than " + std::to_string(max_redirects_) +
                                " redirects"),
                false};
      }
      if (IsHttps(url) && !IsHttps(r.redirect_url)) {
        // Following would send the request (and any token) in clear text and
        // trust bytes nobody can vouch for.
        return {Status::IOError(describe_ + ": refusing a redirect from https to " +
                                RedactUrl(r.redirect_url)),
                false};
      }
      url = r.redirect_url;
      continue;
    }
    bool expired = r.status == 401 || r.status == 403 || r.status == 404 || r.status == 410;
    if (expired && hops == 0 && url == cached && cached != url_ && !reresolved) {
      // The signed URL we were redirected to earlier has expired: ask the
      // original location again, once.
      reresolved = true;
      counters_.resolves.fetch_add(1);
      url = url_;
      continue;
    }
    Attempt a = mode == Mode::kProbe ? JudgeProbe(r, length) : JudgeFetch(r, offset, length);
    if (a.status.ok() && url != cached) {
      std::lock_guard<std::mutex> lock(mu_);
      effective_url_ = url;
    }
    return a;
  }
}

RangeFetcher::Attempt RangeFetcher::JudgeError(const HttpResponse& r, const std::string& what) {
  std::string status = "HTTP " + std::to_string(r.status);
  if (r.status == 404 || r.status == 410) {
    return {Status::NotFound(describe_ + ": " + status + " (not found) for " + what), false};
  }
  if (r.status == 401 || r.status == 403) {
    const std::string& advice = client_.settings().access_advice;
    return {Status::IOError(describe_ + ": " + status + " (access denied) for " + what + "; " +
                                (advice.empty() ? "check the token or -o header=" : advice)),
            false};
  }
  if (r.status == 408 || r.status == 429 || r.status >= 500) {
    return {Status::IOError(describe_ + ": " + status + " for " + what), true};
  }
  return {Status::IOError(describe_ + ": unexpected " + status + " for " + what), false};
}

RangeFetcher::Attempt RangeFetcher::JudgeProbe(const HttpResponse& r, uint64_t length) {
  const std::string what = RangeText(0, length);
  ObjectIdentity id;
  id.etag = r.etag;
  id.last_modified = r.last_modified;
  if (!r.last_modified.empty()) {
    time_t t = curl_getdate(r.last_modified.c_str(), nullptr);
    if (t > 0) id.mtime = timespec{t, 0};
  }
  if (r.status >= 200 && r.status < 300) {
    Status body = CheckRangeBody(r, describe_, what);
    if (!body.ok()) return {body, false};
  }
  if (r.status == 206) {
    const ContentRange& cr = *r.content_range;
    uint64_t expected_last = std::min<uint64_t>(length, *cr.total) - 1;
    if (cr.first != 0 || cr.last != expected_last) {
      return {
          Status::IOError(describe_ + ": server sent Content-Range '" + cr.text + "' for " + what),
          false};
    }
    if (r.body_overflow) {
      return {Status::IOError(describe_ + ": body longer than its Content-Range '" + cr.text + "'"),
              false};
    }
    if (r.body_bytes != expected_last + 1) {
      return {Status::IOError(describe_ + ": short body: " + std::to_string(r.body_bytes) + " of " +
                              std::to_string(expected_last + 1) + " bytes"),
              true};
    }
    id.size = *cr.total;
  } else if (r.status == 200) {
    // Allowed only when it is the whole object and no larger than asked.
    if (r.body_overflow || (r.content_length && *r.content_length > length)) {
      return {Status::IOError(describe_ +
                              ": server ignores Range requests (HTTP 200 with the "
                              "whole object to a request for " +
                              what + ")"),
              false};
    }
    if (r.content_length && *r.content_length != r.body_bytes) {
      return {Status::IOError(describe_ + ": short body: " + std::to_string(r.body_bytes) + " of " +
                              std::to_string(*r.content_length) + " bytes"),
              true};
    }
    id.size = r.body_bytes;
  } else if (r.status == 416) {
    if (r.content_range && r.content_range->unsatisfied && r.content_range->total == 0u) {
      id.size = 0;  // an empty object: the header check will refuse it
    } else {
      return {Status::IOError(describe_ + ": HTTP 416 (range not satisfiable) for " + what +
                              " with Content-Range '" + r.content_range_text + "'"),
              false};
    }
  } else {
    return JudgeError(r, what);
  }
  identity_ = id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    effective_url_ = url_;
  }
  return {Status::OK(), false};
}

RangeFetcher::Attempt RangeFetcher::JudgeFetch(const HttpResponse& r, uint64_t offset,
                                               uint64_t length) {
  const std::string what = RangeText(offset, length);
  const uint64_t size = identity_.size;
  if (r.status == 412)
    return {MarkStale(std::string("HTTP 412 Precondition Failed on ") +
                      (identity_.etag.empty() || IsWeakETag(identity_.etag) ? "If-Unmodified-Since"
                                                                            : "If-Match")),
            false};
  if (r.status == 416) {
    if (r.content_range && r.content_range->total && *r.content_range->total != size) {
      return {MarkStale("size is now " + std::to_string(*r.content_range->total) + " bytes, was " +
                        std::to_string(size)),
              false};
    }
    return JudgeError(r, what);
  }
  if (r.status == 404 || r.status == 410) {
    // The object we mounted is gone: the same as replaced, for a reader.
    return {MarkStale("HTTP " + std::to_string(r.status) + ": the object is gone"), false};
  }
  if (r.status < 200 || r.status >= 300) return JudgeError(r, what);

  // A 2xx: first make sure it is the same object.
  if (!identity_.etag.empty() && !r.etag.empty() && r.etag != identity_.etag) {
    return {MarkStale("ETag " + identity_.etag + " became " + r.etag), false};
  }
  if (identity_.etag.empty() && !identity_.last_modified.empty() && !r.last_modified.empty() &&
      r.last_modified != identity_.last_modified) {
    return {MarkStale("Last-Modified " + identity_.last_modified + " became " + r.last_modified),
            false};
  }
  Status body = CheckRangeBody(r, describe_, what);
  if (!body.ok()) return {body, false};
  if (r.status == 206) {
    const ContentRange& cr = *r.content_range;
    if (*cr.total != size) {
      return {MarkStale("size is now " + std::to_string(*cr.total) + " bytes, was " +
                        std::to_string(size)),
              false};
    }
    if (cr.first != offset || cr.last != offset + length - 1) {
      return {
          Status::IOError(describe_ + ": server sent Content-Range '" + cr.text + "' for " + what),
          false};
    }
  } else if (r.status == 200) {
    if (offset != 0 || length != size) {
      return {Status::IOError(describe_ +
                              ": server ignores Range requests (HTTP 200 to a "
                              "request for " +
                              what + ")"),
              false};
    }
    if ((r.content_length && *r.content_length != size) || r.body_overflow) {
      return {MarkStale("the whole object is no longer " + std::to_string(size) + " bytes"), false};
    }
  } else {
    return {Status::IOError(describe_ + ": unexpected HTTP " + std::to_string(r.status) + " for " +
                            what),
            false};
  }
  if (r.body_overflow) {
    return {Status::IOError(describe_ + ": body longer than the " + std::to_string(length) +
                            " bytes of " + what),
            false};
  }
  if (r.body_bytes != length) {
    return {Status::IOError(describe_ + ": short body: " + std::to_string(r.body_bytes) + " of " +
                            std::to_string(length) + " bytes for " + what),
            true};
  }
  return {Status::OK(), false};
}

}  // namespace stfs
