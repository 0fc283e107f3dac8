// s3:// parsing, bucket rules, addressing and key encoding.
#include "core/remote/s3_location.h"

#include <gtest/gtest.h>

namespace stfs {
namespace {

TEST(S3Location, ParsesObjectAndPrefix) {
  StatusOr<S3Location> object = ParseS3Location("s3://my-bucket/models/a b/model.safetensors");
  ASSERT_TRUE(object.ok()) << object.status().ToString();
  EXPECT_EQ(object->bucket, "my-bucket");
  EXPECT_EQ(object->key, "models/a b/model.safetensors");
  EXPECT_FALSE(object->IsPrefix());

  StatusOr<S3Location> prefix = ParseS3Location("S3://my-bucket/models/");
  ASSERT_TRUE(prefix.ok());
  EXPECT_EQ(prefix->key, "models/");
  EXPECT_TRUE(prefix->IsPrefix());

  StatusOr<S3Location> bucket = ParseS3Location("s3://my-bucket");
  ASSERT_TRUE(bucket.ok());
  EXPECT_EQ(bucket->key, "");
  EXPECT_TRUE(bucket->IsPrefix());
  EXPECT_EQ(bucket->ToString(), "s3://my-bucket/");
}

TEST(S3Location, RefusesMalformedLocations) {
  for (const char* bad : {"s3://", "s3:///key", "http://b/k", "s3://ab/k", "s3://My-Bucket/k",
                          "s3://bucket_1/k", "s3://-bucket/k", "s3://bucket-/k", "s3://a..b/k",
                          "s3://192.168.1.1/k", "s3://bucket/a\nb"}) {
    StatusOr<S3Location> parsed = ParseS3Location(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(parsed.status().message().find("expected s3://BUCKET/KEY"), std::string::npos);
    }
  }
  EXPECT_TRUE(ValidateBucketName(std::string(63, 'a')).ok());
  EXPECT_FALSE(ValidateBucketName(std::string(64, 'a')).ok());
  EXPECT_TRUE(ValidateBucketName("a.b-c.1").ok());
}

TEST(S3Location, DefaultsToAwsEndpointOfRegionWithVirtualHosts) {
  S3Endpoint aws;
  EXPECT_EQ(S3Region(aws), "us-east-1");
  EXPECT_EQ(S3SigV4Provider(aws), "aws:amz:us-east-1:s3");
  EXPECT_EQ(*S3ObjectUrl(aws, "bucket", "dir/model.safetensors"),
            "https://bucket.s3.us-east-1.amazonaws.com/dir/model.safetensors");
  aws.region = "eu-west-3";
  EXPECT_EQ(S3SigV4Provider(aws), "aws:amz:eu-west-3:s3");
  EXPECT_EQ(*S3ObjectUrl(aws, "bucket", "k"), "https://bucket.s3.eu-west-3.amazonaws.com/k");
  // A dotted bucket does not fit the *.s3 certificate: path-style.
  EXPECT_EQ(*S3ObjectUrl(aws, "my.bucket", "k"), "https://s3.eu-west-3.amazonaws.com/my.bucket/k");
  aws.addressing = S3Addressing::kPath;
  EXPECT_EQ(*S3ObjectUrl(aws, "bucket", "k"), "https://s3.eu-west-3.amazonaws.com/bucket/k");
}

TEST(S3Location, GoesPathStyleForIpAndLocalhostEndpoints) {
  for (const char* url : {"http://127.0.0.1:9000", "http://localhost:9000/", "http://LOCALHOST",
                          "http://[::1]:9000", "http://minio.localhost:80"}) {
    S3Endpoint endpoint{url, "", S3Addressing::kAuto};
    StatusOr<bool> path_style = S3UsesPathStyle(endpoint, "bucket");
    ASSERT_TRUE(path_style.ok()) << url;
    EXPECT_TRUE(*path_style) << url;
  }
  // Forced virtual-host: an IP address cannot take a bucket label, a
  // localhost name can (BUCKET.localhost is loopback too).
  for (const char* url : {"http://127.0.0.1:9000", "http://[::1]:9000"}) {
    EXPECT_FALSE(S3UsesPathStyle(S3Endpoint{url, "", S3Addressing::kVirtual}, "bucket").ok()) << url;
  }
  EXPECT_EQ(*S3ObjectUrl(S3Endpoint{"http://localhost:9000", "", S3Addressing::kVirtual}, "bucket", "k"),
            "http://bucket.localhost:9000/k");
  EXPECT_EQ(*S3ObjectUrl(S3Endpoint{"http://minio.localhost", "", S3Addressing::kVirtual}, "bucket", "k"),
            "http://bucket.minio.localhost/k");
  S3Endpoint local{"http://127.0.0.1:9000/", "", S3Addressing::kAuto};
  EXPECT_EQ(*S3ObjectUrl(local, "bucket", "a/b.safetensors"), "http://127.0.0.1:9000/bucket/a/b.safetensors");
  S3Endpoint named{"https://store.example.com:8443/base/", "", S3Addressing::kAuto};
  EXPECT_EQ(*S3ObjectUrl(named, "bucket", "k"), "https://bucket.store.example.com:8443/base/k");
  named.addressing = S3Addressing::kPath;
  EXPECT_EQ(*S3ObjectUrl(named, "bucket", "k"), "https://store.example.com:8443/base/bucket/k");
  named.addressing = S3Addressing::kVirtual;
  EXPECT_FALSE(S3ObjectUrl(named, "my.bucket", "k").ok());
}

TEST(S3Location, EncodesKeysAsTheSigV4CanonicalUri) {
  S3Endpoint local{"http://127.0.0.1:1", "", S3Addressing::kPath};
  EXPECT_EQ(*S3ObjectUrl(local, "b-1", "a b/c+d=e&f?g#h%i~j_k.l-m/\xc3\xa9"),
            "http://127.0.0.1:1/b-1/a%20b/c%2Bd%3De%26f%3Fg%23h%25i~j_k.l-m/%C3%A9");
  EXPECT_EQ(*S3ObjectUrl(local, "b-1", ""), "http://127.0.0.1:1/b-1/");
}

TEST(S3Location, RefusesMalformedEndpointsWithoutEchoingCredentials) {
  for (const char* url : {"127.0.0.1:9000", "ftp://host", "http://", "http://host:", "http://host:9x",
                          "http://user:secret@host", "http://host/?q"}) {
    StatusOr<std::string> built = S3ObjectUrl(S3Endpoint{url, "", S3Addressing::kAuto}, "bucket", "k");
    EXPECT_FALSE(built.ok()) << url;
    if (!built.ok()) {
      EXPECT_EQ(built.status().message().find("secret"), std::string::npos);
    }
  }
}

TEST(S3Location, ParsesAddressingOption) {
  EXPECT_EQ(*ParseS3Addressing("path"), S3Addressing::kPath);
  EXPECT_EQ(*ParseS3Addressing("virtual"), S3Addressing::kVirtual);
  EXPECT_EQ(*ParseS3Addressing("auto"), S3Addressing::kAuto);
  EXPECT_FALSE(ParseS3Addressing("vhost").ok());
}

}  // namespace
}  // namespace stfs
