// s3:// against a real S3-compatible server (s3rver): SigV4-signed Range GETs
// through libcurl, refusals of unknown keys, and real ListObjectsV2 paging.
#include <gtest/gtest.h>

#include <random>

#include "core/header.h"
#include "core/remote/remote_source.h"
#include "core/remote/s3_list.h"
#include "core/remote/s3_signing.h"
#include "core/remote/s3_source.h"
#include "tests/remote/remote_test_util.h"
#include "tests/remote/s3_server.h"

namespace stfs::testing {
namespace {

std::string RandomBytes(size_t n) {
  std::mt19937_64 rng(std::random_device{}());
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

class S3rverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string skip, error;
    server_ = S3rverServer::Start(&skip, &error);
    if (server_ == nullptr && !skip.empty()) GTEST_SKIP() << skip;
    ASSERT_NE(server_, nullptr) << error;
    server_->CreateBucket("models");
  }

  std::string Url(const std::string& key) const { return *S3ObjectUrl(server_->endpoint(), "models", key); }


  // Quick retries and 1 MiB blocks, the endpoint of this s3rver.
  RemoteOptions Options() const {
    RemoteOptions o;
    o.block_size = 1 << 20;
    o.cache_size = 16 << 20;
    o.readahead = 4 << 20;
    o.retries = 2;
    o.retry_delay = std::chrono::milliseconds(10);
    o.retry_max_delay = std::chrono::milliseconds(50);
    o.timeout = std::chrono::milliseconds(20'000);
    o.s3 = server_->endpoint();
    return o;
  }

  std::unique_ptr<S3rverServer> server_;
};

TEST_F(S3rverTest, SignedRangeGetAnswers206WithContentRangeAndEtag) {
  const std::string key = "dir/a b+c=d&é.safetensors";  // every byte class the encoder treats
  const std::string bytes = RandomBytes(300'000);
  server_->Put("models", key, bytes);

  S3TestResponse r = S3Get(Url(key), server_->endpoint(), S3rverServer::Credentials(), true, 1000, 1999);
  EXPECT_EQ(r.status, 206) << r.body;
  EXPECT_EQ(r.content_range, "bytes 1000-1999/300000");
  EXPECT_EQ(r.body, bytes.substr(1000, 1000));
  ASSERT_GE(r.etag.size(), 34u);  // "MD5 in hex", quotes included
  EXPECT_EQ(r.etag.front(), '"');

  S3TestResponse tail = S3Get(Url(key), server_->endpoint(), S3rverServer::Credentials(), true, 299990, 299999);
  EXPECT_EQ(tail.status, 206);
  EXPECT_EQ(tail.body, bytes.substr(299990));
  EXPECT_EQ(tail.etag, r.etag);
}

TEST_F(S3rverTest, UnknownAccessKeyIsRefusedWithOneLineNamingTheCredentials) {
  server_->Put("models", "m.safetensors", RandomBytes(100));
  S3Credentials stranger = S3Credentials::Keys("NOSUCHKEY", "very-secret-value", "", "environment");
  S3TestResponse r = S3Get(Url("m.safetensors"), server_->endpoint(), stranger, true, 0, 9);
  ASSERT_EQ(r.status, 403);
  Status status = S3HttpError("s3://models/m.safetensors", r.status, r.body, stranger);
  const std::string& line = status.message();
  EXPECT_EQ(status.sys_errno(), EACCES);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find("HTTP 403"), std::string::npos) << line;
  EXPECT_NE(line.find("check the credentials"), std::string::npos) << line;
  EXPECT_NE(line.find("NOSUCHKEY"), std::string::npos) << line;
  EXPECT_EQ(line.find("very-secret"), std::string::npos) << line;

  // The same request with the known key passes: the refusal came from the key.
  EXPECT_EQ(S3Get(Url("m.safetensors"), server_->endpoint(), S3rverServer::Credentials(), true, 0, 9).status,
            206);
}

TEST_F(S3rverTest, MissingObjectIsNotFound) {
  S3TestResponse r = S3Get(Url("absent.safetensors"), server_->endpoint(), S3rverServer::Credentials(), true, 0, 9);
  ASSERT_EQ(r.status, 404);
  Status status = S3HttpError("s3://models/absent.safetensors", r.status, r.body, S3rverServer::Credentials());
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  }

TEST_F(S3rverTest, ListsAPrefixPageByPageAndChoosesItsShards) {
  for (const char* key : {"m/b.safetensors", "m/a.safetensors", "m/c d.safetensors", "m/notes.txt",
                          "m/sub/x.safetensors", "m/sub/model.safetensors.index.json", "other.safetensors"}) {
    server_->Put("models", key, RandomBytes(10));
  }
  int pages = 0;
  S3PageGetter get = [&](const std::string& url) -> StatusOr<std::string> {
    ++pages;
    S3TestResponse r = S3Get(url, server_->endpoint(), S3rverServer::Credentials());
    if (r.status != 200) return S3HttpError(url, r.status, r.body, S3rverServer::Credentials());
    return r.body;
  };
  StatusOr<std::vector<S3Object>> objects =
      ListS3Prefix(server_->endpoint(), "models", "m/", get, S3ListLimits{1000, 2});
  ASSERT_TRUE(objects.ok()) << objects.status().ToString();
  std::vector<std::string> keys;
  for (const S3Object& o : *objects) {
    keys.push_back(o.key);
    EXPECT_EQ(o.size, 10u) << o.key;
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"m/a.safetensors", "m/b.safetensors", "m/c d.safetensors",
                                            "m/notes.txt"}));
  EXPECT_GE(pages, 2);  // page_size 2 over 4 objects and 1 sub-prefix
  StatusOr<S3PrefixContents> contents = ChooseS3PrefixContents("m/", *objects);
  ASSERT_TRUE(contents.ok()) << contents.status().ToString();
  EXPECT_EQ(contents->shard_names,
            (std::vector<std::string>{"a.safetensors", "b.safetensors", "c d.safetensors"}));

  StatusOr<std::vector<S3Object>> sub = ListS3Prefix(server_->endpoint(), "models", "m/sub/", get);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  StatusOr<S3PrefixContents> sub_contents = ChooseS3PrefixContents("m/sub/", *sub);
  ASSERT_TRUE(sub_contents.ok());
  EXPECT_EQ(sub_contents->index_name, "model.safetensors.index.json");
}

TEST_F(S3rverTest, RemoteSourceReadsAnS3ObjectByteForByte) {
  UseS3Keys("S3RVER", "S3RVER");
  std::string file = FileWithTensorSizes({3 << 20, 1000, 77});
  server_->Put("models", "dir/model 1.safetensors", file);
  StatusOr<std::unique_ptr<ByteSource>> source = OpenRemoteSource("s3://models/dir/model 1.safetensors", Options());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->Size(), file.size());
  EXPECT_EQ((*source)->Describe(), "s3://models/dir/model 1.safetensors");
  StatusOr<Header> header = ReadHeader(**source);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->tensors.size(), 3u);
  for (auto [offset, length] : std::vector<std::pair<uint64_t, size_t>>{
           {0, 8}, {99'990, 20}, {1 << 20, 3 << 20}, {file.size() - 77, 77}, {12'345, 2'000'000}}) {
    EXPECT_EQ(CheckRead(**source, file, offset, length), "") << offset;
  }
  EXPECT_NE((*source)->StatsJson().find("\"pinned_by\":\"etag\""), std::string::npos) << (*source)->StatsJson();
}

TEST_F(S3rverTest, ReplacedObjectIsStaleNeverMixed) {
  UseS3Keys("S3RVER", "S3RVER");
  std::string file = FileWithTensorSizes({3 << 20});
  server_->Put("models", "m.safetensors", file);
  StatusOr<std::unique_ptr<ByteSource>> source = OpenRemoteSource("s3://models/m.safetensors", Options());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::string changed = file;
  changed[file.size() - 1] ^= 1;
  server_->Put("models", "m.safetensors", changed);
  std::string buf(1 << 20, '\0');
  StatusOr<size_t> n = (*source)->ReadAt(file.size() - buf.size(), buf.size(), buf.data());
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kStale) << n.status().ToString();
}

TEST_F(S3rverTest, SlowDownAnswersAreRetriedWithinBounds) {
  UseS3Keys("S3RVER", "S3RVER");
  std::string file = FileWithTensorSizes({3 << 20});
  server_->Put("models", "m.safetensors", file);
  std::string error;
  std::unique_ptr<FaultProxy> proxy = FaultProxy::Start(server_->endpoint().url, &error);
  ASSERT_NE(proxy, nullptr) << error;
  RemoteOptions options = Options();
  options.s3.url = proxy->Url("");
  proxy->Set("fault=status&status=503&every=2");  // S3's SlowDown is a 503
  StatusOr<std::unique_ptr<ByteSource>> source = OpenRemoteSource("s3://models/m.safetensors", options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(CheckRead(**source, file, 1 << 20, 2 << 20), "");
  EXPECT_GT(proxy->Requests(), 2);

  proxy->Set("fault=status&status=503");  // never recovers: fails after retries, not forever
  StatusOr<std::unique_ptr<ByteSource>> failing = OpenRemoteSource("s3://models/m.safetensors", options);
  ASSERT_FALSE(failing.ok());
  EXPECT_NE(failing.status().message().find("HTTP 503"), std::string::npos) << failing.status().message();
  EXPECT_EQ(proxy->Requests(), 1 + options.retries);
}

TEST_F(S3rverTest, RemoteSourceRefusesUnknownKeyInOneLineWithoutTheSecret) {
  server_->Put("models", "m.safetensors", FileWithTensorSizes({100}));
  UseS3Keys("NOSUCHKEY", "very-secret-value");
  StatusOr<std::unique_ptr<ByteSource>> source = OpenRemoteSource("s3://models/m.safetensors", Options());
  ASSERT_FALSE(source.ok());
  const std::string& line = source.status().message();
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find("s3://models/m.safetensors: HTTP 403"), std::string::npos) << line;
  EXPECT_NE(line.find("check the credentials (access key NOSUCHKEY from environment"), std::string::npos) << line;
  EXPECT_EQ(line.find("very-secret"), std::string::npos) << line;
}

TEST_F(S3rverTest, ListsACheckpointPrefixForTheCatalogue) {
  UseS3Keys("S3RVER", "S3RVER");
  for (const char* key : {"ckpt/b.safetensors", "ckpt/a.safetensors", "ckpt/sub/c.safetensors"}) {
    server_->Put("models", key, FileWithTensorSizes({10}));
  }
  StatusOr<S3PrefixContents> shards = ListS3Checkpoint("s3://models/ckpt/", Options());
  ASSERT_TRUE(shards.ok()) << shards.status().ToString();
  EXPECT_EQ(shards->index_name, "");
  EXPECT_EQ(shards->shard_names, (std::vector<std::string>{"a.safetensors", "b.safetensors"}));

  server_->Put("models", "ckpt/model.safetensors.index.json", "{\"weight_map\":{}}");
  StatusOr<S3PrefixContents> indexed = ListS3Checkpoint("s3://models/ckpt/", Options());
  ASSERT_TRUE(indexed.ok()) << indexed.status().ToString();
  EXPECT_EQ(indexed->index_name, "model.safetensors.index.json");

  StatusOr<S3PrefixContents> empty = ListS3Checkpoint("s3://models/nothing/", Options());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound) << empty.status().ToString();

  UseS3Keys("NOSUCHKEY", "very-secret-value");
  StatusOr<S3PrefixContents> refused = ListS3Checkpoint("s3://models/ckpt/", Options());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("check the credentials"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("very-secret"), std::string::npos);
}

}  // namespace
}  // namespace stfs::testing

namespace stfs::testing {
namespace {

// libcurl's signatures, checked by an independent SigV4 computation (s3rver
// accepts any secret, so only this shows the signature S3 would compute).
class SigV4Test : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    checker_ = SigV4Checker::Start("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", &error);
    ASSERT_NE(checker_, nullptr) << error;
  }
  S3Endpoint Endpoint(const std::string& region = "") const {
    return S3Endpoint{checker_->url(), region, S3Addressing::kPath};
  }
  static S3Credentials Keys(const std::string& secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                            const std::string& token = "") {
    return S3Credentials::Keys("AKIDEXAMPLE", secret, token, "test");
  }
  std::unique_ptr<SigV4Checker> checker_;
};

TEST_F(SigV4Test, RangeGetOfAnOddKeyIsSignedAsS3Computes) {
  std::string url = *S3ObjectUrl(Endpoint(), "bucket", "dir/a b+c=d&e~f(g)'h*é.safetensors");
  S3TestResponse r = S3Get(url, Endpoint(), Keys(), true, 0, 99'999);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("signature ok us-east-1 s3 /bucket/dir/a%20b%2Bc%3Dd%26e~f%28g%29%27h%2A%C3%A9"),
            std::string::npos)
      << r.body;
}

TEST_F(SigV4Test, ListingQueryIsCanonicalAsSent) {
  std::string url = *S3ListUrl(Endpoint("eu-west-3"), "bucket", "m n/", "1/x+==", 2);
  S3TestResponse r = S3Get(url, Endpoint("eu-west-3"), Keys());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("signature ok eu-west-3 s3"), std::string::npos) << r.body;
}

// The region a request is signed for: -o region= (options.s3.region) when
// given, else (environment unset) the profile's `region` in AWS_CONFIG_FILE.
// The checker answers with the region of the signature it verified.
TEST_F(SigV4Test, RegionComesFromTheConfigFileWhenNoOptionOrEnvironmentGivesOne) {
  UseS3Keys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
  ::unsetenv("AWS_REGION");
  ::unsetenv("AWS_DEFAULT_REGION");
  TempDir dir;
  std::string config = dir.Write("config", "[default]\nregion = us-west-2\n[profile build]\nregion = eu-north-1\n");
  ::setenv("AWS_CONFIG_FILE", config.c_str(), 1);
  RemoteOptions options;
  options.s3 = Endpoint();
  options.s3_profile = "";
  auto signed_for = [&]() {
    HttpSettings settings = HttpSettingsFor(options);
    StatusOr<S3ObjectRequest> request = PrepareS3Object("s3://bucket/k", options, &settings);
    EXPECT_TRUE(request.ok()) << request.status().ToString();
    return request.ok() ? HttpGetWith(request->url, settings).body : "";
  };
  EXPECT_NE(signed_for().find("signature ok us-west-2 s3 /bucket/k"), std::string::npos);
  ::setenv("AWS_PROFILE", "build", 1);
  EXPECT_NE(signed_for().find("signature ok eu-north-1 s3 /bucket/k"), std::string::npos);
  options.s3.region = "ap-east-1";
  EXPECT_NE(signed_for().find("signature ok ap-east-1 s3 /bucket/k"), std::string::npos);
  ::unsetenv("AWS_PROFILE");
  ::setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
}

TEST_F(SigV4Test, SessionTokenIsSentAndSigned) {
  std::string url = *S3ObjectUrl(Endpoint(), "bucket", "k");
  S3TestResponse r = S3Get(url, Endpoint(), Keys("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "TOKEN/abc=="),
                           true, 5, 9);
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(SigV4Test, WrongSecretOrNoSignatureIsRefused) {
  std::string url = *S3ObjectUrl(Endpoint(), "bucket", "k");
  EXPECT_EQ(S3Get(url, Endpoint(), Keys("wrong-secret"), true, 0, 9).status, 403);
  EXPECT_EQ(S3Get(url, Endpoint(), S3Credentials::Anonymous(), true, 0, 9).status, 403);
}

}  // namespace
}  // namespace stfs::testing
