// Builders for safetensors files used by tests: generated tensors with
// random bytes, written the way writers do (header padded to 8 bytes), plus
// a temp-dir RAII holder. Malformed files are built by tests from RawFile.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace stfs::testing {

struct TestTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<uint64_t> shape;
  std::string bytes;  // left empty: filled with random bytes of the right size
};

// Returns the bytes of a valid safetensors file holding `tensors` in order
// (random data filled in where `bytes` is empty, written back into
// `tensors`). `metadata_json`, when not empty, is inserted verbatim as the
// value of "__metadata__".
std::string BuildSafetensors(std::vector<TestTensor>& tensors,
                             const std::string& metadata_json = "");

// Returns an 8-byte little-endian N followed by `header` and `data` (for
// building malformed files by hand).
std::string RawFile(const std::string& header, const std::string& data = "");

// Returns `n` random bytes from a generator seeded per test run.
std::string RandomBytes(size_t n);

// Escapes `s` as a JSON string literal (with quotes), byte for byte.
std::string JsonString(const std::string& s);

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // Writes `bytes` to path()/name and returns the full path.
  std::string Write(const std::string& name, const std::string& bytes) const;

 private:
  std::string path_;
};

// Reads a whole file; fails the current test when it cannot.
std::string ReadWholeFile(const std::string& path);

}  // namespace stfs::testing
