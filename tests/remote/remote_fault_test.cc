// The remote source behind the project's fault proxy: every fault a server
// or network can throw ends in exact bytes (after retries) or in the right
// Status, and the source keeps serving afterwards.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "tests/remote/remote_test_util.h"

namespace stfs {
namespace {

using testing::CheckRead;
using testing::FaultProxy;
using testing::FileWithTensorSizes;
using testing::LoggedRequest;

class RemoteFaults : public testing::NginxTest {
 protected:
  void SetUp() override {
    NginxTest::SetUp();
    if (HasFatalFailure()) return;
    std::string error;
    proxy_ = FaultProxy::Start(nginx_->Url(""), &error);
    ASSERT_NE(proxy_, nullptr) << error;
    file_ = FileWithTensorSizes({(5 << 20) + 3, 3 << 20});
    root_.Write("f.safetensors", file_);
  }

  // Opens f.safetensors through the proxy.
  std::unique_ptr<ByteSource> OpenViaProxy(const RemoteOptions& options,
                                           const std::string& path = "/f.safetensors") {
    return Open(proxy_->Url(path), options);
  }

  // Reads at `offset` expecting an error; returns its status.
  Status ReadError(const ByteSource& source, uint64_t offset, size_t length = 1000) {
    std::string buf(length, '\0');
    StatusOr<size_t> n = source.ReadAt(offset, length, buf.data());
    EXPECT_FALSE(n.ok()) << "read at " << offset << " succeeded";
    return n.ok() ? Status::OK() : n.status();
  }

  nlohmann::json ProxyStats() const { return nlohmann::json::parse(proxy_->StatsJson()); }

  // Without read-ahead, requests go one at a time, so with every=k a fetch
  // that is reset is always retried on an unfaulted request. (With parallel
  // read-ahead a fetch's attempts can all land on faulted requests and run out
  // of retries: that case is ManyReadersThroughIntermittentFaultsGetExactBytes.)
  static RemoteOptions OneRequestAtATime() {
    RemoteOptions o = TestOptions();
    o.readahead = 0;
    return o;
  }

  std::unique_ptr<FaultProxy> proxy_;
  std::string file_;
};

nlohmann::json Stats(const ByteSource& source) { return nlohmann::json::parse(source.StatsJson()); }

TEST_F(RemoteFaults, EveryThird503IsRetriedAndBytesAreExact) {
  proxy_->Set("fault=status&status=503&every=3");
  auto source = OpenViaProxy(OneRequestAtATime());
  ASSERT_NE(source, nullptr);
  for (uint64_t off = 0; off < file_.size(); off += 700000) {
    ASSERT_EQ(CheckRead(*source, file_, off, 300000), "");
  }
  EXPECT_GT(Stats(*source)["retries"].get<uint64_t>(), 0u);
  EXPECT_GT(ProxyStats()["faulted"].get<int>(), 0);
}

TEST_F(RemoteFaults, Persistent503EndsInIOErrorAndTheSourceStaysUsable) {
  auto source = OpenViaProxy(TestOptions());
  ASSERT_NE(source, nullptr);
  ASSERT_EQ(CheckRead(*source, file_, 1 << 20, 1000), "");
  proxy_->Set("fault=status&status=503");
  Status s = ReadError(*source, 3 << 20);
  EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
  EXPECT_NE(s.message().find("503"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("4 attempts"), std::string::npos) << s.message();
  EXPECT_EQ(proxy_->Requests(), 4);  // 1 + retries=3
  // Cached bytes still come back; the failure itself is not cached.
  EXPECT_EQ(CheckRead(*source, file_, (1 << 20) + 10, 1000), "");
  proxy_->Set("fault=none");
  EXPECT_EQ(CheckRead(*source, file_, 3 << 20, 1000), "");
  EXPECT_EQ(Stats(*source)["failures"].get<uint64_t>(), 1u);
}

TEST_F(RemoteFaults, ConnectionResetsAreRetried) {
  proxy_->Set("fault=reset&every=2");
  auto source = OpenViaProxy(OneRequestAtATime());
  ASSERT_NE(source, nullptr);
  for (uint64_t off = 0; off < file_.size(); off += 1 << 20) {
    ASSERT_EQ(CheckRead(*source, file_, off, 1 << 20), "");
  }
  // A reset before any byte of a reused connection may be retried by curl
  // itself (a fresh connect) or by us; either way the proxy reset requests
  // and every byte came back right.
  EXPECT_GT(ProxyStats()["faulted"].get<int>(), 0);
}

TEST_F(RemoteFaults, ResetInTheMiddleOfABodyIsRetried) {
  auto source = OpenViaProxy(OneRequestAtATime());
  ASSERT_NE(source, nullptr);
  proxy_->Set("fault=reset_mid&every=2");
  for (uint64_t off = 0; off < file_.size(); off += 1 << 20) {
    ASSERT_EQ(CheckRead(*source, file_, off, 1 << 20), "");
  }
  EXPECT_GT(ProxyStats()["faulted"].get<int>(), 0);
  EXPECT_GT(Stats(*source)["retries"].get<uint64_t>(), 0u);
}

TEST_F(RemoteFaults, StalledTransferIsAbortedAndRetried) {
  auto source = OpenViaProxy(TestOptions());  // stall_timeout 1 s
  ASSERT_NE(source, nullptr);
  proxy_->Set("fault=stall&seconds=20&limit=1");
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(CheckRead(*source, file_, 2 << 20, 5000), "");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // libcurl judges speed over its last ~5 s of samples, so a transfer that
  // stops after a fast burst is caught about 5 s + stall_timeout later.
  EXPECT_LT(seconds, 15.0);
  EXPECT_EQ(Stats(*source)["retries"].get<uint64_t>(), 1u);
}

TEST_F(RemoteFaults, TransferThatAlwaysStallsEndsInIOError) {
  RemoteOptions options = TestOptions();
  options.retries = 1;
  auto source = OpenViaProxy(options);
  ASSERT_NE(source, nullptr);
  proxy_->Set("fault=stall&seconds=20");
  Status s = ReadError(*source, 2 << 20);
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find("too slow"), std::string::npos) << s.message();
}

TEST_F(RemoteFaults, ServerIgnoringRangeIsAnErrorAndNotRetried) {
  auto source = OpenViaProxy(TestOptions());
  ASSERT_NE(source, nullptr);
  proxy_->Set("fault=ignore_range");
  Status s = ReadError(*source, 2 << 20);
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find("server ignores Range requests"), std::string::npos) << s.message();
  EXPECT_EQ(proxy_->Requests(), 1);
  // Opening fails the same way: the object is larger than the first request.
  StatusOr<std::unique_ptr<ByteSource>> again =
      OpenRemoteSource(proxy_->Url("/f.safetensors"), TestOptions());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("server ignores Range requests"), std::string::npos);
}

TEST_F(RemoteFaults, WholeSmallObjectIn200IsAccepted) {
  std::string small = FileWithTensorSizes({5000, 20});
  root_.Write("small.safetensors", small);
  proxy_->Set("fault=ignore_range");
  auto source = OpenViaProxy(TestOptions(), "/small.safetensors");
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->Size(), small.size());
  EXPECT_EQ(CheckRead(*source, small, 0, small.size()), "");
  EXPECT_EQ(ProxyStats()["statuses"][0].get<int>(), 200);
}

TEST_F(RemoteFaults, WrongContentRangeIsAnError) {
  auto source = OpenViaProxy(TestOptions());
  ASSERT_NE(source, nullptr);
  proxy_->Set("fault=wrong_range");
  Status s = ReadError(*source, 2 << 20);
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find("Content-Range"), std::string::npos) << s.message();
  // And at open.
  StatusOr<std::unique_ptr<ByteSource>> again =
      OpenRemoteSource(proxy_->Url("/f.safetensors"), TestOptions());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("Content-Range"), std::string::npos);
}

TEST_F(RemoteFaults, RangeBodiesStfsCannotUseAreErrorsAtOpenAndOnRead) {
  struct Case { const char* fault; const char* needle; };
  for (const Case& c : {Case{"drop_range", "unusable Content-Range"}, Case{"gzip_label", "Content-Encoding 'gzip'"}}) {
    SCOPED_TRACE(c.fault);
    proxy_->Set("fault=none");
    auto source = OpenViaProxy(OneRequestAtATime());
    ASSERT_NE(source, nullptr);
    proxy_->Set(std::string("fault=") + c.fault);
    Status s = ReadError(*source, 2 << 20);
    EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
    StatusOr<std::unique_ptr<ByteSource>> again = OpenRemoteSource(proxy_->Url("/f.safetensors"), TestOptions());
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.status().message().find(c.needle), std::string::npos) << again.status().message();
  }
}

TEST_F(RemoteFaults, ShortBodyIsRetriedThenFails) {
  auto source = OpenViaProxy(TestOptions());
  ASSERT_NE(source, nullptr);
  proxy_->Set("fault=short_body&limit=2");
  ASSERT_EQ(CheckRead(*source, file_, 2 << 20, 5000), "");
  EXPECT_EQ(Stats(*source)["retries"].get<uint64_t>(), 2u);
  proxy_->Set("fault=short_body");
  Status s = ReadError(*source, 4 << 20);
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_EQ(proxy_->Requests(), 4);
}

TEST_F(RemoteFaults, ChangedETagIsStale) {
  auto source = OpenViaProxy(TestOptions());
  ASSERT_NE(source, nullptr);
  proxy_->Set("fault=etag&etag=%22another-version%22");
  Status s = ReadError(*source, 2 << 20);
  EXPECT_EQ(s.code(), StatusCode::kStale) << s.ToString();
  EXPECT_NE(s.message().find("another-version"), std::string::npos) << s.message();
  proxy_->Set("fault=none");
  // Stale sticks: bytes of the new version are never mixed in.
  EXPECT_EQ(ReadError(*source, 4 << 20).code(), StatusCode::kStale);
  EXPECT_EQ(proxy_->Requests(), 0);
}

// Replaces f.safetensors with another version (other bytes, later mtime).
void ReplaceServedFile(const testing::TempDir& root, const std::string& bytes) {
  std::string tmp = root.Write("f.safetensors.new", bytes);
  timespec times[2] = {{0, UTIME_OMIT}, {time(nullptr) + 3600, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, tmp.c_str(), times, 0), 0);
  ASSERT_EQ(std::rename(tmp.c_str(), (root.path() + "/f.safetensors").c_str()), 0);
}

TEST_F(RemoteFaults, ReplacementIsCaughtEvenWhenTheServerIgnoresIfMatch) {
  auto source = OpenViaProxy(TestOptions());
  ASSERT_NE(source, nullptr);
  ASSERT_EQ(CheckRead(*source, file_, 1 << 20, 1000), "");
  proxy_->Set("fault=strip_preconditions");
  ReplaceServedFile(root_, FileWithTensorSizes({(5 << 20) + 3, 3 << 20}));
  Status s = ReadError(*source, 4 << 20);
  EXPECT_EQ(s.code(), StatusCode::kStale) << s.ToString();
  EXPECT_EQ(ProxyStats()["statuses"][0].get<int>(), 206);  // caught by the ETag, not a 412
}

TEST_F(RemoteFaults, WithoutETagLastModifiedGuardsTheObject) {
  proxy_->Set("fault=drop_etag");
  auto source = OpenViaProxy(TestOptions());
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(Stats(*source)["etag"].get<std::string>(), "");
  ASSERT_EQ(CheckRead(*source, file_, 1 << 20, 1000), "");
  ReplaceServedFile(root_, FileWithTensorSizes({(5 << 20) + 3, 3 << 20}));
  proxy_->Set("fault=drop_etag");
  Status s = ReadError(*source, 4 << 20);
  EXPECT_EQ(s.code(), StatusCode::kStale) << s.ToString();
  EXPECT_EQ(ProxyStats()["statuses"][0].get<int>(), 412);  // If-Unmodified-Since was sent
}

TEST_F(RemoteFaults, ExpiredSignedRedirectIsResolvedAgainOnce) {
  auto source = OpenViaProxy(TestOptions(), "/signed/f.safetensors");
  ASSERT_NE(source, nullptr);
  ASSERT_EQ(CheckRead(*source, file_, 1 << 20, 1000), "");
  proxy_->Set("fault=none");
  proxy_->Bump();  // the signed URL we hold is now refused with 403
  ASSERT_EQ(CheckRead(*source, file_, 3 << 20, 1000), "");
  nlohmann::json p = ProxyStats();
  std::vector<int> statuses = p["statuses"].get<std::vector<int>>();
  EXPECT_EQ(statuses, (std::vector<int>{403, 302, 206})) << p.dump();
  EXPECT_EQ(Stats(*source)["resolves"].get<uint64_t>(), 1u);
  ASSERT_EQ(CheckRead(*source, file_, 4 << 20, 1000), "");
  EXPECT_EQ(proxy_->Requests(), 4);  // the new target is used directly
}

TEST_F(RemoteFaults, RedirectToAnotherOriginGetsNoExtraHeaders) {
  proxy_->Set("target=" + nginx_->Url(""));
  RemoteOptions options = TestOptions();
  options.headers = {"Authorization: Bearer sekrit", "X-Test: yes"};
  auto source = OpenViaProxy(options, "/xredirect/f.safetensors");
  ASSERT_NE(source, nullptr);
  ASSERT_EQ(CheckRead(*source, file_, 2 << 20, 1000), "");
  std::vector<LoggedRequest> log = Logged();
  ASSERT_FALSE(log.empty());
  for (const LoggedRequest& r : log) {
    EXPECT_EQ(r.authorization, "-") << r.uri;
    EXPECT_EQ(r.x_test, "-") << r.uri;
  }
}

TEST_F(RemoteFaults, ManyReadersThroughIntermittentFaultsGetExactBytes) {
  proxy_->Set("fault=reset_mid&every=4");
  RemoteOptions options = TestOptions();
  options.retries = 6;
  auto source = OpenViaProxy(options);
  ASSERT_NE(source, nullptr);
  std::vector<std::thread> readers;
  for (int t = 0; t < 6; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(t * 7919 + std::random_device{}());
      for (int i = 0; i < 8; ++i) {
        uint64_t off = rng() % file_.size();
        std::string err = CheckRead(*source, file_, off, 1 + rng() % 400000);
        if (!err.empty()) {
          ADD_FAILURE() << err;
          return;
        }
      }
    });
  }
  for (auto& r : readers) r.join();
}

}  // namespace
}  // namespace stfs
