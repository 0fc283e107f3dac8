// Opening tensor sources (see tensor_source.h).
#include "core/cuda/tensor_source.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <string>

#ifdef STFS_GPU_HAVE_REMOTE
#include "core/remote/remote_source.h"
#endif

namespace stfs::gpu {
namespace {

bool LooksLikeUrl(std::string_view location) {
  return location.starts_with("http://") || location.starts_with("https://") ||
         location.starts_with("hf://");
}

// Reads a small text file (a tensor directory's dtype or shape) whole.
StatusOr<std::string> ReadSmallFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> file, OpenLocalFile(path));
  if (file->Size() > 4096) {
    return Status::Corruption(path + ": " + std::to_string(file->Size()) +
                              " bytes is too long for a tensor directory's attribute file");
  }
  std::string text(static_cast<size_t>(file->Size()), '\0');
  RETURN_IF_ERROR(ReadExactly(*file, 0, text.size(), text.data()));
  return text;
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Returns a URL without user:password@, query and fragment, for messages.
[[maybe_unused]] std::string WithoutCredentials(std::string_view url) {
  url = url.substr(0, url.find_first_of("?#"));
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url);
  const size_t host_start = scheme_end + 3;
  const size_t path_start = std::min(url.find('/', host_start), url.size());
  const size_t at = url.rfind('@', path_start);
  if (at == std::string_view::npos || at < host_start) return std::string(url);
  return std::string(url.substr(0, host_start)) + std::string(url.substr(at + 1));
}

std::string BaseName(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

StatusOr<std::vector<uint64_t>> ParseShapeText(std::string_view text) {
  std::string_view s = TrimSpace(text);
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') {
    return Status::Corruption("shape is not a bracketed list: \"" + std::string(s.substr(0, 64)) + "\"");
  }
  s = TrimSpace(s.substr(1, s.size() - 2));
  std::vector<uint64_t> shape;
  if (s.empty()) return shape;
  while (true) {
    s = TrimSpace(s);
    if (s.empty() || s.front() < '0' || s.front() > '9') {
      return Status::Corruption("shape has a dimension that is not a non-negative integer");
    }
    uint64_t value = 0;
    while (!s.empty() && s.front() >= '0' && s.front() <= '9') {
      const uint64_t digit = static_cast<uint64_t>(s.front() - '0');
      if (value > (UINT64_MAX - digit) / 10) return Status::Corruption("shape dimension overflows 64 bits");
      value = value * 10 + digit;
      s.remove_prefix(1);
    }
    shape.push_back(value);
    s = TrimSpace(s);
    if (s.empty()) return shape;
    if (s.front() != ',') return Status::Corruption("shape dimensions must be separated by commas");
    s.remove_prefix(1);
  }
}

StatusOr<std::unique_ptr<TensorSource>> TensorSource::FromSafetensors(
    std::unique_ptr<ByteSource> bytes, std::string local_path) {
  ASSIGN_OR_RETURN(Header header, ReadHeader(*bytes));
  std::unique_ptr<TensorSource> source(new TensorSource());
  source->bytes_ = std::move(bytes);
  source->local_path_ = std::move(local_path);
  source->data_start_ = header.data_start();
  source->tensors_ = std::move(header.tensors);
  source->metadata_ = std::move(header.metadata);
  source->IndexNames();
  return source;
}

StatusOr<std::unique_ptr<TensorSource>> TensorSource::Open(const std::string& location) {
  if (LooksLikeUrl(location)) {
#ifdef STFS_GPU_HAVE_REMOTE
    if (IsRemoteLocation(location)) {
      RemoteOptions options;
      ApplyRemoteEnvironment(&options);
      ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> remote, OpenRemoteSource(location, options));
      return FromSafetensors(std::move(remote), "");
    }
#else
    return Status::NotSupported(WithoutCredentials(location) +
                                ": stfs-gpu was built without HTTP support (stfs::remote)");
#endif
  }
  struct stat st;
  if (::stat(location.c_str(), &st) != 0) return StatusFromErrno(errno, location);
  if (!S_ISDIR(st.st_mode)) {
    ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> file, OpenLocalFile(location));
    return FromSafetensors(std::move(file), location);
  }

  // A tensor directory of an stfs mount: dtype, shape, data.
  const std::string dir = location.back() == '/' ? location : location + "/";
  struct stat data_st;
  if (::stat((dir + "data").c_str(), &data_st) != 0 || ::stat((dir + "dtype").c_str(), &st) != 0 ||
      ::stat((dir + "shape").c_str(), &st) != 0) {
    return Status::InvalidArgument(location +
                                   ": a directory, but not a tensor directory of an stfs mount "
                                   "(it needs the files dtype, shape and data)");
  }
  ASSIGN_OR_RETURN(std::string dtype_text, ReadSmallFile(dir + "dtype"));
  std::string_view dtype_name = TrimSpace(dtype_text);
  std::optional<DType> dtype = DTypeFromName(dtype_name);
  if (!dtype) {
    return Status::Corruption(dir + "dtype: unknown dtype \"" + std::string(dtype_name.substr(0, 32)) + "\"");
  }
  ASSIGN_OR_RETURN(std::string shape_text, ReadSmallFile(dir + "shape"));
  StatusOr<std::vector<uint64_t>> shape = ParseShapeText(shape_text);
  if (!shape.ok()) return shape.status().WithContext(dir + "shape");
  StatusOr<uint64_t> size = TensorByteSize(*dtype, *shape);
  if (!size.ok()) return size.status().WithContext(dir + "shape");
  ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> data, OpenLocalFile(dir + "data"));
  if (data->Size() != *size) {
    return Status::Corruption(dir + "data: " + std::to_string(data->Size()) + " bytes, but a " +
                              std::string(DTypeName(*dtype)) + " tensor of shape " +
                              ShapeToString(*shape) + " has " + std::to_string(*size));
  }

  std::unique_ptr<TensorSource> source(new TensorSource());
  TensorInfo info;
  info.name = BaseName(location);
  info.dtype = *dtype;
  info.shape = std::move(*shape);
  info.begin = 0;
  info.end = *size;
  info.element_count = 1;
  for (uint64_t d : info.shape) info.element_count *= d;
  source->tensors_.push_back(std::move(info));
  source->local_path_ = dir + "data";
  source->bytes_ = std::move(data);
  source->data_start_ = 0;
  source->IndexNames();
  return source;
}

void TensorSource::IndexNames() {
  by_name_.clear();
  for (size_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].name, i);
}

const TensorInfo* TensorSource::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

StatusOr<const TensorInfo*> TensorSource::Get(std::string_view name) const {
  const TensorInfo* t = Find(name);
  if (t == nullptr) {
    return Status::NotFound(Describe() + ": no tensor named " + QuoteTensorName(name));
  }
  return t;
}

std::string QuoteTensorName(std::string_view name) {
  std::string out = "\"";
  for (unsigned char c : name.substr(0, 200)) {
    if (c < 0x20 || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace stfs::gpu
