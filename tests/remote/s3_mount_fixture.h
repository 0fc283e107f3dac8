// S3rverMountTest: a real-mount test fixture with an s3rver holding the bucket
// "models" and the process's AWS keys set to s3rver's own, for every test
// that mounts s3:// locations through the stfs binary. Skips (with s3rver's
// reason) where node/npm are missing, unless STFS_REQUIRE_S3RVER=1.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>

#include "tests/fs/mount_harness.h"
#include "tests/remote/s3_server.h"

namespace stfs::testing {

class S3rverMountTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped()) return;
    std::string skip, error;
    server_ = S3rverServer::Start(&skip, &error);
    if (server_ == nullptr && !skip.empty()) GTEST_SKIP() << skip;
    ASSERT_NE(server_, nullptr) << error;
    server_->CreateBucket("models");
    UseS3Keys("S3RVER", "S3RVER");
  }
  void TearDown() override {
    MountTest::TearDown();
    server_.reset();
  }
  // The -o option that points stfs at this server.
  std::string EndpointOption() const { return "endpoint=" + server_->endpoint().url; }

  std::unique_ptr<S3rverServer> server_;
};

}  // namespace stfs::testing
