// Header parsing and validation: every rule of docs/format.md, in order.
//
// The JSON library alone accepts duplicate keys (keeping one silently), so a
// parse callback tracks the keys of every open object and the first repeat
// refuses the file. Integers must be JSON unsigned integers: nlohmann turns
// "1.0", "4e0" and values above 2^64-1 into floats and negatives into signed
// integers, all of which are refused. nlohmann may throw; nothing escapes.
#include "core/header.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace stfs {
namespace {

using Json = nlohmann::ordered_json;

// Renders a tensor name for a one-line message: JSON-quoted, so control bytes
// and newlines never break the line.
std::string Quoted(std::string_view name) {
  try {
    return Json(std::string(name)).dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (...) {
    return "\"?\"";
  }
}

// Returns the offset of the first byte that is not part of a well-formed
// UTF-8 sequence, or npos.
size_t FirstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

// Tracks the keys of each open JSON object to catch the first repeated one.
struct DuplicateKeyTracker {
  std::vector<std::set<std::string>> open_objects;
  std::vector<std::string> path;  // key leading to each open object ("" at top)
  std::string pending_key;
  bool found = false;
  std::string duplicate_key;
  std::string duplicate_parent;  // key of the object holding it ("" = top level)

  bool OnEvent(int /*depth*/, nlohmann::detail::parse_event_t event, Json& parsed) {
    using E = nlohmann::detail::parse_event_t;
    switch (event) {
      case E::object_start:
        path.push_back(open_objects.empty() ? std::string() : pending_key);
        open_objects.emplace_back();
        break;
      case E::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        if (!path.empty()) path.pop_back();
        break;
      case E::key: {
        pending_key = parsed.is_string() ? parsed.get<std::string>() : std::string();
        if (!open_objects.empty() && !open_objects.back().insert(pending_key).second && !found) {
          found = true;
          duplicate_key = pending_key;
          duplicate_parent = path.empty() ? std::string() : path.back();
        }
        break;
      }
      case E::array_start:
        // Keys inside arrays are not named by their parent key.
        pending_key.clear();
        break;
      default:
        break;
    }
    return true;
  }
};

std::string JsonTypeName(const Json& j) {
  if (j.is_number_float()) return "a non-integer number " + j.dump();
  if (j.is_number_integer() && !j.is_number_unsigned()) return "a negative integer " + j.dump();
  return std::string(j.type_name());
}

// Reads a JSON unsigned integer into `out`.
bool AsU64(const Json& j, uint64_t* out) {
  if (!j.is_number_unsigned()) return false;
  *out = j.get<uint64_t>();
  return true;
}

struct TensorParseContext {
  std::string_view source;
  const std::string* name;
  Status Error(const std::string& what) const {
    return Status::Corruption(std::string(source) + ": tensor " + Quoted(*name) + ": " + what);
  }
};

StatusOr<TensorInfo> ParseTensorEntry(const TensorParseContext& ctx, const Json& entry) {
  if (!entry.is_object()) {
    return ctx.Error("entry is " + JsonTypeName(entry) + ", expected an object with dtype, shape and data_offsets");
  }
  TensorInfo info;
  info.name = *ctx.name;

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) return ctx.Error("missing field \"dtype\"");
  if (!dtype_it->is_string()) return ctx.Error("\"dtype\" is " + JsonTypeName(*dtype_it) + ", expected a string");
  const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
  std::optional<DType> dtype = DTypeFromName(dtype_name);
  if (!dtype) return ctx.Error("unknown dtype " + Quoted(dtype_name) + " (dtype names are case-sensitive, e.g. F16, BF16, F32)");
  info.dtype = *dtype;

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) return ctx.Error("missing field \"shape\"");
  if (!shape_it->is_array()) return ctx.Error("\"shape\" is " + JsonTypeName(*shape_it) + ", expected an array of integers");
  for (size_t i = 0; i < shape_it->size(); ++i) {
    uint64_t dim;
    if (!AsU64((*shape_it)[i], &dim)) {
      return ctx.Error("shape[" + std::to_string(i) + "] is " + JsonTypeName((*shape_it)[i]) +
                       ", expected an integer in 0..2^64-1");
    }
    info.shape.push_back(dim);
  }

  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end()) return ctx.Error("missing field \"data_offsets\"");
  if (!offsets_it->is_array() || offsets_it->size() != 2) {
    return ctx.Error("\"data_offsets\" must be an array of exactly two integers, got " +
                     (offsets_it->is_array() ? std::to_string(offsets_it->size()) + " elements"
                                             : JsonTypeName(*offsets_it)));
  }
  for (size_t i = 0; i < 2; ++i) {
    if (!AsU64((*offsets_it)[i], i == 0 ? &info.begin : &info.end)) {
      return ctx.Error("data_offsets[" + std::to_string(i) + "] is " + JsonTypeName((*offsets_it)[i]) +
                       ", expected an integer in 0..2^64-1");
    }
  }
  if (info.end < info.begin) {
    return ctx.Error("data_offsets [" + std::to_string(info.begin) + "," + std::to_string(info.end) +
                     "] end before they begin");
  }

  StatusOr<uint64_t> bytes = TensorByteSize(info.dtype, info.shape);
  if (!bytes.ok()) return ctx.Error(bytes.status().message());
  if (info.end - info.begin != *bytes) {
    return ctx.Error("data_offsets [" + std::to_string(info.begin) + "," + std::to_string(info.end) + "] span " +
                     std::to_string(info.end - info.begin) + " bytes but " + std::string(DTypeName(info.dtype)) +
                     " " + ShapeToString(info.shape) + " needs " + std::to_string(*bytes));
  }
  info.element_count = 1;
  for (uint64_t d : info.shape) info.element_count *= d;  // cannot overflow: checked above
  return info;
}

Status ParseMetadata(std::string_view source, const Json& value, Header* header) {
  if (value.is_null()) return Status::OK();
  if (!value.is_object()) {
    return Status::Corruption(std::string(source) + ": \"__metadata__\" is " + JsonTypeName(value) +
                              ", expected an object of strings or null");
  }
  header->has_metadata = true;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      return Status::Corruption(std::string(source) + ": \"__metadata__\" value for key " + Quoted(key) + " is " +
                                JsonTypeName(v) + ", expected a string");
    }
    header->metadata.emplace_back(key, v.get<std::string>());
  }
  return Status::OK();
}

// Checks rules 12 and 13: tensors tile the data buffer exactly.
Status CheckLayout(std::string_view source, const Header& header) {
  std::vector<const TensorInfo*> order;
  order.reserve(header.tensors.size());
  for (const TensorInfo& t : header.tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expected = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo* t : order) {
    if (t->begin != expected) {
      std::string where = previous ? " after tensor " + Quoted(previous->name) + " ends at " + std::to_string(expected)
                                   : " but the data buffer starts at 0";
      return Status::Corruption(std::string(source) + ": tensor " + Quoted(t->name) + " starts at data offset " +
                                std::to_string(t->begin) + where +
                                (t->begin > expected ? " (gap in the data buffer)" : " (tensors overlap)"));
    }
    expected = t->end;
    previous = t;
  }
  const uint64_t data_start = header.data_start();
  if (header.file_size < data_start || header.file_size - data_start != expected) {
    uint64_t have = header.file_size >= data_start ? header.file_size - data_start : 0;
    return Status::Corruption(std::string(source) + ": tensors cover " + std::to_string(expected) +
                              " data bytes but the file holds " + std::to_string(have) + " after the header (" +
                              (have < expected ? "file is truncated" : "trailing bytes after the last tensor") +
                              "; file size " + std::to_string(header.file_size) + ", header length " +
                              std::to_string(header.header_size) + ")");
  }
  return Status::OK();
}

}  // namespace

const TensorInfo* Header::Find(std::string_view name) const {
  for (const TensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string Header::MetadataJson() const {
  Json obj = Json::object();
  for (const auto& [k, v] : metadata) obj[k] = v;
  return obj.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string ShapeToString(const std::vector<uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(shape[i]);
  }
  out += ']';
  return out;
}

StatusOr<uint64_t> TensorByteSize(DType dtype, const std::vector<uint64_t>& shape) {
  // The product is folded left to right with overflow checks, as the
  // reference implementation does: [2^64-1, 0] is an empty tensor, while
  // [2^63, 4, 0] overflows before reaching the zero.
  uint64_t elements = 1;
  for (uint64_t d : shape) {
    if (__builtin_mul_overflow(elements, d, &elements)) {
      return Status::Corruption("shape " + ShapeToString(shape) + " has more elements than fit in 64 bits");
    }
  }
  uint64_t bits;
  if (__builtin_mul_overflow(elements, uint64_t{DTypeBits(dtype)}, &bits)) {
    return Status::Corruption("shape " + ShapeToString(shape) + " of " + std::string(DTypeName(dtype)) +
                              " has a bit count that overflows 64 bits");
  }
  if (bits % 8 != 0) {
    return Status::Corruption(std::string(DTypeName(dtype)) + " " + ShapeToString(shape) + " holds " +
                              std::to_string(bits) + " bits, not a whole number of bytes");
  }
  return bits / 8;
}

StatusOr<Header> ParseHeaderJson(std::string_view json, uint64_t file_size, std::string_view source) {
  const std::string src(source);
  Header header;
  header.source = src;
  header.header_size = json.size();
  header.file_size = file_size;

  if (json.empty()) return Status::Corruption(src + ": header length is 0 (expected a JSON object)");
  size_t bad = FirstInvalidUtf8(json);
  if (bad != std::string_view::npos) {
    return Status::Corruption(src + ": header is not valid UTF-8 (bad byte at header offset " + std::to_string(bad) + ")");
  }

  // nlohmann stops at a NUL as if the input ended there, which would accept
  // "{}" followed by NUL padding; raw NUL is never valid JSON.
  size_t nul = json.find('\0');
  if (nul != std::string_view::npos) {
    return Status::Corruption(src + ": header is not a single JSON object: NUL byte at header offset " +
                              std::to_string(nul));
  }

  DuplicateKeyTracker tracker;
  Json root;
  try {
    root = Json::parse(
        json.begin(), json.end(),
        [&tracker](int depth, nlohmann::detail::parse_event_t event, Json& parsed) {
          return tracker.OnEvent(depth, event, parsed);
        },
        /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    // Drop the library's "[json.exception.parse_error.101] " tag.
    size_t close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
    std::replace(what.begin(), what.end(), '\n', ' ');
    return Status::Corruption(src + ": header is not a single JSON object: " + what);
  } catch (const std::exception& e) {
    return Status::Corruption(src + ": header is not valid JSON: " + e.what());
  }
  if (tracker.found) {
    if (tracker.duplicate_parent.empty()) {
      return Status::Corruption(src + ": tensor name " + Quoted(tracker.duplicate_key) +
                                " appears twice in the header");
    }
    return Status::Corruption(src + ": key " + Quoted(tracker.duplicate_key) + " appears twice inside " +
                              Quoted(tracker.duplicate_parent));
  }
  if (!root.is_object()) {
    return Status::Corruption(src + ": header is " + JsonTypeName(root) + ", expected a JSON object");
  }

  try {
    for (const auto& [name, value] : root.items()) {
      if (name == "__metadata__") {
        RETURN_IF_ERROR(ParseMetadata(src, value, &header));
        continue;
      }
      TensorParseContext ctx{src, &name};
      ASSIGN_OR_RETURN(TensorInfo info, ParseTensorEntry(ctx, value));
      header.tensors.push_back(std::move(info));
    }
  } catch (const std::exception& e) {
    return Status::Corruption(src + ": malformed header: " + e.what());
  }
  RETURN_IF_ERROR(CheckLayout(src, header));
  return header;
}

StatusOr<Header> ReadHeader(const ByteSource& source) {
  const std::string& src = source.Describe();
  const uint64_t size = source.Size();
  if (size < 8) {
    return Status::Corruption(src + ": file is " + std::to_string(size) +
                              " bytes, too short for the 8-byte header length");
  }
  unsigned char prefix[8];
  RETURN_IF_ERROR(ReadExactly(source, 0, 8, reinterpret_cast<char*>(prefix)));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  if (n > kMaxHeaderSize) {
    return Status::Corruption(src + ": header length " + std::to_string(n) + " exceeds the limit of " +
                              std::to_string(kMaxHeaderSize) + " bytes (not a safetensors file?)");
  }
  if (8 + n > size) {
    return Status::Corruption(src + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                              std::to_string(size) + " bytes)");
  }
  std::string json(n, '\0');
  RETURN_IF_ERROR(ReadExactly(source, 8, n, json.data()));
  return ParseHeaderJson(json, size, src);
}

}  // namespace stfs
