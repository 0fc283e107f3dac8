// The dtype table: 22 names, exact case, sizes in bits.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace stfs {
namespace {

TEST(DType, AllTwentyTwoRoundTripByName) {
  std::set<std::string> names;
  for (DType d : AllDTypes()) {
    std::string name(DTypeName(d));
    names.insert(name);
    ASSERT_TRUE(DTypeFromName(name).has_value()) << name;
    EXPECT_EQ(*DTypeFromName(name), d);
  }
  EXPECT_EQ(names.size(), 22u);
}

TEST(DType, SizesMatchTheFormat) {
  EXPECT_EQ(DTypeBits(DType::F4), 4u);
  EXPECT_EQ(DTypeBits(DType::F6_E2M3), 6u);
  EXPECT_EQ(DTypeBits(DType::F6_E3M2), 6u);
  for (const char* n : {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ"})
    EXPECT_EQ(DTypeBits(*DTypeFromName(n)), 8u) << n;
  for (const char* n : {"I16", "U16", "F16", "BF16"}) EXPECT_EQ(DTypeBits(*DTypeFromName(n)), 16u) << n;
  for (const char* n : {"I32", "U32", "F32"}) EXPECT_EQ(DTypeBits(*DTypeFromName(n)), 32u) << n;
  for (const char* n : {"I64", "U64", "F64", "C64"}) EXPECT_EQ(DTypeBits(*DTypeFromName(n)), 64u) << n;
}

TEST(DType, NamesAreCaseSensitive) {
  EXPECT_FALSE(DTypeFromName("f16").has_value());
  EXPECT_FALSE(DTypeFromName("Bf16").has_value());
  EXPECT_FALSE(DTypeFromName("F16 ").has_value());
  EXPECT_FALSE(DTypeFromName("").has_value());
  EXPECT_FALSE(DTypeFromName("C128").has_value());
}

}  // namespace
}  // namespace stfs
