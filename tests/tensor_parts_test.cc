// Tests for rank parts: the name syntax (one name per part), both split rules
// against their written formulas, a property test that the W parts of every
// W tile a dimension exactly once, and the bridge to the slice planner
// (a part reads exactly the windows of the equivalent numpy slice).
#include "core/tensor_parts.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace stfs {
namespace {

PartRange Bounds(uint64_t n, uint64_t w, uint64_t r, PartRule rule) {
  PartSpec spec{w, r, 0, rule};
  StatusOr<PartRange> range = PartBounds(n, spec);
  EXPECT_TRUE(range.ok()) << range.status().ToString();
  return range.ok() ? *range : PartRange{};
}

TEST(PartNames, ParseEachForm) {
  ASSERT_EQ(*ParsePartWorldSize("8"), 8u);
  StatusOr<PartSpec> plain = ParsePartRank(8, "3");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->rank, 3u);
  EXPECT_EQ(plain->dim, 0u);
  EXPECT_EQ(plain->rule, PartRule::kFloor);

  StatusOr<PartSpec> with_dim = ParsePartRank(8, "7@2");
  ASSERT_TRUE(with_dim.ok());
  EXPECT_EQ(with_dim->rank, 7u);
  EXPECT_EQ(with_dim->dim, 2u);

  StatusOr<PartSpec> ceil = ParsePartRank(4, "0@1~ceil");
  ASSERT_TRUE(ceil.ok());
  EXPECT_EQ(ceil->dim, 1u);
  EXPECT_EQ(ceil->rule, PartRule::kCeil);

  StatusOr<PartSpec> ceil_dim0 = ParsePartRank(4, "2~ceil");
  ASSERT_TRUE(ceil_dim0.ok());
  EXPECT_EQ(ceil_dim0->dim, 0u);
  EXPECT_EQ(ceil_dim0->rule, PartRule::kCeil);
}

TEST(PartNames, NameIsTheInverseOfParse) {
  for (const char* name : {"0", "3", "3@1", "3@1~ceil", "0~ceil", "15@7"}) {
    StatusOr<PartSpec> spec = ParsePartRank(16, name);
    ASSERT_TRUE(spec.ok()) << name << ": " << spec.status().ToString();
    EXPECT_EQ(PartRankName(*spec), name);
  }
}

TEST(PartNames, RefuseEverythingElse) {
  for (const char* w : {"", "0", "01", "-1", "+2", "2x", " 2", "18446744073709551616", "1.0"}) {
    EXPECT_FALSE(ParsePartWorldSize(w).ok()) << "'" << w << "'";
  }
  // Rank out of range, non-canonical numbers, "@0" (that part is named "R"),
  // stray suffixes and separators.
  for (const char* r : {"4", "5", "", "01", "-1", "1@", "@1", "1@01", "1@0", "1@0~ceil", "1~floor",
                        "1~ceil~ceil", "1@1@1", "1 ", "1@-1", "~ceil"}) {
    EXPECT_FALSE(ParsePartRank(4, r).ok()) << "'" << r << "'";
  }
  StatusOr<PartSpec> at_zero = ParsePartRank(4, "1@0");
  EXPECT_NE(at_zero.status().message().find("'1'"), std::string::npos) << at_zero.status().message();
}

TEST(PartBounds, FloorRuleMatchesItsFormula) {
  // n = 10, W = 4: n*R//W = 0, 2, 5, 7, 10.
  EXPECT_EQ(Bounds(10, 4, 0, PartRule::kFloor), (PartRange{0, 2}));
  EXPECT_EQ(Bounds(10, 4, 1, PartRule::kFloor), (PartRange{2, 5}));
  EXPECT_EQ(Bounds(10, 4, 2, PartRule::kFloor), (PartRange{5, 7}));
  EXPECT_EQ(Bounds(10, 4, 3, PartRule::kFloor), (PartRange{7, 10}));
}

TEST(PartBounds, CeilRuleMatchesVllm) {
  // n = 10, W = 4: size = 3 -> [0,3) [3,6) [6,9) [9,10).
  EXPECT_EQ(Bounds(10, 4, 0, PartRule::kCeil), (PartRange{0, 3}));
  EXPECT_EQ(Bounds(10, 4, 3, PartRule::kCeil), (PartRange{9, 10}));
  // n = 5, W = 4: size = 2 -> the last rank is empty.
  EXPECT_EQ(Bounds(5, 4, 2, PartRule::kCeil), (PartRange{4, 5}));
  EXPECT_EQ(Bounds(5, 4, 3, PartRule::kCeil), (PartRange{5, 5}));
}

TEST(PartBounds, RefusesWorldSizeBeyondTheDimension) {
  EXPECT_FALSE(PartBounds(4, PartSpec{5, 0, 0, PartRule::kFloor}).ok());
  EXPECT_FALSE(PartBounds(0, PartSpec{1, 0, 0, PartRule::kFloor}).ok());
  EXPECT_FALSE(PartBounds(4, PartSpec{0, 0, 0, PartRule::kFloor}).ok());
  EXPECT_FALSE(PartBounds(4, PartSpec{2, 2, 0, PartRule::kCeil}).ok());
  EXPECT_TRUE(PartBounds(4, PartSpec{4, 3, 0, PartRule::kFloor}).ok());
}

// Every rank of every W in 1..n covers 0..n exactly once, in rank order, for
// both rules; floor pieces differ by at most one row.
TEST(PartBounds, EveryWorldSizeTilesTheDimensionExactlyOnce) {
  for (PartRule rule : {PartRule::kFloor, PartRule::kCeil}) {
    for (uint64_t n = 1; n <= 130; ++n) {
      for (uint64_t w = 1; w <= n; ++w) {
        uint64_t next = 0;
        uint64_t smallest = n, largest = 0;
        for (uint64_t r = 0; r < w; ++r) {
          PartRange range = Bounds(n, w, r, rule);
          ASSERT_EQ(range.start, next) << "n=" << n << " W=" << w << " R=" << r;
          ASSERT_LE(range.start, range.stop);
          next = range.stop;
          smallest = std::min(smallest, range.stop - range.start);
          largest = std::max(largest, range.stop - range.start);
          if (rule == PartRule::kFloor) {
            ASSERT_EQ(range.start, n * r / w);
            ASSERT_EQ(range.stop, n * (r + 1) / w);
          } else {
            uint64_t size = (n + w - 1) / w;
            ASSERT_EQ(range.start, std::min(n, r * size));
            ASSERT_EQ(range.stop, std::min(n, (r + 1) * size));
          }
        }
        ASSERT_EQ(next, n) << "n=" << n << " W=" << w;
        if (rule == PartRule::kFloor) {
          ASSERT_LE(largest - smallest, 1u);
        }
      }
    }
  }
}

TEST(PartBounds, HugeDimensionsDoNotOverflow) {
  const uint64_t n = UINT64_MAX - 6;
  for (PartRule rule : {PartRule::kFloor, PartRule::kCeil}) {
    uint64_t next = 0;
    for (uint64_t r = 0; r < 7; ++r) {
      PartRange range = Bounds(n, 7, r, rule);
      ASSERT_EQ(range.start, next);
      next = range.stop;
    }
    EXPECT_EQ(next, n);
  }
}

// A part's plan is the plan of the numpy slice that selects the same rows.
TEST(PartPlan, EqualsTheEquivalentSlice) {
  std::mt19937_64 random(std::random_device{}());
  for (int trial = 0; trial < 300; ++trial) {
    size_t rank = 1 + random() % 4;
    std::vector<uint64_t> shape(rank);
    for (uint64_t& d : shape) d = 1 + random() % 9;
    PartSpec spec;
    spec.dim = random() % rank;
    spec.world_size = 1 + random() % shape[spec.dim];
    spec.rank = random() % spec.world_size;
    spec.rule = random() % 2 ? PartRule::kCeil : PartRule::kFloor;
    StatusOr<SlicePlan> part = PlanPart(DType::BF16, shape, spec);
    ASSERT_TRUE(part.ok()) << part.status().ToString();

    PartRange range = *PartBounds(shape[spec.dim], spec);
    std::string text;
    for (size_t d = 0; d < rank; ++d) {
      if (d) text += ",";
      text += d == spec.dim ? std::to_string(range.start) + ":" + std::to_string(range.stop) : ":";
    }
    StatusOr<SlicePlan> slice = PlanSlice(DType::BF16, shape, *ParseSliceSpec(text));
    ASSERT_TRUE(slice.ok()) << text;
    EXPECT_EQ(part->result_shape, slice->result_shape) << text;
    EXPECT_EQ(part->Windows(), slice->Windows()) << text;
    // The part keeps the rank and has the expected row count.
    EXPECT_EQ(part->result_shape.size(), rank);
    EXPECT_EQ(part->result_shape[spec.dim], range.stop - range.start);
  }
}

TEST(PartPlan, RowPartOfAMatrixIsOneWindow) {
  StatusOr<SlicePlan> plan = PlanPart(DType::F32, {10, 4}, PartSpec{4, 1, 0, PartRule::kFloor});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->result_shape, (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(plan->Windows(), (std::vector<ByteWindow>{{2 * 16, 3 * 16}}));
}

TEST(PartPlan, ColumnPartIsOneWindowPerRow) {
  StatusOr<SlicePlan> plan = PlanPart(DType::F16, {3, 8}, PartSpec{2, 1, 1, PartRule::kFloor});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->result_shape, (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(plan->Windows(), (std::vector<ByteWindow>{{8, 8}, {24, 8}, {40, 8}}));
}

TEST(PartPlan, RefusesScalarsBadDimensionsAndSplitBytes) {
  EXPECT_FALSE(PlanPart(DType::F32, {}, PartSpec{1, 0, 0, PartRule::kFloor}).ok());
  EXPECT_FALSE(PlanPart(DType::F32, {4, 4}, PartSpec{2, 0, 2, PartRule::kFloor}).ok());
  EXPECT_FALSE(PlanPart(DType::F32, {4, 4}, PartSpec{5, 0, 1, PartRule::kFloor}).ok());
  EXPECT_FALSE(PlanPart(DType::F32, {4, 0}, PartSpec{1, 0, 1, PartRule::kFloor}).ok());
  // F4 columns 0..3 of a row of 6: 12 bits, not whole bytes.
  EXPECT_FALSE(PlanPart(DType::F4, {2, 6}, PartSpec{2, 0, 1, PartRule::kFloor}).ok());
  EXPECT_TRUE(PlanPart(DType::F4, {2, 8}, PartSpec{2, 1, 1, PartRule::kFloor}).ok());
}

}  // namespace
}  // namespace stfs
