// ListObjectsV2 XML parsing, pagination and the choice of a prefix's objects.
#include "core/remote/s3_list.h"

#include <gtest/gtest.h>

#include <map>

namespace stfs {
namespace {

std::string Page(const std::string& contents, bool truncated, const std::string& token = "") {
  std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>bucket</Name><Prefix>m/</Prefix><KeyCount>2</KeyCount>"
      "<IsTruncated>" + std::string(truncated ? "true" : "false") + "</IsTruncated>";
  if (!token.empty()) xml += "<NextContinuationToken>" + token + "</NextContinuationToken>";
  return xml + contents + "</ListBucketResult>";
}

std::string Contents(const std::string& key, uint64_t size) {
  return "<Contents>\n  <Key>" + key + "</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>"
         "<ETag>&quot;0123abc&quot;</ETag><Size>" + std::to_string(size) +
         "</Size><StorageClass>STANDARD</StorageClass><Owner><ID>x</ID></Owner></Contents>";
}

TEST(S3ListXml, ParsesObjectsPrefixesAndToken) {
  std::string xml = Page(Contents("m/a &amp; b &lt;&gt;&apos;&#233;&#x1F600;.safetensors", 12) +
                             Contents("m/b.safetensors", 18446744073709551615ull) +
                             "<CommonPrefixes><Prefix>m/sub/</Prefix></CommonPrefixes><!-- c -->",
                         true, "tok/en+=");
  StatusOr<S3ListPage> page = ParseS3ListPage(xml);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "m/a & b <>'\xc3\xa9\xf0\x9f\x98\x80.safetensors");
  EXPECT_EQ(page->objects[0].size, 12u);
  EXPECT_EQ(page->objects[0].etag, "\"0123abc\"");
  EXPECT_EQ(page->objects[1].size, 18446744073709551615ull);
  ASSERT_EQ(page->common_prefixes.size(), 1u);
  EXPECT_EQ(page->common_prefixes[0], "m/sub/");
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_continuation_token, "tok/en+=");
}

TEST(S3ListXml, AcceptsEmptyListingAndSelfClosingElements) {
  StatusOr<S3ListPage> page = ParseS3ListPage(
      "<ListBucketResult><Name>b</Name><Prefix/><IsTruncated>false</IsTruncated></ListBucketResult>\n");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(page->objects.empty());
  EXPECT_FALSE(page->truncated);
}

TEST(S3ListXml, RefusesMalformedDocuments) {
  const std::string ok_tail = "<IsTruncated>false</IsTruncated></ListBucketResult>";
  for (const std::string& bad : {
           std::string(""),
           std::string("<ListBucketResult>"),
           "<ListBucketResult>" + Contents("k", 1),
           "<ListBucketResult><Contents><Key>k</Key></Contents>" + ok_tail,           // no Size
           "<ListBucketResult><Contents><Size>1</Size></Contents>" + ok_tail,         // no Key
           "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents>" + ok_tail,
           "<ListBucketResult><Contents><Key>k</Key><Size>99999999999999999999</Size></Contents>" + ok_tail,
           "<ListBucketResult><Contents><Key>a&bogus;</Key><Size>1</Size></Contents>" + ok_tail,
           "<ListBucketResult><Contents><Key>a&#0;</Key><Size>1</Size></Contents>" + ok_tail,
           "<ListBucketResult><Contents><Key>a&#xD800;</Key><Size>1</Size></Contents>" + ok_tail,
           "<ListBucketResult><Contents><Key>a&amp</Key><Size>1</Size></Contents>" + ok_tail,
           "<ListBucketResult><Contents><Key><b/></Key><Size>1</Size></Contents>" + ok_tail,
           "<ListBucketResult><Contents></Key>" + ok_tail,
           std::string("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"),  // no token
           std::string("<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>"),
           std::string("<ListBucketResult></ListBucketResult>"),                                 // no IsTruncated
           "<ListBucketResult>" + ok_tail + "<x/>",
           "junk<ListBucketResult>" + ok_tail,
           "<!DOCTYPE x [<!ENTITY a \"b\">]><ListBucketResult>" + ok_tail,
           "<ListBucketResult><![CDATA[x]]>" + ok_tail,
           std::string("<ListAllMyBucketsResult></ListAllMyBucketsResult>"),
       }) {
    StatusOr<S3ListPage> page = ParseS3ListPage(bad);
    EXPECT_FALSE(page.ok()) << bad;
    if (!page.ok()) {
      EXPECT_EQ(page.status().code(), StatusCode::kCorruption) << bad;
    }
  }
  std::string deep;
  for (int i = 0; i < 17; ++i) deep += "<a>";
  EXPECT_FALSE(ParseS3ListPage(deep).ok());
}

TEST(S3ListXml, ErrorDocumentGivesItsCode) {
  std::string xml =
      "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>Access &amp; denied</Message>"
      "<RequestId>1</RequestId></Error>";
  StatusOr<S3Error> error = ParseS3Error(xml);
  ASSERT_TRUE(error.ok()) << error.status().ToString();
  EXPECT_EQ(error->code, "AccessDenied");
  EXPECT_EQ(error->message, "Access & denied");
  StatusOr<S3ListPage> page = ParseS3ListPage(xml);
  ASSERT_FALSE(page.ok());
  EXPECT_NE(page.status().message().find("AccessDenied"), std::string::npos);
  EXPECT_FALSE(ParseS3Error(Page("", false)).ok());
}

TEST(S3List, QueryIsCanonicalAndEncoded) {
  EXPECT_EQ(S3ListQuery("a b/c+", ""), "delimiter=%2F&list-type=2&prefix=a%20b%2Fc%2B");
  EXPECT_EQ(S3ListQuery("", "1/x=="), "continuation-token=1%2Fx%3D%3D&delimiter=%2F&list-type=2&prefix=");
  EXPECT_EQ(S3ListQuery("m", "", 7), "delimiter=%2F&list-type=2&max-keys=7&prefix=m");
  S3Endpoint local{"http://127.0.0.1:9", "", S3Addressing::kAuto};
  EXPECT_EQ(*S3ListUrl(local, "bucket", "m/", ""),
            "http://127.0.0.1:9/bucket/?delimiter=%2F&list-type=2&prefix=m%2F");
  S3Endpoint aws;
  EXPECT_EQ(*S3ListUrl(aws, "bucket", "m/", "t"),
            "https://bucket.s3.us-east-1.amazonaws.com/?continuation-token=t&delimiter=%2F&list-type=2&prefix=m%2F");
}

TEST(S3List, FollowsContinuationTokensAcrossPages) {
  S3Endpoint local{"http://127.0.0.1:9", "", S3Addressing::kAuto};
  std::map<std::string, std::string> pages = {
      {*S3ListUrl(local, "b", "m/", ""), Page(Contents("m/1.safetensors", 1), true, "t1")},
      {*S3ListUrl(local, "b", "m/", "t1"), Page("", true, "t2")},
      {*S3ListUrl(local, "b", "m/", "t2"), Page(Contents("m/2.safetensors", 2), false)},
  };
  int requests = 0;
  S3PageGetter get = [&](const std::string& url) -> StatusOr<std::string> {
    ++requests;
    auto it = pages.find(url);
    if (it == pages.end()) return Status::NotFound("unexpected " + url);
    return it->second;
  };
  StatusOr<std::vector<S3Object>> objects = ListS3Prefix(local, "b", "m/", get);
  ASSERT_TRUE(objects.ok()) << objects.status().ToString();
  ASSERT_EQ(objects->size(), 2u);
  EXPECT_EQ((*objects)[1].key, "m/2.safetensors");
  EXPECT_EQ(requests, 3);
}

TEST(S3List, StopsOnRepeatedTokensTooManyEntriesAndErrors) {
  S3Endpoint local{"http://127.0.0.1:9", "", S3Addressing::kAuto};
  S3PageGetter loop = [&](const std::string&) -> StatusOr<std::string> {
    return Page(Contents("m/x.safetensors", 1), true, "same");
  };
  StatusOr<std::vector<S3Object>> looped = ListS3Prefix(local, "b", "m/", loop);
  ASSERT_FALSE(looped.ok());
  EXPECT_EQ(looped.status().code(), StatusCode::kCorruption);

  int n = 0;
  S3PageGetter endless = [&](const std::string&) -> StatusOr<std::string> {
    ++n;
    return Page(Contents("m/x.safetensors", 1) + Contents("m/y.safetensors", 1), true, "t" + std::to_string(n));
  };
  StatusOr<std::vector<S3Object>> capped = ListS3Prefix(local, "b", "m/", endless, S3ListLimits{9, 0});
  ASSERT_FALSE(capped.ok());
  EXPECT_EQ(capped.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(n, 5);

  S3PageGetter failing = [](const std::string&) -> StatusOr<std::string> {
    return Status::IOError("HTTP 403 AccessDenied");
  };
  StatusOr<std::vector<S3Object>> failed = ListS3Prefix(local, "b", "m/", failing);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "listing s3://b/m/: HTTP 403 AccessDenied");
}

std::vector<S3Object> Objects(const std::vector<std::string>& keys) {
  std::vector<S3Object> objects;
  for (const std::string& key : keys) objects.push_back({key, 1, "\"e\""});
  return objects;
}

TEST(S3Prefix, PrefersTheIndex) {
  StatusOr<S3PrefixContents> c = ChooseS3PrefixContents(
      "m/", Objects({"m/b.safetensors", "m/model.safetensors.index.json", "m/a.safetensors"}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->index_name, "model.safetensors.index.json");
  EXPECT_TRUE(c->shard_names.empty());

  StatusOr<S3PrefixContents> other = ChooseS3PrefixContents("m/", Objects({"m/x.safetensors.index.json"}));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->index_name, "x.safetensors.index.json");

  StatusOr<S3PrefixContents> two = ChooseS3PrefixContents(
      "m/", Objects({"m/x.safetensors.index.json", "m/model.safetensors.index.json"}));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->index_name, "model.safetensors.index.json");

  StatusOr<S3PrefixContents> ambiguous = ChooseS3PrefixContents(
      "m/", Objects({"m/y.safetensors.index.json", "m/x.safetensors.index.json"}));
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_EQ(ambiguous.status().code(), StatusCode::kInvalidArgument);
}

TEST(S3Prefix, ElseTakesSortedShardsDirectlyUnderThePrefix) {
  StatusOr<S3PrefixContents> c = ChooseS3PrefixContents(
      "m/", Objects({"m/b.safetensors", "m/sub/model.safetensors.index.json", "m/sub/c.safetensors",
                     "m/a.safetensors", "m/notes.txt", "m/.safetensors", "other/d.safetensors",
                     "m/e.safetensors.tmp"}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->index_name, "");
  EXPECT_EQ(c->shard_names, (std::vector<std::string>{"a.safetensors", "b.safetensors"}));

  StatusOr<S3PrefixContents> root = ChooseS3PrefixContents("", Objects({"z.safetensors", "m/a.safetensors"}));
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->shard_names, (std::vector<std::string>{"z.safetensors"}));

  StatusOr<S3PrefixContents> none = ChooseS3PrefixContents("m/", Objects({"m/sub/a.safetensors", "m/x.bin"}));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace stfs
