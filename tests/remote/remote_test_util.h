// Shared pieces of the remote tests: a fixture that serves a temp dir with a
// real nginx, options fit for tests (fast retries), range parsing of the
// access log, and byte-exact read checks.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/byte_source.h"
#include "core/remote/remote_source.h"
#include "tests/remote/test_servers.h"
#include "tests/test_files.h"

namespace stfs::testing {

class NginxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    nginx_ = NginxServer::Start(root_.path(), &error);
    ASSERT_NE(nginx_, nullptr) << error;
  }

  // Options with 1 MiB blocks and quick retries, so tests run in seconds.
  static RemoteOptions TestOptions() {
    RemoteOptions o;
    o.block_size = 1 << 20;
    o.cache_size = 64 << 20;
    o.readahead = 8 << 20;
    o.retries = 3;
    o.retry_delay = std::chrono::milliseconds(10);
    o.retry_max_delay = std::chrono::milliseconds(50);
    o.stall_timeout = std::chrono::milliseconds(1000);
    o.connect_timeout = std::chrono::milliseconds(2000);
    return o;
  }

  // Opens `url`, failing the test when it cannot.
  std::unique_ptr<ByteSource> Open(const std::string& url, const RemoteOptions& options) {
    StatusOr<std::unique_ptr<ByteSource>> source = OpenRemoteSource(url, options);
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    if (!source.ok()) return nullptr;
    return std::move(source).value();
  }

  // Requests nginx has logged; waits a moment first, since nginx writes
  // its log line just after the last byte leaves.
  std::vector<LoggedRequest> Logged() const;

  TempDir root_;
  std::unique_ptr<NginxServer> nginx_;
};

// Parses "bytes=A-B" into [A, B+1); false when it is not that form.
bool ParseRangeHeader(const std::string& range, uint64_t* begin, uint64_t* end);

// Reads up to `length` bytes of `path` (e.g. in a mount) from `offset` with
// pread(2); returns them, or what came before the first failing call with
// *err = its errno (0 when none failed).
std::string PreadFile(const std::string& path, int* err, uint64_t offset = 0, size_t length = SIZE_MAX);

// Reads [offset, offset+length) through `source` and compares with `file`
// (the expected bytes of the whole object); returns "" or a description.
std::string CheckRead(const ByteSource& source, const std::string& file, uint64_t offset,
                      size_t length);

// Returns a valid safetensors file of tensors with the given byte sizes (U8, 1-D).
std::string FileWithTensorSizes(const std::vector<uint64_t>& sizes,
                                std::vector<TestTensor>* tensors = nullptr);

}  // namespace stfs::testing
