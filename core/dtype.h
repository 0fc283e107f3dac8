// The 22 safetensors dtypes and their sizes in bits.
//
// Sizes are in bits, not bytes, because F4 and the F6 types pack elements
// below byte granularity; every byte computation goes through bits first.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace stfs {

enum class DType : uint8_t {
  F4,
  F6_E2M3, F6_E3M2,
  BOOL, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ,
  I16, U16, F16, BF16,
  I32, U32, F32,
  I64, U64, F64, C64,
};

inline constexpr int kDTypeCount = 22;

// Every dtype, in the order of the enum.
const std::array<DType, kDTypeCount>& AllDTypes();

// Returns the dtype named exactly `name` (case-sensitive), or nullopt.
std::optional<DType> DTypeFromName(std::string_view name);

// Returns the canonical name ("F16").
std::string_view DTypeName(DType dtype);

// Returns the size of one element in bits (4, 6, 8, 16, 32 or 64).
uint32_t DTypeBits(DType dtype);

}  // namespace stfs
