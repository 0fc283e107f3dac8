// Every remote operation ends: servers that answer 503 for ever, redirect
// in a loop, send an error page that never ends, trickle a byte a second or
// accept and never answer all end in an IOError within the read's deadline
// (-o timeout) or the low-speed window (-o min_speed); Shutdown() ends
// blocked readers within about a second; a fetch that throws wakes the
// readers waiting on its block and leaves it retryable. Also the two
// integrity rules: no https -> http redirect, and the validator in force
// (pinned_by) is reported.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <new>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/remote/remote_test_util.h"

namespace stfs {
namespace {

using testing::CheckRead;
using testing::FaultProxy;
using testing::FileWithTensorSizes;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class RemoteDeadlines : public testing::NginxTest {
 protected:
  void SetUp() override {
    NginxTest::SetUp();
    if (HasFatalFailure()) return;
    std::string error;
    proxy_ = FaultProxy::Start(nginx_->Url(""), &error);
    ASSERT_NE(proxy_, nullptr) << error;
    file_ = FileWithTensorSizes({3 << 20, 2 << 20});
    root_.Write("f.safetensors", file_);
  }

  // Test options with a short deadline and no read-ahead (one request at a time).
  static RemoteOptions Short(int timeout_ms) {
    RemoteOptions o = TestOptions();
    o.readahead = 0;
    o.timeout = std::chrono::milliseconds(timeout_ms);
    return o;
  }

  // Reads 1000 bytes at 2 MiB expecting an error; returns it and the time taken.
  Status TimedReadError(const ByteSource& source, double* seconds) {
    std::string buf(1000, '\0');
    auto start = Clock::now();
    StatusOr<size_t> n = source.ReadAt(2 << 20, buf.size(), buf.data());
    *seconds = SecondsSince(start);
    EXPECT_FALSE(n.ok()) << "the read succeeded";
    return n.ok() ? Status::OK() : n.status();
  }

  // Opens through the proxy, sets `fault`, and checks that a read then fails
  // with an IOError naming `message_part` after `at_least` to `under` seconds.
  void ExpectReadFailsWithin(const RemoteOptions& options, const std::string& fault,
                             const std::string& message_part, double at_least, double under) {
    auto source = Open(proxy_->Url("/f.safetensors"), options);
    ASSERT_NE(source, nullptr);
    proxy_->Set(fault);
    double seconds = 0;
    Status s = TimedReadError(*source, &seconds);
    EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
    EXPECT_NE(s.message().find(message_part), std::string::npos) << s.message();
    EXPECT_GE(seconds, at_least);
    EXPECT_LT(seconds, under);
  }

  std::unique_ptr<FaultProxy> proxy_;
  std::string file_;
};

TEST_F(RemoteDeadlines, Endless503EndsAtTheDeadline) {
  RemoteOptions options = Short(2000);
  options.retries = 1000;
  options.retry_delay = std::chrono::milliseconds(100);
  options.retry_max_delay = std::chrono::milliseconds(300);
  auto source = Open(proxy_->Url("/f.safetensors"), options);
  ASSERT_NE(source, nullptr);
  proxy_->Set("fault=status&status=503");
  double seconds = 0;
  Status s = TimedReadError(*source, &seconds);
  EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
  EXPECT_NE(s.message().find("timeout"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("503"), std::string::npos) << s.message();
  EXPECT_GE(seconds, 1.5);
  EXPECT_LT(seconds, 6.0);
  proxy_->Set("fault=none");
  EXPECT_EQ(CheckRead(*source, file_, 2 << 20, 1000), "");  // still usable
}

TEST_F(RemoteDeadlines, RedirectLoopEndsAfterFiveRedirects) {
  proxy_->Set("fault=redirect_loop");
  auto start = Clock::now();
  StatusOr<std::unique_ptr<ByteSource>> source =
      OpenRemoteSource(proxy_->Url("/f.safetensors"), Short(20'000));
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kIOError);
  EXPECT_NE(source.status().message().find("more than 5 redirects"), std::string::npos)
      << source.status().message();
  EXPECT_EQ(proxy_->Requests(), 6);  // the request and five redirects
  EXPECT_LT(SecondsSince(start), 5.0);
}

TEST_F(RemoteDeadlines, EndlessErrorBodyIsCutOff) {
  RemoteOptions options = Short(30'000);  // far longer than the test may take
  options.retries = 1;
  auto source = Open(proxy_->Url("/f.safetensors"), options);
  ASSERT_NE(source, nullptr);
  proxy_->Set("fault=endless_error&status=500");
  double seconds = 0;
  Status s = TimedReadError(*source, &seconds);
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find("HTTP 500"), std::string::npos) << s.message();
  EXPECT_LT(seconds, 8.0);
  EXPECT_EQ(proxy_->Requests(), 2);
}

TEST_F(RemoteDeadlines, TrickleEndsAtTheLowSpeedLimit) {
  RemoteOptions options = Short(30'000);
  options.retries = 0;
  options.min_speed = 1024;
  options.stall_timeout = std::chrono::seconds(1);
  ExpectReadFailsWithin(options, "fault=trickle", "too slow", 0.5, 8.0);
}

TEST_F(RemoteDeadlines, TrickleWithoutASpeedLimitEndsAtTheDeadline) {
  RemoteOptions options = Short(2000);
  options.min_speed = 0;
  ExpectReadFailsWithin(options, "fault=trickle", "timeout", 1.5, 6.0);
}

TEST_F(RemoteDeadlines, ServerThatNeverAnswersEndsAtTheDeadline) {
  RemoteOptions options = Short(2000);
  options.min_speed = 0;
  ExpectReadFailsWithin(options, "fault=hang&seconds=60", "timeout", 1.5, 6.0);
  // Opening against it ends the same way.
  auto start = Clock::now();
  StatusOr<std::unique_ptr<ByteSource>> again =
      OpenRemoteSource(proxy_->Url("/f.safetensors"), options);
  EXPECT_FALSE(again.ok());
  EXPECT_LT(SecondsSince(start), 6.0);
}

TEST_F(RemoteDeadlines, ShutdownEndsBlockedReadersWithinASecond) {
  RemoteOptions options = Short(60'000);
  options.min_speed = 0;
  auto source = Open(proxy_->Url("/f.safetensors"), options);
  ASSERT_NE(source, nullptr);
  proxy_->Set("fault=hang&seconds=60");
  // Two readers of one block: one fetches it, the other waits on it.
  std::atomic<int> ended{0};
  std::vector<Status> errors(2);
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&, i] {
      std::string buf(1000, '\0');
      StatusOr<size_t> n = source->ReadAt((2 << 20) + 1000 * i, buf.size(), buf.data());
      errors[i] = n.ok() ? Status::OK() : n.status();
      ended.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(ended.load(), 0);
  auto start = Clock::now();
  source->Shutdown();
  for (auto& t : readers) t.join();
  double seconds = SecondsSince(start);
  EXPECT_LT(seconds, 2.0);
  for (const Status& e : errors) {
    EXPECT_EQ(e.code(), StatusCode::kIOError) << e.ToString();
  }
  std::string buf(10, '\0');
  start = Clock::now();
  StatusOr<size_t> later = source->ReadAt(4 << 20, buf.size(), buf.data());
  EXPECT_FALSE(later.ok());
  EXPECT_LT(SecondsSince(start), 0.5);
  source->Shutdown();  // idempotent
}

TEST_F(RemoteDeadlines, FetchThatThrowsWakesItsWaitersAndTheBlockIsRetried) {
  RemoteOptions options = Short(20'000);
  std::atomic<int> calls{0};
  options.before_fetch_for_tests = [&](uint64_t, uint64_t) {
    if (calls.fetch_add(1) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let a waiter come
      throw std::bad_alloc();
    }
  };
  auto source = Open(nginx_->Url("/f.safetensors"), options);
  ASSERT_NE(source, nullptr);
  std::vector<Status> results(2);
  std::vector<std::thread> readers;
  auto start = Clock::now();
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&, i] {
      if (i == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::string buf(1000, '\0');
      StatusOr<size_t> n = source->ReadAt((2 << 20) + 1000 * i, buf.size(), buf.data());
      results[i] = n.ok() ? Status::OK() : n.status();
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_LT(SecondsSince(start), 5.0);
  EXPECT_EQ(results[0].code(), StatusCode::kIOError) << results[0].ToString();
  EXPECT_NE(results[0].message().find("bad_alloc"), std::string::npos) << results[0].message();
  // The waiter got the same error (or, arriving after the failure, fetched afresh).
  EXPECT_TRUE(results[1].code() == StatusCode::kIOError || results[1].ok()) << results[1].ToString();
  // The block is not stuck: a later read fetches it.
  EXPECT_EQ(CheckRead(*source, file_, 2 << 20, 1000), "");
}

TEST_F(RemoteDeadlines, HttpsRedirectToHttpIsRefused) {
  RemoteOptions options = TestOptions();
  options.ca_file = testing::TestCertificate();
  StatusOr<std::unique_ptr<ByteSource>> source =
      OpenRemoteSource(nginx_->TlsUrl("/to_http/f.safetensors"), options);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kIOError);
  const std::string& m = source.status().message();
  EXPECT_NE(m.find("refusing a redirect from https to http://127.0.0.1:"), std::string::npos) << m;
  EXPECT_NE(m.find("/f.safetensors"), std::string::npos) << m;
  // An http -> http redirect of the same server is still followed.
  EXPECT_NE(Open(nginx_->Url("/to_http/f.safetensors"), TestOptions()), nullptr);
}

TEST_F(RemoteDeadlines, StatsSayWhichValidatorPinsTheObject) {
  auto pinned_by = [&](const std::string& fault) {
    proxy_->Set(fault);
    auto source = Open(proxy_->Url("/f.safetensors"), TestOptions());
    if (!source) return std::string("(open failed)");
    EXPECT_EQ(CheckRead(*source, file_, 3 << 20, 1000), "");
    return nlohmann::json::parse(source->StatsJson())["pinned_by"].get<std::string>();
  };
  EXPECT_EQ(pinned_by("fault=none"), "etag");
  EXPECT_EQ(pinned_by("fault=drop_etag"), "last_modified");
  EXPECT_EQ(pinned_by("fault=drop_validators"), "size");
}

}  // namespace
}  // namespace stfs
