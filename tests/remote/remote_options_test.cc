// The remote -o options, environment, hf:// mapping, URL redaction and
// Content-Range parsing: pure functions, no server.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "core/remote/http_client.h"
#include "core/remote/remote_location.h"
#include "core/remote/remote_source.h"
#include "tests/test_files.h"

namespace stfs {
namespace {

TEST(RemoteOptions, RecognisesRemoteLocations) {
  EXPECT_TRUE(IsRemoteLocation("http://h/x.safetensors"));
  EXPECT_TRUE(IsRemoteLocation("HTTPS://h/x"));
  EXPECT_TRUE(IsRemoteLocation("hf://org/repo/model.safetensors"));
  EXPECT_FALSE(IsRemoteLocation("/tmp/model.safetensors"));
  EXPECT_FALSE(IsRemoteLocation("model.safetensors"));
  EXPECT_FALSE(IsRemoteLocation("ftp://h/x"));
  EXPECT_FALSE(IsRemoteLocation("http:/h"));
}

TEST(RemoteOptions, ParsesSizesCountsAndDurations) {
  RemoteOptions o;
  EXPECT_TRUE(*ApplyRemoteOption("cache_size=512M", &o));
  EXPECT_EQ(o.cache_size, 512ull << 20);
  EXPECT_TRUE(*ApplyRemoteOption("cache_size=2GiB", &o));
  EXPECT_EQ(o.cache_size, 2ull << 30);
  EXPECT_TRUE(*ApplyRemoteOption("block_size=64K", &o));
  EXPECT_EQ(o.block_size, 64ull << 10);
  EXPECT_TRUE(*ApplyRemoteOption("block_size=1048576", &o));
  EXPECT_EQ(o.block_size, 1ull << 20);
  EXPECT_EQ(o.request_cost, 256ull << 10);
  EXPECT_TRUE(*ApplyRemoteOption("request_cost=0", &o));
  EXPECT_EQ(o.request_cost, 0u);
  EXPECT_TRUE(*ApplyRemoteOption("request_cost=1M", &o));
  EXPECT_EQ(o.request_cost, 1ull << 20);
  EXPECT_TRUE(*ApplyRemoteOption("readahead=0", &o));
  EXPECT_EQ(o.readahead, 0u);
  EXPECT_TRUE(*ApplyRemoteOption("retries=7", &o));
  EXPECT_EQ(o.retries, 7);
  EXPECT_TRUE(*ApplyRemoteOption("connections=16", &o));
  EXPECT_EQ(o.connections, 16);
  EXPECT_TRUE(*ApplyRemoteOption("stall_timeout=1500ms", &o));
  EXPECT_EQ(o.stall_timeout.count(), 1500);
  EXPECT_TRUE(*ApplyRemoteOption("connect_timeout=3", &o));
  EXPECT_EQ(o.connect_timeout.count(), 3000);
  EXPECT_TRUE(*ApplyRemoteOption("retry_delay=2m", &o));
  EXPECT_EQ(o.retry_delay.count(), 120000);
  EXPECT_TRUE(*ApplyRemoteOption("cafile=/etc/ca.pem", &o));
  EXPECT_EQ(o.ca_file, "/etc/ca.pem");
  EXPECT_TRUE(*ApplyRemoteOption("hf_endpoint=http://127.0.0.1:8080", &o));
  EXPECT_EQ(o.hub_endpoint, "http://127.0.0.1:8080");
}

TEST(RemoteOptions, LeavesOtherOptionsAlone) {
  RemoteOptions o;
  for (const char* opt : {"allow_other", "max_read=1048576", "ro", "default_permissions",
                          "entry_timeout=5", "fsname=x"}) {
    StatusOr<bool> r = ApplyRemoteOption(opt, &o);
    ASSERT_TRUE(r.ok()) << opt;
    EXPECT_FALSE(*r) << opt;
  }
}

TEST(RemoteOptions, RejectsMalformedValues) {
  RemoteOptions o;
  for (const char* opt : {"cache_size=", "cache_size", "cache_size=12Q", "cache_size=-1",
                          "block_size=1K", "block_size=1G", "request_cost=x", "retries=x", "retries=1000",
                          "connections=0", "stall_timeout=0", "stall_timeout=fast",
                          "hf_endpoint=ftp://x", "cafile=", "cache_size=99999999999999999999T"}) {
    StatusOr<bool> r = ApplyRemoteOption(opt, &o);
    EXPECT_FALSE(r.ok()) << opt;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << opt;
    }
  }
}

TEST(RemoteOptions, HeaderErrorsNeverEchoTheValue) {
  RemoteOptions o;
  StatusOr<bool> r = ApplyRemoteOption("header=Authorization Bearer sekrit-token", &o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("sekrit"), std::string::npos) << r.status().message();
  r = ApplyRemoteOption("header=X-A: b\r\nInjected: yes", &o);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(o.headers.empty());
}

TEST(RemoteOptions, LaterHeaderOfTheSameNameReplacesEarlier) {
  RemoteOptions o;
  ASSERT_TRUE(*ApplyRemoteOption("header=Authorization: Bearer one", &o));
  ASSERT_TRUE(*ApplyRemoteOption("header=X-Other: 1", &o));
  ASSERT_TRUE(*ApplyRemoteOption("header=authorization: Bearer two", &o));
  ASSERT_EQ(o.headers.size(), 2u);
  EXPECT_EQ(o.headers[0], "X-Other: 1");
  EXPECT_EQ(o.headers[1], "authorization: Bearer two");
}

TEST(RemoteOptions, HelpListsEveryOption) {
  std::string help = RemoteOptionsHelp();
  for (const char* name :
       {"cache_size=", "block_size=", "readahead=", "connections=", "request_cost=", "retries=", "retry_delay=",
        "stall_timeout=", "connect_timeout=", "timeout=", "max_redirects=", "header=", "cafile=",
        "hf_endpoint=", "HF_TOKEN", "STFS_HTTP_HEADER"}) {
    EXPECT_NE(help.find(name), std::string::npos) << name;
  }
}

// Sets an environment variable for the scope of one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    if (old) old_ = old;
    had_ = old != nullptr;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(RemoteOptions, EnvironmentSuppliesTokenEndpointAndHeaders) {
  ScopedEnv token("HF_TOKEN", "hf_abc");
  ScopedEnv endpoint("HF_ENDPOINT", "http://127.0.0.1:9/hub");
  ScopedEnv headers("STFS_HTTP_HEADER", "X-One: 1\nX-Two: 2\n\nbroken header\n");
  RemoteOptions o;
  ApplyRemoteEnvironment(&o);
  EXPECT_EQ(o.hub_token, "hf_abc");
  EXPECT_EQ(o.hub_endpoint, "http://127.0.0.1:9/hub");
  EXPECT_EQ(o.headers, (std::vector<std::string>{"X-One: 1", "X-Two: 2"}));
}

TEST(RemoteOptions, TokenFileIsUsedWithoutHfToken) {
  testing::TempDir dir;
  std::string path = dir.Write("token", "hf_from_file\n");
  ScopedEnv token("HF_TOKEN", nullptr);
  ScopedEnv legacy("HUGGING_FACE_HUB_TOKEN", nullptr);
  ScopedEnv file("HF_TOKEN_PATH", path.c_str());
  RemoteOptions o;
  ApplyRemoteEnvironment(&o);
  EXPECT_EQ(o.hub_token, "hf_from_file");
}

TEST(HubLocation, MapsToResolveUrl) {
  StatusOr<HubLocation> hub = ParseHubLocation("hf://org/repo/model.safetensors");
  ASSERT_TRUE(hub.ok()) << hub.status().ToString();
  EXPECT_EQ(hub->repo, "org/repo");
  EXPECT_EQ(hub->file, "model.safetensors");
  EXPECT_EQ(hub->revision, "main");
  EXPECT_EQ(HubResolveUrl(*hub, "https://huggingface.co"),
            "https://huggingface.co/org/repo/resolve/main/model.safetensors");
  EXPECT_EQ(HubResolveUrl(*hub, "http://127.0.0.1:8080/"),
            "http://127.0.0.1:8080/org/repo/resolve/main/model.safetensors");
}

TEST(HubLocation, KeepsSubdirectoriesAndEncodesRevision) {
  StatusOr<HubLocation> hub = ParseHubLocation(
      "hf://meta-llama/Llama-3.1-8B/original/consolidated.00.safetensors@refs/pr/12");
  ASSERT_TRUE(hub.ok()) << hub.status().ToString();
  EXPECT_EQ(hub->file, "original/consolidated.00.safetensors");
  EXPECT_EQ(hub->revision, "refs/pr/12");
  EXPECT_EQ(HubResolveUrl(*hub, "https://hf.co"),
            "https://hf.co/meta-llama/Llama-3.1-8B/resolve/refs%2Fpr%2F12/original/"
            "consolidated.00.safetensors");
  hub = ParseHubLocation("hf://org/repo/dir with space/m+1.safetensors@0123abcd");
  ASSERT_TRUE(hub.ok());
  EXPECT_EQ(HubResolveUrl(*hub, "https://hf.co"),
            "https://hf.co/org/repo/resolve/0123abcd/dir%20with%20space/m%2B1.safetensors");
}

TEST(HubLocation, SupportsDatasetsAndSpaces) {
  StatusOr<HubLocation> hub = ParseHubLocation("hf://datasets/org/data/shard.safetensors@v1");
  ASSERT_TRUE(hub.ok());
  EXPECT_EQ(HubResolveUrl(*hub, "https://huggingface.co"),
            "https://huggingface.co/datasets/org/data/resolve/v1/shard.safetensors");
}

TEST(HubLocation, RefusesIncompleteLocations) {
  for (const char* bad :
       {"hf://", "hf://org", "hf://org/repo", "hf://org/repo/", "hf:///repo/f", "hf://org//f",
        "hf://org/repo/f@", "http://org/repo/f", "hf://org/repo/dir/"}) {
    StatusOr<HubLocation> hub = ParseHubLocation(bad);
    EXPECT_FALSE(hub.ok()) << bad;
    if (!hub.ok()) {
      EXPECT_EQ(hub.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(RedactUrl, DropsCredentialsAndQuery) {
  EXPECT_EQ(RedactUrl("https://user:pw@host:8443/a/b.safetensors?X-Amz-Signature=abc#frag"),
            "https://host:8443/a/b.safetensors");
  EXPECT_EQ(RedactUrl("http://host/p"), "http://host/p");
  EXPECT_EQ(RedactUrl("hf://org/repo/f.safetensors@main"), "hf://org/repo/f.safetensors@main");
  EXPECT_EQ(RedactUrl("http://tok@host/x@y"), "http://host/x@y");
}

TEST(UrlOrigin, NormalisesSchemeHostAndPort) {
  EXPECT_EQ(UrlOrigin("http://Example.COM/x"), "http://example.com:80");
  EXPECT_EQ(UrlOrigin("https://example.com/x"), "https://example.com:443");
  EXPECT_EQ(UrlOrigin("https://u:p@example.com:8443?q"), "https://example.com:8443");
  EXPECT_EQ(UrlOrigin("http://[::1]:81/x"), "http://[::1]:81");
  EXPECT_NE(UrlOrigin("http://a.com/x"), UrlOrigin("http://a.com.evil.net/x"));
  EXPECT_EQ(UrlOrigin("file:///etc/passwd"), "");
}

TEST(ContentRange, ParsesAndRefusesMalformedValues) {
  std::optional<ContentRange> r = ParseContentRange("bytes 0-99/1000");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, 0u);
  EXPECT_EQ(r->last, 99u);
  EXPECT_EQ(r->total, 1000u);
  r = ParseContentRange("bytes */0");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->unsatisfied);
  EXPECT_EQ(r->total, 0u);
  r = ParseContentRange("bytes 5-9/*");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->total.has_value());
  for (const char* bad :
       {"", "bytes", "bytes 9-5/10", "bytes 0-10/10", "items 0-1/2", "bytes 0-1", "bytes -1-2/3",
        "bytes 0-1/x", "bytes */*", "bytes 0-99999999999999999999/1"}) {
    EXPECT_FALSE(ParseContentRange(bad)) << bad;
  }
}

TEST(CheckRangeBody, RefusesEncodedBodiesAndUnusableContentRanges) {
  HttpResponse r;
  r.status = 206;
  r.content_range = ParseContentRange("bytes 0-9/100");
  EXPECT_TRUE(CheckRangeBody(r, "u", "bytes 0-9").ok());
  r.content_encoding = "IDENTITY";
  EXPECT_TRUE(CheckRangeBody(r, "u", "bytes 0-9").ok());
  r.content_encoding = "gzip";
  EXPECT_EQ(CheckRangeBody(r, "u", "bytes 0-9").code(), StatusCode::kIOError);
  r.content_encoding.clear();
  for (const char* unusable : {"bytes 0-9/*", "bytes */100"}) {
    r.content_range = ParseContentRange(unusable);
    EXPECT_EQ(CheckRangeBody(r, "u", "bytes 0-9").code(), StatusCode::kIOError) << unusable;
  }
  r.content_range.reset();
  EXPECT_EQ(CheckRangeBody(r, "u", "bytes 0-9").code(), StatusCode::kIOError);
  r.status = 200;  // a whole body needs no Content-Range
  EXPECT_TRUE(CheckRangeBody(r, "u", "bytes 0-9").ok());
}

}  // namespace
}  // namespace stfs
