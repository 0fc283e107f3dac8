// Dtype table: one row per dtype, the single source of names and sizes.
#include "core/dtype.h"

namespace stfs {
namespace {

struct DTypeRow {
  DType dtype;
  std::string_view name;
  uint32_t bits;
};

constexpr std::array<DTypeRow, kDTypeCount> kRows = {{
    {DType::F4, "F4", 4},
    {DType::F6_E2M3, "F6_E2M3", 6},
    {DType::F6_E3M2, "F6_E3M2", 6},
    {DType::BOOL, "BOOL", 8},
    {DType::U8, "U8", 8},
    {DType::I8, "I8", 8},
    {DType::F8_E5M2, "F8_E5M2", 8},
    {DType::F8_E4M3, "F8_E4M3", 8},
    {DType::F8_E8M0, "F8_E8M0", 8},
    {DType::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8},
    {DType::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8},
    {DType::I16, "I16", 16},
    {DType::U16, "U16", 16},
    {DType::F16, "F16", 16},
    {DType::BF16, "BF16", 16},
    {DType::I32, "I32", 32},
    {DType::U32, "U32", 32},
    {DType::F32, "F32", 32},
    {DType::I64, "I64", 64},
    {DType::U64, "U64", 64},
    {DType::F64, "F64", 64},
    {DType::C64, "C64", 64},
}};

constexpr std::array<DType, kDTypeCount> MakeAll() {
  std::array<DType, kDTypeCount> all{};
  for (int i = 0; i < kDTypeCount; ++i) all[i] = kRows[i].dtype;
  return all;
}

constexpr std::array<DType, kDTypeCount> kAll = MakeAll();

}  // namespace

const std::array<DType, kDTypeCount>& AllDTypes() { return kAll; }

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const DTypeRow& row : kRows) {
    if (row.name == name) return row.dtype;
  }
  return std::nullopt;
}

std::string_view DTypeName(DType dtype) { return kRows[static_cast<int>(dtype)].name; }

uint32_t DTypeBits(DType dtype) { return kRows[static_cast<int>(dtype)].bits; }

}  // namespace stfs
