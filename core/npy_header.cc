// NumPy .npy header encoding, following numpy.lib.format's
// _write_array_header / _wrap_header (format versions 1.0 and 2.0).
#include "core/npy_header.h"

#include <algorithm>

#include "core/header.h"  // ShapeToString

namespace stfs {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr uint64_t kAlign = 64;                 // numpy's ARRAY_ALIGN
constexpr size_t kGrowthAxisMaxDigits = 21;     // numpy's GROWTH_AXIS_MAX_DIGITS
constexpr uint64_t kVersion1MaxLength = 65535;  // header length field is uint16

// Writes `value` little-endian in `bytes` bytes.
void AppendLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// Renders a shape as Python's repr of a tuple: "()", "(3,)", "(3, 4)".
std::string PythonTuple(const std::vector<uint64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ",";
  return text + ")";
}

// Wraps the dict text in magic, version and length, padding with spaces so
// that the whole header is a multiple of kAlign and ends in '\n'.
std::string WrapHeader(const std::string& dict, int version) {
  const uint64_t length_bytes = version == 1 ? 2 : 4;
  const uint64_t prefix = kMagic.size() + 2 + length_bytes;
  const uint64_t unpadded = prefix + dict.size() + 1;  // + '\n'
  const uint64_t padding = kAlign - unpadded % kAlign;  // numpy pads 64 when already aligned
  std::string out(kMagic);
  out.push_back(static_cast<char>(version));
  out.push_back(0);
  AppendLittleEndian(out, dict.size() + padding + 1, static_cast<int>(length_bytes));
  out += dict;
  out.append(padding, ' ');
  out.push_back('\n');
  return out;
}

}  // namespace

NpyType NpyTypeOf(DType dtype) {
  switch (dtype) {
    case DType::BOOL: return {"|b1", true};
    case DType::U8: return {"|u1", true};
    case DType::I8: return {"|i1", true};
    case DType::I16: return {"<i2", true};
    case DType::U16: return {"<u2", true};
    case DType::F16: return {"<f2", true};
    case DType::I32: return {"<i4", true};
    case DType::U32: return {"<u4", true};
    case DType::F32: return {"<f4", true};
    case DType::I64: return {"<i8", true};
    case DType::U64: return {"<u8", true};
    case DType::F64: return {"<f8", true};
    case DType::C64: return {"<c8", true};  // two F32: numpy complex64
    case DType::BF16: return {"<u2", false};
    case DType::F8_E5M2:
    case DType::F8_E4M3:
    case DType::F8_E8M0:
    case DType::F8_E4M3FNUZ:
    case DType::F8_E5M2FNUZ:
    case DType::F4:
    case DType::F6_E2M3:
    case DType::F6_E3M2: return {"|u1", false};
  }
  return {"|u1", false};
}

StatusOr<std::vector<uint64_t>> NpyShapeOf(DType dtype, const std::vector<uint64_t>& shape) {
  const uint32_t bits = DTypeBits(dtype);
  if (bits % 8 == 0) return shape;
  // Sub-byte: count bits with overflow checks (a valid tensor's byte size
  // fits in uint64, so its bit count fits in 128 bits).
  unsigned __int128 total_bits = bits;
  for (uint64_t d : shape) total_bits *= d;
  if (total_bits % 8 != 0) {
    return Status::NotSupported(std::string(DTypeName(dtype)) + " tensor of shape " + ShapeToString(shape) +
                                " does not fill whole bytes; it has no .npy form");
  }
  if (!shape.empty()) {
    unsigned __int128 last_bits = static_cast<unsigned __int128>(shape.back()) * bits;
    if (last_bits % 8 == 0) {
      std::vector<uint64_t> packed = shape;
      packed.back() = static_cast<uint64_t>(last_bits / 8);
      return packed;
    }
  }
  return std::vector<uint64_t>{static_cast<uint64_t>(total_bits / 8)};
}

StatusOr<std::string> EncodeNpyHeader(DType dtype, const std::vector<uint64_t>& shape) {
  ASSIGN_OR_RETURN(std::vector<uint64_t> npy_shape, NpyShapeOf(dtype, shape));
  std::string dict = "{'descr': '" + std::string(NpyTypeOf(dtype).descr) +
                     "', 'fortran_order': False, 'shape': " + PythonTuple(npy_shape) + ", }";
  // numpy leaves room to grow the first dimension in place.
  if (!npy_shape.empty()) {
    size_t digits = std::to_string(npy_shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  std::string header = WrapHeader(dict, 1);
  if (header.size() - (kMagic.size() + 4) > kVersion1MaxLength) header = WrapHeader(dict, 2);
  return header;
}

NpyReadSplit SplitNpyRead(uint64_t header_size, uint64_t data_size, uint64_t offset, uint64_t length) {
  NpyReadSplit split;
  const uint64_t file_size = header_size + data_size;
  if (offset >= file_size) return split;
  const uint64_t end = offset + std::min(length, file_size - offset);
  if (offset < header_size) {
    split.header_offset = offset;
    split.header_length = std::min(end, header_size) - offset;
  }
  if (end > header_size) {
    split.data_offset = offset > header_size ? offset - header_size : 0;
    split.data_length = end - header_size - split.data_offset;
  }
  return split;
}

}  // namespace stfs
