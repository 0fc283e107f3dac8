// Shared remote test pieces (see remote_test_util.h).
#include "tests/remote/remote_test_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

namespace stfs::testing {

std::vector<LoggedRequest> NginxTest::Logged() const {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return nginx_->Requests();
}

std::string PreadFile(const std::string& path, int* err, uint64_t offset, size_t length) {
  *err = 0;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    *err = errno;
    return "";
  }
  std::string out;
  char buf[1 << 16];
  while (out.size() < length) {
    ssize_t n = ::pread(fd, buf, std::min(sizeof buf, length - out.size()), static_cast<off_t>(offset + out.size()));
    if (n <= 0) {
      if (n < 0) *err = errno;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

bool ParseRangeHeader(const std::string& range, uint64_t* begin, uint64_t* end) {
  if (range.rfind("bytes=", 0) != 0) return false;
  size_t dash = range.find('-');
  if (dash == std::string::npos) return false;
  *begin = std::strtoull(range.c_str() + 6, nullptr, 10);
  *end = std::strtoull(range.c_str() + dash + 1, nullptr, 10) + 1;
  return *end > *begin;
}

std::string CheckRead(const ByteSource& source, const std::string& file, uint64_t offset,
                      size_t length) {
  std::string buf(length, '\xEE');
  StatusOr<size_t> n = source.ReadAt(offset, length, buf.data());
  if (!n.ok()) return "read at " + std::to_string(offset) + ": " + n.status().ToString();
  size_t expected = offset >= file.size() ? 0 : std::min<uint64_t>(length, file.size() - offset);
  if (*n != expected) {
    return "read at " + std::to_string(offset) + " returned " + std::to_string(*n) +
           " bytes, expected " + std::to_string(expected);
  }
  if (std::memcmp(buf.data(), file.data() + std::min<uint64_t>(offset, file.size()), expected) !=
      0) {
    return "wrong bytes at " + std::to_string(offset) + " (+" + std::to_string(length) + ")";
  }
  return "";
}

std::string FileWithTensorSizes(const std::vector<uint64_t>& sizes,
                                std::vector<TestTensor>* tensors_out) {
  std::vector<TestTensor> tensors;
  for (size_t i = 0; i < sizes.size(); ++i) {
    TestTensor t;
    t.name = "tensor." + std::to_string(i);
    t.dtype = DType::U8;
    t.shape = {sizes[i]};
    tensors.push_back(t);
  }
  std::string file = BuildSafetensors(tensors);
  if (tensors_out) *tensors_out = tensors;
  return file;
}

}  // namespace stfs::testing
