// Test file builders (see test_files.h).
#include "tests/test_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace stfs::testing {
namespace {

std::mt19937_64& Rng() {
  static std::mt19937_64 rng(std::random_device{}());
  return rng;
}

uint64_t BytesOf(DType dtype, const std::vector<uint64_t>& shape) {
  uint64_t elements = 1;
  for (uint64_t d : shape) elements *= d;
  return elements * DTypeBits(dtype) / 8;
}

}  // namespace

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = Rng()();
    std::memcpy(&out[i], &v, 8);
  }
  for (; i < n; ++i) out[i] = static_cast<char>(Rng()() & 0xff);
  return out;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

std::string RawFile(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string BuildSafetensors(std::vector<TestTensor>& tensors, const std::string& metadata_json) {
  std::string header = "{";
  std::string data;
  bool first = true;
  if (!metadata_json.empty()) {
    header += "\"__metadata__\":" + metadata_json;
    first = false;
  }
  for (TestTensor& t : tensors) {
    uint64_t size = BytesOf(t.dtype, t.shape);
    if (t.bytes.empty()) t.bytes = RandomBytes(size);
    std::ostringstream entry;
    entry << (first ? "" : ",") << JsonString(t.name) << ":{\"dtype\":\"" << DTypeName(t.dtype)
          << "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) entry << (i ? "," : "") << t.shape[i];
    entry << "],\"data_offsets\":[" << data.size() << "," << data.size() + t.bytes.size() << "]}";
    header += entry.str();
    data += t.bytes;
    first = false;
  }
  header += "}";
  while ((8 + header.size()) % 8 != 0) header += ' ';
  return RawFile(header, data);
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/stfs-test-XXXXXX";
  char* made = ::mkdtemp(tmpl.data());
  if (made == nullptr) {
    ADD_FAILURE() << "mkdtemp failed for " << tmpl;
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Write(const std::string& name, const std::string& bytes) const {
  std::string full = path_ + "/" + name;
  std::ofstream out(full, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) ADD_FAILURE() << "could not write " << full;
  return full;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "could not open " << path;
    return std::string();
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace stfs::testing
