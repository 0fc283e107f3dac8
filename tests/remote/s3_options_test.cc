// The s3:// -o options and environment: endpoint, region, addressing,
// profile, no_sign; -o wins over AWS_ENDPOINT_URL / AWS_REGION.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/remote/remote_source.h"

namespace stfs {
namespace {

TEST(S3Options, AppliesEachOption) {
  RemoteOptions o;
  for (const char* option : {"endpoint=http://127.0.0.1:9000", "region=eu-west-3", "addressing=path",
                             "profile=build", "no_sign"}) {
    StatusOr<bool> applied = ApplyRemoteOption(option, &o);
    ASSERT_TRUE(applied.ok()) << option << ": " << applied.status().ToString();
    EXPECT_TRUE(*applied) << option;
  }
  EXPECT_EQ(o.s3.url, "http://127.0.0.1:9000");
  EXPECT_EQ(o.s3.region, "eu-west-3");
  EXPECT_EQ(o.s3.addressing, S3Addressing::kPath);
  EXPECT_EQ(o.s3_profile, "build");
  EXPECT_TRUE(o.s3_no_sign);
  EXPECT_TRUE(IsRemoteLocation("s3://bucket/key"));
  EXPECT_TRUE(IsRemoteLocation("S3://bucket/prefix/"));
  EXPECT_NE(RemoteOptionsHelp().find("-o no_sign"), std::string::npos);
}

TEST(S3Options, RefusesMalformedValues) {
  RemoteOptions o;
  for (const char* option : {"endpoint=ftp://x", "endpoint", "region=", "addressing=dns", "profile=",
                             "no_sign=1"}) {
    StatusOr<bool> applied = ApplyRemoteOption(option, &o);
    EXPECT_FALSE(applied.ok()) << option;
  }
}

TEST(S3Options, EnvironmentFillsOnlyWhatOptionsLeftOpen) {
  ::setenv("AWS_ENDPOINT_URL", "http://env-endpoint:1", 1);
  ::setenv("AWS_REGION", "ap-south-1", 1);
  ::unsetenv("AWS_ENDPOINT_URL_S3");
  RemoteOptions from_env;
  ApplyRemoteEnvironment(&from_env);
  EXPECT_EQ(from_env.s3.url, "http://env-endpoint:1");
  EXPECT_EQ(from_env.s3.region, "ap-south-1");

  RemoteOptions given;
  ASSERT_TRUE(ApplyRemoteOption("endpoint=http://option:2", &given).ok());
  ASSERT_TRUE(ApplyRemoteOption("region=us-west-2", &given).ok());
  ApplyRemoteEnvironment(&given);
  EXPECT_EQ(given.s3.url, "http://option:2");
  EXPECT_EQ(given.s3.region, "us-west-2");

  ::unsetenv("AWS_REGION");
  ::setenv("AWS_DEFAULT_REGION", "sa-east-1", 1);
  ::setenv("AWS_ENDPOINT_URL_S3", "http://s3-specific:3", 1);
  RemoteOptions fallback;
  ApplyRemoteEnvironment(&fallback);
  EXPECT_EQ(fallback.s3.region, "sa-east-1");
  EXPECT_EQ(fallback.s3.url, "http://s3-specific:3");
  for (const char* name : {"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION"}) ::unsetenv(name);
}

}  // namespace
}  // namespace stfs
