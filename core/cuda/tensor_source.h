// TensorSource: the named tensors a GPU load reads from, and their bytes.
//
// One of three things, chosen by the location's form:
//   - a safetensors file on local disk (read with pread, never mmap);
//   - an http(s):// or hf:// URL, through the HTTP byte source (only when the
//     library was built with stfs::remote);
//   - a tensor directory inside an stfs mount (files `dtype`, `shape` and
//     `data`): one tensor, named after the directory, read through `data`.
// A source is immutable after Open and safe for concurrent loads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/byte_source.h"
#include "core/header.h"
#include "core/status.h"

namespace stfs::gpu {

class TensorSource {
 public:
  // Opens `location` (see above). Errors name the location and the problem.
  static StatusOr<std::unique_ptr<TensorSource>> Open(const std::string& location);

  // Wraps an open byte source holding a safetensors file. `local_path` is the
  // file's path when it is one (enables direct I/O), else empty.
  static StatusOr<std::unique_ptr<TensorSource>> FromSafetensors(
      std::unique_ptr<ByteSource> bytes, std::string local_path);

  TensorSource(const TensorSource&) = delete;
  TensorSource& operator=(const TensorSource&) = delete;

  // Tensors in header order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // Returns the tensor named `name`, or nullptr.
  const TensorInfo* Find(std::string_view name) const;
  // Returns the tensor named `name`, or NotFound naming the source.
  StatusOr<const TensorInfo*> Get(std::string_view name) const;
  // File offset of the first byte of `tensor`.
  uint64_t FileOffset(const TensorInfo& tensor) const { return data_start_ + tensor.begin; }
  // __metadata__ of a safetensors file (empty for a tensor directory).
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }

  const ByteSource& bytes() const { return *bytes_; }
  // Path of the local file the bytes come from, or "" (remote).
  const std::string& local_path() const { return local_path_; }
  const std::string& Describe() const { return bytes_->Describe(); }

 private:
  TensorSource() = default;
  void IndexNames();

  std::unique_ptr<ByteSource> bytes_;
  std::string local_path_;
  uint64_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::unordered_map<std::string_view, size_t> by_name_;
};

// A tensor name for a one-line message: quoted, at most 200 bytes, control
// bytes written as \xNN (a NUL would end the message for C callers).
std::string QuoteTensorName(std::string_view name);

// Parses the text of a tensor directory's `shape` file ("[32000,4096]\n",
// "[]" for a scalar).
StatusOr<std::vector<uint64_t>> ParseShapeText(std::string_view text);

}  // namespace stfs::gpu
