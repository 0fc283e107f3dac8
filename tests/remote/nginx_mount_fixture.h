// NginxMountTest: a real-mount test fixture with an nginx serving the
// fixture's temp dir (write a file with WriteSource, mount nginx_->Url("/NAME")).
#pragma once

#include <memory>
#include <string>

#include "tests/fs/mount_harness.h"
#include "tests/remote/test_servers.h"

namespace stfs::testing {

class NginxMountTest : public MountTest {
 protected:
  void SetUp() override {
    MountTest::SetUp();
    if (IsSkipped()) return;
    std::string error;
    nginx_ = NginxServer::Start(dir_.path(), &error);
    ASSERT_NE(nginx_, nullptr) << error;
  }
  // Unmounts before the server goes.
  void TearDown() override {
    MountTest::TearDown();
    nginx_.reset();
  }

  std::unique_ptr<NginxServer> nginx_;
};

}  // namespace stfs::testing
