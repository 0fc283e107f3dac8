// Header parsing and validation: every rule of docs/format.md, in one pass.
//
// The JSON is read with nlohmann's SAX interface: a handler builds the
// TensorInfo list and the metadata directly, so time and memory are linear in
// the header (a DOM of ordered_json would cost a linear lookup per key, and
// nlohmann's DOM accepts duplicate keys silently). What the format forbids is
// refused where it is seen: the handler then builds nothing more and only the
// lexer finishes its syntax check (so a header that is not JSON always says
// so, as before); nesting deeper than kMaxJsonDepth stops the parse at once.
// The bytes arrive through HeaderByteStream (core/header_bytes.h), which
// checks UTF-8 and NUL chunk by chunk, so no second copy of N bytes is held.
// Integers must be JSON unsigned integers: nlohmann reports "1.0", "4e0" and
// values above 2^64-1 as floats and negatives as signed integers, all refused.
// Nothing throws out of this file.
#include "core/header.h"

#include "core/header_bytes.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace stfs {
namespace {

using Json = nlohmann::ordered_json;

// The reference implementation's JSON reader (serde_json) refuses nesting
// deeper than 128; the format itself needs 3 (object, entry, shape).
constexpr size_t kMaxJsonDepth = 128;

// Renders a tensor name for a one-line message: JSON-quoted, so control bytes
// and newlines never break the line.
std::string Quoted(std::string_view name) {
  try {
    return Json(std::string(name)).dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (...) {
    return "\"?\"";
  }
}

// A set of positions in a growing vector of named items, for catching a
// repeated name in time linear in the number of names without a second copy
// of each (open addressing; the items may move, their indices do not).
class NameIndex {
 public:
  using NameAt = std::function<std::string_view(uint32_t)>;
  explicit NameIndex(NameAt name_at) : name_at_(std::move(name_at)) {}

  // Records item `index`; returns false when an earlier item has its name.
  bool Insert(uint32_t index) {
    if ((count_ + 1) * 2 > slots_.size()) Grow();
    std::string_view name = name_at_(index);
    for (size_t i = Hash(name) & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i] == kEmpty) {
        slots_[i] = index;
        ++count_;
        return true;
      }
      if (name_at_(slots_[i]) == name) return false;
    }
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  static size_t Hash(std::string_view s) { return std::hash<std::string_view>{}(s); }

  void Grow() {
    std::vector<uint32_t> old = std::move(slots_);
    slots_.assign(std::max<size_t>(16, old.size() * 2), kEmpty);
    for (uint32_t index : old) {
      if (index == kEmpty) continue;
      size_t i = Hash(name_at_(index)) & (slots_.size() - 1);
      while (slots_[i] != kEmpty) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = index;
    }
  }

  NameAt name_at_;
  std::vector<uint32_t> slots_;
  size_t count_ = 0;
};

// What a JSON value is, for the handler and for messages.
enum class ValueKind { kNull, kBoolean, kUnsigned, kNegative, kFloat, kString, kObject, kArray };

// Names a value the way messages always have: the JSON type, or the number
// itself when it is the wrong kind of number.
std::string Describe(ValueKind kind, std::string_view text) {
  switch (kind) {
    case ValueKind::kNull: return "null";
    case ValueKind::kBoolean: return "boolean";
    case ValueKind::kUnsigned: return "number";
    case ValueKind::kNegative: return "a negative integer " + std::string(text);
    case ValueKind::kFloat: return "a non-integer number " + std::string(text);
    case ValueKind::kString: return "string";
    case ValueKind::kObject: return "object";
    case ValueKind::kArray: return "array";
  }
  return "value";
}

// The SAX handler: one open container per frame, each knowing what it is in
// the safetensors layout. Values land straight in the Header.
class HeaderSax {
 public:
  HeaderSax(std::string_view source, Header* header)
      : source_(source),
        header_(header),
        tensor_names_([header](uint32_t i) { return std::string_view(header->tensors[i].name); }),
        metadata_keys_([header](uint32_t i) { return std::string_view(header->metadata[i].first); }),
        key_sets_(kMaxJsonDepth + 1) {}

  // The first problem found: a JSON syntax error wins over a rule broken
  // earlier in the text, as a whole-document parse would report it.
  std::optional<Status> Problem() const {
    if (!syntax_error_.empty()) {
      return Status::Corruption(std::string(source_) + ": header is not a single JSON object: " + syntax_error_);
    }
    if (error_) return *error_;
    return std::nullopt;
  }

  // nlohmann::json_sax interface.
  bool null() { return Value(ValueKind::kNull, nullptr, {}); }
  bool boolean(bool) { return Value(ValueKind::kBoolean, nullptr, {}); }
  bool number_integer(int64_t v) { return Value(ValueKind::kNegative, nullptr, std::to_string(v)); }
  bool number_unsigned(uint64_t v) {
    unsigned_value_ = v;
    return Value(ValueKind::kUnsigned, nullptr, {});
  }
  bool number_float(double, const std::string& text) { return Value(ValueKind::kFloat, nullptr, text); }
  bool string(std::string& s) { return Value(ValueKind::kString, &s, {}); }
  bool binary(Json::binary_t&) { return Value(ValueKind::kString, nullptr, {}); }  // not produced by JSON
  bool start_object(size_t) { return Open(ValueKind::kObject); }
  bool start_array(size_t) { return Open(ValueKind::kArray); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& k);
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    std::string what = e.what();
    // Drop the library's "[json.exception.parse_error.101] " tag.
    size_t close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
    std::replace(what.begin(), what.end(), '\n', ' ');
    syntax_error_ = what.empty() ? "syntax error" : what;
    return false;
  }

 private:
  enum class Frame { kRoot, kMetadata, kEntry, kShape, kOffsets, kIgnoredObject, kIgnoredArray };
  enum class Field { kDtype, kShape, kOffsets, kOther };
  struct Open_ {
    Frame frame;
    size_t elements = 0;     // values seen so far in an array
    std::string parent_key;  // key leading to an ignored object, for messages
  };

  bool Fail(std::string message) {
    if (!error_) error_ = Status::Corruption(std::string(source_) + ": " + message);
    return true;  // the lexer goes on checking syntax; nothing more is built
  }
  bool FailTensor(const std::string& what) { return Fail("tensor " + Quoted(tensor().name) + ": " + what); }
  TensorInfo& tensor() { return header_->tensors.back(); }

  bool Open(ValueKind kind) {
    if (++depth_ > kMaxJsonDepth) {
      Fail("header nests JSON deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      return false;  // stop here: nothing deeper is ever valid
    }
    return Value(kind, nullptr, {});
  }
  bool Close();
  bool Value(ValueKind kind, std::string* str, std::string_view text);
  bool EntryField(ValueKind kind, std::string* str, std::string_view text);
  bool EndEntry();
  void Push(Frame frame, std::string parent_key = {}) {
    if (frame == Frame::kEntry || frame == Frame::kIgnoredObject) {
      std::unordered_set<std::string>& keys = key_sets_[depth_];
      // A set that grew large is replaced, so clearing stays cheap per object.
      if (keys.bucket_count() > 64) keys = {}; else keys.clear();
    }
    open_.push_back({frame, 0, std::move(parent_key)});
  }

  const std::string_view source_;
  Header* const header_;
  NameIndex tensor_names_;
  NameIndex metadata_keys_;
  std::vector<Open_> open_;
  std::vector<std::unordered_set<std::string>> key_sets_;  // unknown keys per depth
  size_t depth_ = 0;
  uint64_t unsigned_value_ = 0;
  bool value_is_metadata_ = false;  // the root key just read was __metadata__
  bool seen_metadata_ = false;
  // The open entry's fields.
  Field field_ = Field::kOther;
  bool has_dtype_ = false, has_shape_ = false, has_offsets_ = false;
  std::string offsets_error_;  // first bad data_offsets element, reported once its count is known
  std::string last_key_;  // the unknown key whose value comes next, for messages
  std::optional<Status> error_;
  std::string syntax_error_;
};

bool HeaderSax::key(std::string& k) {
  if (error_) return true;
  Open_& top = open_.back();
  switch (top.frame) {
    case Frame::kRoot:
      if (k == "__metadata__") {
        if (seen_metadata_) return Fail("tensor name \"__metadata__\" appears twice in the header");
        seen_metadata_ = value_is_metadata_ = true;
        return true;
      }
      value_is_metadata_ = false;
      header_->tensors.emplace_back();
      tensor().name = std::move(k);
      if (!tensor_names_.Insert(static_cast<uint32_t>(header_->tensors.size() - 1))) {
        return Fail("tensor name " + Quoted(tensor().name) + " appears twice in the header");
      }
      return true;
    case Frame::kMetadata:
      header_->metadata.emplace_back(std::move(k), std::string());
      if (!metadata_keys_.Insert(static_cast<uint32_t>(header_->metadata.size() - 1))) {
        return Fail("key " + Quoted(header_->metadata.back().first) + " appears twice inside \"__metadata__\"");
      }
      return true;
    case Frame::kEntry: {
      bool* seen = nullptr;
      if (k == "dtype") { field_ = Field::kDtype; seen = &has_dtype_; }
      else if (k == "shape") { field_ = Field::kShape; seen = &has_shape_; }
      else if (k == "data_offsets") { field_ = Field::kOffsets; seen = &has_offsets_; }
      else { field_ = Field::kOther; last_key_ = k; }
      bool repeated = seen ? std::exchange(*seen, true) : !key_sets_[depth_].insert(k).second;
      if (repeated) return Fail("key " + Quoted(k) + " appears twice inside " + Quoted(tensor().name));
      return true;
    }
    case Frame::kIgnoredObject:
      if (!key_sets_[depth_].insert(k).second) {
        return Fail("key " + Quoted(k) + " appears twice inside " + Quoted(top.parent_key));
      }
      last_key_ = k;
      return true;
    default:
      return true;  // arrays have no keys
  }
}

bool HeaderSax::Value(ValueKind kind, std::string* str, std::string_view text) {
  if (error_) return true;
  const bool is_object = kind == ValueKind::kObject;
  const bool is_array = kind == ValueKind::kArray;
  if (open_.empty()) {
    if (!is_object) return Fail("header is " + Describe(kind, text) + ", expected a JSON object");
    Push(Frame::kRoot);
    return true;
  }
  Open_& top = open_.back();
  const size_t index = top.elements++;
  switch (top.frame) {
    case Frame::kRoot:
      if (value_is_metadata_) {
        if (kind == ValueKind::kNull) return true;
        if (!is_object) {
          return Fail("\"__metadata__\" is " + Describe(kind, text) + ", expected an object of strings or null");
        }
        header_->has_metadata = true;
        Push(Frame::kMetadata);
        return true;
      }
      if (!is_object) {
        return FailTensor("entry is " + Describe(kind, text) +
                          ", expected an object with dtype, shape and data_offsets");
      }
      has_dtype_ = has_shape_ = has_offsets_ = false;
      Push(Frame::kEntry);
      return true;
    case Frame::kMetadata:
      if (kind != ValueKind::kString) {
        return Fail("\"__metadata__\" value for key " + Quoted(header_->metadata.back().first) + " is " +
                    Describe(kind, text) + ", expected a string");
      }
      header_->metadata.back().second = std::move(*str);
      return true;
    case Frame::kEntry:
      return EntryField(kind, str, text);
    case Frame::kShape:
      if (kind != ValueKind::kUnsigned) {
        return FailTensor("shape[" + std::to_string(index) + "] is " + Describe(kind, text) +
                          ", expected an integer in 0..2^64-1");
      }
      tensor().shape.push_back(unsigned_value_);
      return true;
    case Frame::kOffsets: {
      std::string problem;
      if (kind == ValueKind::kUnsigned) {
        if (index == 0) tensor().begin = unsigned_value_;
        if (index == 1) tensor().end = unsigned_value_;
        return true;
      }
      problem = "data_offsets[" + std::to_string(index) + "] is " + Describe(kind, text) +
                ", expected an integer in 0..2^64-1";
      if (is_object || is_array) return FailTensor(problem);  // never descend into it
      if (offsets_error_.empty()) offsets_error_ = std::move(problem);
      return true;
    }
    case Frame::kIgnoredObject:
    case Frame::kIgnoredArray:
      if (is_object) Push(Frame::kIgnoredObject, top.frame == Frame::kIgnoredObject ? last_key_ : top.parent_key);
      if (is_array) Push(Frame::kIgnoredArray, top.frame == Frame::kIgnoredObject ? last_key_ : top.parent_key);
      return true;
  }
  return true;
}

bool HeaderSax::EntryField(ValueKind kind, std::string* str, std::string_view text) {
  switch (field_) {
    case Field::kDtype: {
      if (kind != ValueKind::kString) return FailTensor("\"dtype\" is " + Describe(kind, text) + ", expected a string");
      std::optional<DType> dtype = DTypeFromName(*str);
      if (!dtype) {
        return FailTensor("unknown dtype " + Quoted(*str) +
                          " (dtype names are case-sensitive, e.g. F16, BF16, F32)");
      }
      tensor().dtype = *dtype;
      return true;
    }
    case Field::kShape:
      if (kind != ValueKind::kArray) {
        return FailTensor("\"shape\" is " + Describe(kind, text) + ", expected an array of integers");
      }
      Push(Frame::kShape);
      return true;
    case Field::kOffsets:
      if (kind != ValueKind::kArray) {
        return FailTensor("\"data_offsets\" must be an array of exactly two integers, got " + Describe(kind, text));
      }
      offsets_error_.clear();
      Push(Frame::kOffsets);
      return true;
    case Field::kOther:
      if (kind == ValueKind::kObject) Push(Frame::kIgnoredObject, last_key_);
      if (kind == ValueKind::kArray) Push(Frame::kIgnoredArray, last_key_);
      return true;
  }
  return true;
}

bool HeaderSax::Close() {
  --depth_;
  if (error_) return true;
  const Open_ closing = std::move(open_.back());
  open_.pop_back();
  if (closing.frame == Frame::kEntry) return EndEntry();
  if (closing.frame == Frame::kOffsets) {
    if (closing.elements != 2) {
      return FailTensor("\"data_offsets\" must be an array of exactly two integers, got " +
                        std::to_string(closing.elements) + " elements");
    }
    if (!offsets_error_.empty()) return FailTensor(offsets_error_);
  }
  return true;
}

// Checks a complete entry: fields present, offsets agree with the shape.
bool HeaderSax::EndEntry() {
  TensorInfo& info = tensor();
  if (!has_dtype_) return FailTensor("missing field \"dtype\"");
  if (!has_shape_) return FailTensor("missing field \"shape\"");
  if (!has_offsets_) return FailTensor("missing field \"data_offsets\"");
  if (info.end < info.begin) {
    return FailTensor("data_offsets [" + std::to_string(info.begin) + "," + std::to_string(info.end) +
                      "] end before they begin");
  }
  StatusOr<uint64_t> bytes = TensorByteSize(info.dtype, info.shape);
  if (!bytes.ok()) return FailTensor(bytes.status().message());
  if (info.end - info.begin != *bytes) {
    return FailTensor("data_offsets [" + std::to_string(info.begin) + "," + std::to_string(info.end) + "] span " +
                      std::to_string(info.end - info.begin) + " bytes but " + std::string(DTypeName(info.dtype)) +
                      " " + ShapeToString(info.shape) + " needs " + std::to_string(*bytes));
  }
  info.element_count = 1;
  for (uint64_t d : info.shape) info.element_count *= d;  // cannot overflow: checked above
  return true;
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

namespace {

// Parses N header bytes from `bytes`, all rules included.
StatusOr<Header> ParseHeader(HeaderByteStream& bytes, uint64_t header_size, uint64_t file_size,
                             const std::string& src) {
  Header header;
  header.source = src;
  header.header_size = header_size;
  header.file_size = file_size;
  if (header_size == 0) return Status::Corruption(src + ": header length is 0 (expected a JSON object)");
  try {
    HeaderSax handler(src, &header);
    std::istream in(&bytes);
    Json::sax_parse(in, &handler, nlohmann::detail::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/false);
    if (bytes.problem()) return *bytes.problem();
    if (std::optional<Status> problem = handler.Problem()) return *problem;
  } catch (const std::exception& e) {
    return Status::Corruption(src + ": header could not be parsed: " + e.what());
  }
  RETURN_IF_ERROR(CheckLayout(src, header));
  return header;
}

}  // namespace

StatusOr<Header> ParseHeaderJson(std::string_view json, uint64_t file_size, std::string_view source) {
  HeaderByteStream bytes(
      json.size(),
      [json](uint64_t offset, size_t length, char* dst) {
        std::memcpy(dst, json.data() + offset, length);
        return Status::OK();
      },
      std::string(source));
  return ParseHeader(bytes, json.size(), file_size, std::string(source));
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
  // The header streams through a chunk buffer: never a second copy of N bytes.
  HeaderByteStream bytes(
      n, [&source](uint64_t offset, size_t length, char* dst) { return ReadExactly(source, 8 + offset, length, dst); },
      src);
  return ParseHeader(bytes, n, size, src);
}

}  // namespace stfs
