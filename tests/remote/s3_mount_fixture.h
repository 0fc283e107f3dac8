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

  // Reads `length` bytes of `path` from `offset` with pread(2); returns
  // them, or what came before the first failing call with *err = its errno
  // (0 when none failed).
  static std::string ReadRange(const std::string& path, uint64_t offset, size_t length, int* err) {
    *err = 0;
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) {
      *err = errno;
      return "";
    }
    std::string out;
    char buf[1 << 16];
    while (out.size() < length) {
      ssize_t n = ::pread(fd, buf, std::min(sizeof buf, length - out.size()), offset + out.size());
      if (n <= 0) {
        if (n < 0) *err = errno;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }

  std::unique_ptr<S3rverServer> server_;
};

}  // namespace stfs::testing
