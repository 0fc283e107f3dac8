// The refreshing S3CredentialProvider with a fake fetch: refresh ahead of
// expiry, a failed refresh, keys rejected as expired, and many readers while
// keys turn over (also run under ThreadSanitizer: LABELS tsan).
#include "core/remote/s3_credential_provider.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

namespace stfs {
namespace {

using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

void ExpectOneLineWithout(const Status& status, const std::string& secret) {
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find(secret), std::string::npos) << status.message();
}

// A fetch that hands out key N on its N-th call, expiring `lifetime` later,
// or fails while `failing` is set.
struct FakeSource {
  std::atomic<int> calls{0};
  std::atomic<bool> failing{false};
  std::chrono::milliseconds lifetime{2'000};
  StatusOr<S3Credentials> Fetch() {
    int n = ++calls;
    if (failing.load()) return Status::IOError("fake source (HTTP 500)");
    return S3Credentials::Keys("KEY" + std::to_string(n), "s3cr3t-" + std::to_string(n), "", "fake source")
        .WithExpiration(std::chrono::system_clock::now() + lifetime);
  }
};

std::string CurrentKey(S3CredentialProvider& provider) {
  StatusOr<S3CredentialProvider::Keys> keys = provider.Current(Clock::now() + seconds(10));
  return keys.ok() ? (*keys)->access_key_id() : keys.status().message();
}

TEST(S3CredentialProvider, RefreshesBeforeExpiryAndReadersSeeTheNewKeys) {
  FakeSource source;
  S3CredentialProvider provider(*source.Fetch(), [&](const std::atomic<bool>*) { return source.Fetch(); });
  EXPECT_EQ(CurrentKey(provider), "KEY1");
  std::this_thread::sleep_for(std::chrono::milliseconds(2'500));  // past KEY1's expiry
  std::string key = CurrentKey(provider);
  EXPECT_NE(key, "KEY1");
  EXPECT_EQ(key.rfind("KEY", 0), 0u) << key;
}

TEST(S3CredentialProvider, AFailedRefreshKeepsTheOldKeysUntilTheyExpireThenFailsInOneLine) {
  FakeSource source;
  source.lifetime = std::chrono::milliseconds(3'000);
  S3CredentialProvider provider(*source.Fetch(), [&](const std::atomic<bool>*) { return source.Fetch(); });
  source.failing = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(1'700));  // refresh due (half the lifetime)
  EXPECT_EQ(CurrentKey(provider), "KEY1");  // starts a refresh that fails; the old keys still work
  std::this_thread::sleep_for(std::chrono::milliseconds(2'000));  // past the expiry
  const auto started = Clock::now();
  StatusOr<S3CredentialProvider::Keys> keys = provider.Current(Clock::now() + seconds(10));
  EXPECT_LT(Clock::now() - started, seconds(10));
  ASSERT_FALSE(keys.ok());
  EXPECT_EQ(keys.status().sys_errno(), EACCES);
  EXPECT_NE(keys.status().message().find("refreshing failed: fake source (HTTP 500)"), std::string::npos)
      << keys.status().message();
  ExpectOneLineWithout(keys.status(), "s3cr3t");

  source.failing = false;
  std::this_thread::sleep_for(std::chrono::milliseconds(1'100));  // after the 1 s backoff
  EXPECT_EQ(CurrentKey(provider).rfind("KEY", 0), 0u);
}

TEST(S3CredentialProvider, RejectedKeysAreFetchedAgainOnce) {
  FakeSource source;
  source.lifetime = std::chrono::hours(1);
  S3CredentialProvider provider(*source.Fetch(), [&](const std::atomic<bool>*) { return source.Fetch(); });
  StatusOr<S3CredentialProvider::Keys> first = provider.Current(Clock::now());
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(provider.Rejected(*first));
  EXPECT_EQ(CurrentKey(provider), "KEY2");
  EXPECT_TRUE(provider.Rejected(*first));  // stale report: KEY2 stays
  EXPECT_EQ(CurrentKey(provider), "KEY2");
  EXPECT_EQ(source.calls.load(), 2);

  S3CredentialProvider fixed(S3Credentials::Keys("K", "S", "", "test"));
  StatusOr<S3CredentialProvider::Keys> keys = fixed.Current(Clock::now());
  ASSERT_TRUE(keys.ok());
  EXPECT_FALSE(fixed.Rejected(*keys));
}

TEST(S3CredentialProvider, ManyReadersWhileKeysTurnOverAlwaysGetUsableKeys) {
  FakeSource source;
  source.lifetime = std::chrono::milliseconds(1'000);
  S3CredentialProvider provider(*source.Fetch(), [&](const std::atomic<bool>*) { return source.Fetch(); });
  std::atomic<int> failures{0};
  std::vector<std::thread> readers;
  const auto until = Clock::now() + std::chrono::milliseconds(2'500);
  for (int r = 0; r < 6; ++r) {
    readers.emplace_back([&, r] {
      for (int i = 0; Clock::now() < until; ++i) {
        StatusOr<S3CredentialProvider::Keys> keys = provider.Current(Clock::now() + seconds(10));
        if (!keys.ok() || (*keys)->access_key_id().rfind("KEY", 0) != 0) {
          ++failures;
          continue;
        }
        if ((r + i) % 50 == 0) provider.Rejected(*keys);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(source.calls.load(), 3);  // 2.5 s of 1 s keys: refreshed again and again
}

}  // namespace
}  // namespace stfs
