// Tests for the slice planner. Unit tests pin each numpy rule and each error;
// a property test checks thousands of random plans against a brute-force
// reference that enumerates every selected element in numpy order, so the
// planner's coalescing and merging can never drift from what the index means.
#include "core/slice_plan.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace stfs {

// Lets gtest print windows in failure messages (found by ADL, so not in the
// anonymous namespace).
void PrintTo(const ByteWindow& window, std::ostream* os) {
  *os << "{" << window.offset << "+" << window.length << "}";
}

namespace {

using Windows = std::vector<ByteWindow>;
constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();

StatusOr<SlicePlan> Plan(DType dtype, const std::vector<uint64_t>& shape, std::string_view spec) {
  ASSIGN_OR_RETURN(std::vector<SliceItem> items, ParseSliceSpec(spec));
  return PlanSlice(dtype, shape, items);
}

bool SameItem(const SliceItem& a, const SliceItem& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case SliceItem::Kind::kIndex: return a.index == b.index;
    case SliceItem::Kind::kRange: return a.start == b.start && a.stop == b.stop && a.step == b.step;
    case SliceItem::Kind::kEllipsis: return true;
  }
  return false;
}

// Returns the windows of a plan of `spec`, failing the test on an error.
Windows WindowsOf(DType dtype, const std::vector<uint64_t>& shape, std::string_view spec) {
  StatusOr<SlicePlan> plan = Plan(dtype, shape, spec);
  EXPECT_TRUE(plan.ok()) << spec << ": " << plan.status().ToString();
  if (!plan.ok()) return {};
  EXPECT_EQ(plan->WindowCount(), plan->Windows().size()) << spec;
  return plan->Windows();
}

// Expects `spec` to be refused as InvalidArgument with `needles` in the message.
void ExpectRefused(DType dtype, const std::vector<uint64_t>& shape, std::string_view spec,
                   const std::vector<std::string>& needles) {
  StatusOr<SlicePlan> plan = Plan(dtype, shape, spec);
  ASSERT_FALSE(plan.ok()) << "'" << spec << "' on " << ShapeToString(shape) << " was accepted";
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument) << plan.status().ToString();
  for (const std::string& needle : needles) {
    EXPECT_NE(plan.status().message().find(needle), std::string::npos)
        << "'" << needle << "' not in: " << plan.status().message();
  }
}

// ---- ParseSliceSpec ----

TEST(SliceSpec, ParsesEachForm) {
  struct Want { std::string text; std::vector<SliceItem> items; };
  const std::vector<Want> cases = {
      {"3", {SliceItem::Index(3)}},
      {"-1", {SliceItem::Index(-1)}},
      {"+2", {SliceItem::Index(2)}},
      {"0:10", {SliceItem::Range(0, 10)}},
      {"::2", {SliceItem::Range(std::nullopt, std::nullopt, 2)}},
      {"1:", {SliceItem::Range(1, std::nullopt)}},
      {":", {SliceItem::All()}},
      {"::", {SliceItem::All()}},
      {":-3:4", {SliceItem::Range(std::nullopt, -3, 4)}},
      {"...", {SliceItem::Ellipsis()}},
      {"1:3, ..., 0", {SliceItem::Range(1, 3), SliceItem::Ellipsis(), SliceItem::Index(0)}},
      {" 1 : 3 : 2 ,\t-4 ", {SliceItem::Range(1, 3, 2), SliceItem::Index(-4)}},
      {"5,", {SliceItem::Index(5)}},  // a one-item tuple, as in Python
      {"::0", {SliceItem::Range(std::nullopt, std::nullopt, 0)}},  // refused by PlanSlice, not here
      {"-9223372036854775808:9223372036854775807", {SliceItem::Range(kMin64, kMax64)}},
      {"", {}},
      {"  \t", {}},
  };
  for (const Want& want : cases) {
    StatusOr<std::vector<SliceItem>> items = ParseSliceSpec(want.text);
    ASSERT_TRUE(items.ok()) << "'" << want.text << "': " << items.status().ToString();
    ASSERT_EQ(items->size(), want.items.size()) << want.text;
    for (size_t i = 0; i < want.items.size(); ++i) {
      EXPECT_TRUE(SameItem((*items)[i], want.items[i])) << "'" << want.text << "' item " << i;
    }
  }
}

TEST(SliceSpec, RejectsMalformedTextNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a", "'a'"},         {"1:2:3:4", "1:2:3:4"}, {"1 2", "'1 2'"},     {"1:x", "'x'"},
      {"....", "...."},     {". . .", ". . ."},     {"--1", "--1"},       {"+-1", "+-1"},
      {"+", "'+'"},         {"-", "'-'"},           {"1,,2", "1,,2"},     {",", "','"},
      {"0x10", "0x10"},     {"1.5", "1.5"},         {"[1]", "[1]"},
      {"99999999999999999999", "does not fit"},     {"1:-9223372036854775809", "does not fit"},
  };
  for (const auto& [text, needle] : cases) {
    StatusOr<std::vector<SliceItem>> items = ParseSliceSpec(text);
    ASSERT_FALSE(items.ok()) << "'" << text << "' was accepted";
    EXPECT_EQ(items.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(items.status().message().find(needle), std::string::npos)
        << "'" << needle << "' not in: " << items.status().message();
  }
}

// ---- PlanSlice: shapes and windows ----

TEST(SlicePlan, WholeTensorIsOneWindow) {
  StatusOr<SlicePlan> plan = Plan(DType::F32, {4, 5}, "");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->result_shape, (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(plan->result_bytes, 80u);
  EXPECT_TRUE(plan->outer_counts.empty());
  EXPECT_EQ(plan->Windows(), (Windows{{0, 80}}));
  EXPECT_EQ(WindowsOf(DType::F32, {4, 5}, "..."), (Windows{{0, 80}}));
  EXPECT_EQ(WindowsOf(DType::F32, {4, 5}, ":, :"), (Windows{{0, 80}}));
}

TEST(SlicePlan, IntegerDropsItsDimension) {
  StatusOr<SlicePlan> plan = Plan(DType::F16, {3, 4, 5}, "1");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->result_shape, (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(plan->result_bytes, 40u);
  EXPECT_EQ(plan->Windows(), (Windows{{40, 40}}));
  StatusOr<SlicePlan> element = Plan(DType::F16, {3, 4, 5}, "2, 3, 4");
  ASSERT_TRUE(element.ok());
  EXPECT_TRUE(element->result_shape.empty());
  EXPECT_EQ(element->Windows(), (Windows{{118, 2}}));
}

TEST(SlicePlan, NegativeIndexCountsFromTheEnd) {
  EXPECT_EQ(WindowsOf(DType::F32, {3, 4}, "-1"), (Windows{{32, 16}}));
  EXPECT_EQ(WindowsOf(DType::F32, {3, 4}, "-3"), (Windows{{0, 16}}));
  EXPECT_EQ(WindowsOf(DType::F32, {3, 4}, ":, -1"), (Windows{{12, 4}, {28, 4}, {44, 4}}));
}

TEST(SlicePlan, IndexOutOfRangeNamesDimensionIndexAndSize) {
  ExpectRefused(DType::U8, {3, 4}, "0, 4", {"index 4", "dimension 1", "size 4"});
  ExpectRefused(DType::U8, {3, 4}, "-4", {"index -4", "dimension 0", "size 3"});
  ExpectRefused(DType::U8, {3, 4}, "3", {"index 3", "dimension 0", "size 3"});
  ExpectRefused(DType::U8, {3, 4}, "-9223372036854775808", {"index -9223372036854775808"});
  ExpectRefused(DType::U8, {0, 4}, "0", {"index 0", "size 0"});
  // numpy checks every index even when another dimension is empty.
  ExpectRefused(DType::U8, {0, 4}, ":, 4", {"index 4", "dimension 1"});
}

TEST(SlicePlan, RangeBoundsClampLikeNumpy) {
  EXPECT_EQ(WindowsOf(DType::U8, {10}, "-3:"), (Windows{{7, 3}}));
  EXPECT_EQ(WindowsOf(DType::U8, {10}, ":-3"), (Windows{{0, 7}}));
  EXPECT_EQ(WindowsOf(DType::U8, {10}, "-100:100"), (Windows{{0, 10}}));
  EXPECT_EQ(WindowsOf(DType::U8, {10}, "2:-2:3"), (Windows{{2, 1}, {5, 1}}));
  EXPECT_EQ(WindowsOf(DType::U8, {10}, "::3"), (Windows{{0, 1}, {3, 1}, {6, 1}, {9, 1}}));
  EXPECT_EQ(WindowsOf(DType::U8, {10}, "-9223372036854775808:9223372036854775807"), (Windows{{0, 10}}));
  EXPECT_EQ(WindowsOf(DType::U8, {10}, "1::9223372036854775807"), (Windows{{1, 1}}));
  StatusOr<SlicePlan> plan = Plan(DType::U8, {10}, "::3");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->result_shape, (std::vector<uint64_t>{4}));
}

TEST(SlicePlan, StepBelowOneIsRefused) {
  ExpectRefused(DType::U8, {10}, "::0", {"step", "0"});
  ExpectRefused(DType::U8, {4, 10}, ":, 1:5:-1", {"step", "-1", "dimension 1"});
}

TEST(SlicePlan, EmptySelectionIsAnEmptyResult) {
  for (const char* spec : {"5:2", "20:", "3:-100", "-1:-2", "2:2, :"}) {
    StatusOr<SlicePlan> plan = Plan(DType::F32, {4, 5}, spec);
    ASSERT_TRUE(plan.ok()) << spec << ": " << plan.status().ToString();
    EXPECT_EQ(plan->result_shape, (std::vector<uint64_t>{0, 5})) << spec;
    EXPECT_EQ(plan->result_bytes, 0u);
    EXPECT_TRUE(plan->Windows().empty());
    EXPECT_EQ(plan->WindowCount(), 0u);
  }
  StatusOr<SlicePlan> zero_dim = Plan(DType::F4, {3, 0}, "1, :");
  ASSERT_TRUE(zero_dim.ok()) << zero_dim.status().ToString();
  EXPECT_EQ(zero_dim->result_shape, (std::vector<uint64_t>{0}));
  EXPECT_EQ(zero_dim->result_bytes, 0u);
  EXPECT_TRUE(zero_dim->Windows().empty());
  StatusOr<SlicePlan> whole = Plan(DType::U8, {0, 3}, "");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->result_shape, (std::vector<uint64_t>{0, 3}));
  EXPECT_EQ(whole->WindowCount(), 0u);
}

TEST(SlicePlan, AtMostOneEllipsis) {
  ExpectRefused(DType::U8, {2, 3}, "..., ...", {"'...'", "2"});
  EXPECT_EQ(WindowsOf(DType::U8, {2, 3}, "..., 1"), (Windows{{1, 1}, {4, 1}}));
}

TEST(SlicePlan, EllipsisFillsTheMiddle) {
  StatusOr<SlicePlan> plan = Plan(DType::U8, {2, 3, 4}, "1, ..., 2");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->result_shape, (std::vector<uint64_t>{3}));
  EXPECT_EQ(plan->Windows(), (Windows{{14, 1}, {18, 1}, {22, 1}}));
  StatusOr<SlicePlan> none = Plan(DType::U8, {2, 3}, "1, ..., 2");  // '...' may stand for no dims
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->result_shape.empty());
  EXPECT_EQ(none->Windows(), (Windows{{5, 1}}));
}

TEST(SlicePlan, TooManyIndicesIsRefused) {
  ExpectRefused(DType::U8, {2, 3}, "0, 0, 0", {"too many indices", "3", "rank 2", "[2,3]"});
  ExpectRefused(DType::U8, {2, 3}, "0, ..., 0, 0", {"too many indices"});
}

TEST(SlicePlan, ScalarAcceptsOnlyEverythingOrEllipsis) {
  for (const char* spec : {"", "..."}) {
    StatusOr<SlicePlan> plan = Plan(DType::F64, {}, spec);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_TRUE(plan->result_shape.empty());
    EXPECT_EQ(plan->result_bytes, 8u);
    EXPECT_EQ(plan->Windows(), (Windows{{0, 8}}));
  }
  ExpectRefused(DType::F64, {}, "0", {"too many indices", "rank 0"});
  ExpectRefused(DType::F64, {}, ":", {"too many indices"});
}

TEST(SlicePlan, MergesAcrossRowBoundary) {
  // Elements 0,2 | 3,5: 2 and 3 touch across the row boundary.
  StatusOr<SlicePlan> plan = Plan(DType::U8, {2, 3}, ":, ::2");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->Windows(), (Windows{{0, 1}, {2, 2}, {5, 1}}));
  EXPECT_EQ(plan->WindowCount(), 3u);
  EXPECT_EQ(WindowsOf(DType::BF16, {3, 3}, ":, ::2"), (Windows{{0, 2}, {4, 4}, {10, 4}, {16, 2}}));
  // A column on the right touches the next row's column on the left.
  EXPECT_EQ(WindowsOf(DType::U8, {3, 4}, ":, ::3"), (Windows{{0, 1}, {3, 2}, {7, 2}, {11, 1}}));
}

TEST(SlicePlan, ColumnShardIsOneRunPerRow) {
  StatusOr<SlicePlan> plan = Plan(DType::F16, {4, 8}, ":, 2:6");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->base_offset, 4u);
  EXPECT_EQ(plan->run_bytes, 8u);
  EXPECT_EQ(plan->outer_counts, (std::vector<uint64_t>{4}));
  EXPECT_EQ(plan->outer_strides, (std::vector<uint64_t>{16}));
  EXPECT_EQ(plan->result_bytes, 32u);
  EXPECT_EQ(plan->Windows(), (Windows{{4, 8}, {20, 8}, {36, 8}, {52, 8}}));
}

TEST(SlicePlan, RowShardIsOneWindow) {
  StatusOr<SlicePlan> plan = Plan(DType::F32, {8, 16}, "2:5");
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->outer_counts.empty());
  EXPECT_EQ(plan->Windows(), (Windows{{128, 192}}));
  // Whole trailing dims with one index in front still fold into one run.
  EXPECT_EQ(WindowsOf(DType::F32, {8, 2, 16}, "2:5, 1"), (Windows{{320, 64}, {448, 64}, {576, 64}}));
}

TEST(SlicePlan, CoalescesEvenlySpacedOuterDimensions) {
  // [4,3,8] with [:, :, ::2]: every other byte of the whole tensor, one level.
  StatusOr<SlicePlan> plan = Plan(DType::U8, {4, 3, 8}, ":, :, ::2");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->run_bytes, 1u);
  EXPECT_EQ(plan->outer_counts, (std::vector<uint64_t>{48}));
  EXPECT_EQ(plan->outer_strides, (std::vector<uint64_t>{2}));
  EXPECT_EQ(plan->WindowCount(), 48u);
  // Size-one selections never become a level.
  StatusOr<SlicePlan> thin = Plan(DType::U8, {1, 5, 1, 6}, ":, 1:3, :, 0:1");
  ASSERT_TRUE(thin.ok());
  EXPECT_EQ(thin->outer_counts, (std::vector<uint64_t>{2}));
  EXPECT_EQ(thin->outer_strides, (std::vector<uint64_t>{6}));
}

TEST(SlicePlan, SubByteSliceOnByteBoundariesIsAllowed) {
  EXPECT_EQ(WindowsOf(DType::F4, {4, 4}, ":, 2:4"), (Windows{{1, 1}, {3, 1}, {5, 1}, {7, 1}}));
  EXPECT_EQ(WindowsOf(DType::F4, {4, 4}, "1:3"), (Windows{{2, 4}}));
  EXPECT_EQ(WindowsOf(DType::F4, {2, 2, 3}, "1"), (Windows{{3, 3}}));  // a 12-bit row pair
  EXPECT_EQ(WindowsOf(DType::F6_E2M3, {4, 4}, "1"), (Windows{{3, 3}}));
  EXPECT_EQ(WindowsOf(DType::F6_E3M2, {8, 4}, "::2"), (Windows{{0, 3}, {6, 3}, {12, 3}, {18, 3}}));
}

TEST(SlicePlan, SubByteSliceSplittingAByteIsRefused) {
  ExpectRefused(DType::F4, {4, 4}, ":, 1:3", {"F4 slice", "does not start/end on a byte boundary", "bit 4"});
  ExpectRefused(DType::F4, {4, 3}, "::2", {"F4 slice", "byte boundary", "end at bit 12"});
  ExpectRefused(DType::F4, {4, 4}, "1:3, ::2", {"byte boundary"});
  ExpectRefused(DType::F6_E2M3, {8}, "1:5", {"F6_E2M3 slice", "byte boundary", "start at bit 6"});
  ExpectRefused(DType::F6_E3M2, {4, 4}, ":, ::2", {"F6_E3M2 slice", "byte boundary"});
  // Even-sized runs whose stride splits a byte: the second window starts mid-byte.
  ExpectRefused(DType::F4, {3, 5}, ":, 0:2", {"start at bit 20"});
  // An empty selection reads nothing, so it cannot split a byte.
  EXPECT_EQ(WindowsOf(DType::F4, {4, 4}, ":, 3:1"), Windows{});
}

TEST(SlicePlan, RefusesShapeWhoseBitCountOverflows) {
  ExpectRefused(DType::U8, {uint64_t{1} << 61}, "", {"overflows", "[2305843009213693952]", "U8"});
  ExpectRefused(DType::F4, {uint64_t{1} << 62, 4}, "0", {"overflows"});
  ExpectRefused(DType::U64, {0, uint64_t{1} << 40, uint64_t{1} << 30}, "", {"overflows"});
  // The largest shapes that fit plan exactly, to the last byte.
  EXPECT_EQ(WindowsOf(DType::U8, {uint64_t{1} << 60}, "-1"), (Windows{{(uint64_t{1} << 60) - 1, 1}}));
  EXPECT_EQ(WindowsOf(DType::F4, {uint64_t{1} << 31, uint64_t{1} << 30}, "-1, -2:"),
            (Windows{{(uint64_t{1} << 60) - 1, 1}}));
}

TEST(SlicePlan, HugePlanIteratesWithEarlyStop) {
  StatusOr<SlicePlan> plan = Plan(DType::U8, {uint64_t{1} << 20, 4096}, ":, ::2");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->result_shape, (std::vector<uint64_t>{uint64_t{1} << 20, 2048}));
  EXPECT_EQ(plan->result_bytes, uint64_t{1} << 31);
  EXPECT_EQ(plan->outer_counts, (std::vector<uint64_t>{uint64_t{1} << 31}));  // O(dims), not O(runs)
  EXPECT_EQ(plan->WindowCount(), uint64_t{1} << 31);
  uint64_t seen = 0;
  plan->ForEachWindow([&](const ByteWindow& window) {
    EXPECT_EQ(window, (ByteWindow{2 * seen, 1}));
    return ++seen < 1000;
  });
  EXPECT_EQ(seen, 1000u);
}

TEST(SlicePlan, HugeTouchingPlanIsCountedWithoutIterating) {
  // [2^30, 3] with [:, ::2]: every row's last byte touches the next row's first.
  StatusOr<SlicePlan> plan = Plan(DType::U8, {uint64_t{1} << 30, 3}, ":, ::2");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->WindowCount(), (uint64_t{1} << 30) + 1);
  Windows first;
  plan->ForEachWindow([&](const ByteWindow& window) {
    first.push_back(window);
    return first.size() < 4;
  });
  EXPECT_EQ(first, (Windows{{0, 1}, {2, 2}, {5, 2}, {8, 2}}));
  StatusOr<SlicePlan> tail = Plan(DType::U8, {uint64_t{1} << 30, 3}, "-2:, ::2");
  ASSERT_TRUE(tail.ok());
  const uint64_t row = 3 * ((uint64_t{1} << 30) - 2);
  EXPECT_EQ(tail->Windows(), (Windows{{row, 1}, {row + 2, 2}, {row + 5, 1}}));
}

// ---- Property test against a brute-force reference ----

struct RandomCase {
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;
  std::vector<SliceItem> items;
  std::string text;  // the items as a user would type them
};

// What numpy would select, found the slow way: every element in numpy order.
struct Reference {
  bool error = false;            // any refusal
  bool splits_a_byte = false;    // the only reason is a merged range off a byte boundary
  std::vector<uint64_t> shape;
  std::vector<std::pair<uint64_t, uint64_t>> bit_ranges;  // merged [begin, end) in bits
};

Reference ComputeReference(const RandomCase& c) {
  using Wide = __int128;
  Reference ref;
  const size_t rank = c.shape.size();
  size_t ellipses = 0;
  for (const SliceItem& item : c.items) ellipses += item.kind == SliceItem::Kind::kEllipsis;
  if (ellipses > 1 || c.items.size() - ellipses > rank) return Reference{.error = true, .splits_a_byte = false, .shape = {}, .bit_ranges = {}};
  std::vector<std::vector<uint64_t>> chosen;  // per dim, the picked indices in order
  auto select = [&](const SliceItem& item) {
    const Wide n = c.shape[chosen.size()];
    std::vector<uint64_t> picks;
    if (item.kind == SliceItem::Kind::kIndex) {
      Wide i = item.index < 0 ? item.index + n : Wide{item.index};
      if (i < 0 || i >= n) ref.error = true;
      else picks.push_back(static_cast<uint64_t>(i));
    } else {  // Python's slice.indices for a positive step
      if (item.step < 1) ref.error = true;
      auto bound = [&](std::optional<int64_t> v, Wide omitted) -> Wide {
        if (!v) return omitted;
        Wide x = *v;
        if (x < 0) return std::max<Wide>(x + n, 0);
        return std::min<Wide>(x, n);
      };
      for (Wide i = bound(item.start, 0); item.step >= 1 && i < bound(item.stop, n); i += item.step) {
        picks.push_back(static_cast<uint64_t>(i));
      }
      ref.shape.push_back(picks.size());
    }
    chosen.push_back(std::move(picks));
  };
  for (const SliceItem& item : c.items) {
    if (item.kind != SliceItem::Kind::kEllipsis) select(item);
    else for (size_t k = 0; k < rank - (c.items.size() - 1); ++k) select(SliceItem::All());
  }
  while (chosen.size() < rank) select(SliceItem::All());
  if (ref.error) return Reference{.error = true, .splits_a_byte = false, .shape = {}, .bit_ranges = {}};
  for (const auto& picks : chosen) {
    if (picks.empty()) return ref;  // empty result: no ranges
  }
  const uint64_t bits = DTypeBits(c.dtype);
  std::vector<size_t> at(rank, 0);
  while (true) {
    uint64_t element = 0;
    for (size_t d = 0; d < rank; ++d) element = element * c.shape[d] + chosen[d][at[d]];
    uint64_t begin = element * bits;
    if (!ref.bit_ranges.empty() && ref.bit_ranges.back().second == begin) ref.bit_ranges.back().second += bits;
    else ref.bit_ranges.push_back({begin, begin + bits});
    size_t d = rank;
    while (d > 0 && ++at[d - 1] == chosen[d - 1].size()) at[--d] = 0;
    if (d == 0) break;
  }
  for (const auto& [begin, end] : ref.bit_ranges) {
    if (begin % 8 != 0 || end % 8 != 0) ref.error = ref.splits_a_byte = true;
  }
  return ref;
}

// Returns a random bound near `n`: in range, out of range, or extreme.
int64_t RandomBound(std::mt19937_64& rng, int64_t n) {
  int pick = std::uniform_int_distribution<int>(0, 49)(rng);
  if (pick == 0) return kMin64;
  if (pick == 1) return kMax64;
  return std::uniform_int_distribution<int64_t>(-n - 2, n + 2)(rng);
}

RandomCase MakeRandomCase(std::mt19937_64& rng) {
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomCase c;
  // One case in four is 4- or 6-bit, where byte alignment decides.
  bool sub_byte = uniform(0, 3) == 0;
  do {
    c.dtype = AllDTypes()[uniform(0, kDTypeCount - 1)];
  } while (sub_byte && DTypeBits(c.dtype) % 8 == 0);
  int rank = uniform(0, 5);
  for (int d = 0; d < rank; ++d) c.shape.push_back(uniform(0, 9) == 0 ? 0 : uniform(1, 6));
  int explicit_items = uniform(0, 7) == 0 ? rank + 1 : uniform(0, rank);  // sometimes too many
  int ellipsis_at = uniform(0, 2) == 0 ? uniform(0, explicit_items) : -1;
  int second_ellipsis_at = uniform(0, 39) == 0 ? uniform(0, explicit_items) : -1;
  for (int i = 0; i <= explicit_items; ++i) {
    if (i == ellipsis_at) c.items.push_back(SliceItem::Ellipsis());
    if (i == second_ellipsis_at) c.items.push_back(SliceItem::Ellipsis());
    if (i == explicit_items) break;
    // The dim this item most likely lands on, so most indices are in range.
    int dim = ellipsis_at >= 0 && i >= ellipsis_at ? rank - (explicit_items - i) : i;
    int64_t n = dim >= 0 && dim < rank ? static_cast<int64_t>(c.shape[dim]) : 3;
    if (uniform(0, 2) == 0) {
      c.items.push_back(SliceItem::Index(uniform(0, 49) == 0 ? RandomBound(rng, n)
                                         : std::uniform_int_distribution<int64_t>(-n - 1, n)(rng)));
      continue;
    }
    std::optional<int64_t> start, stop;
    if (uniform(0, 2) != 0) start = RandomBound(rng, n);
    if (uniform(0, 2) != 0) stop = RandomBound(rng, n);
    int kind = uniform(0, 19);
    int64_t step = kind == 0 ? uniform(-2, 0) : kind == 1 ? uniform(5, 100) : kind == 2 ? kMax64 : uniform(1, 4);
    c.items.push_back(SliceItem::Range(start, stop, step));
  }
  // Render as text with random spacing; ParseSliceSpec must give the items back.
  auto space = [&] { return std::string(uniform(0, 3) == 0 ? uniform(1, 2) : 0, ' '); };
  for (size_t i = 0; i < c.items.size(); ++i) {
    const SliceItem& item = c.items[i];
    if (i) c.text += space() + "," + space();
    if (item.kind == SliceItem::Kind::kEllipsis) c.text += "...";
    if (item.kind == SliceItem::Kind::kIndex) c.text += std::to_string(item.index);
    if (item.kind != SliceItem::Kind::kRange) continue;
    if (item.start) c.text += std::to_string(*item.start);
    c.text += space() + ":" + space();
    if (item.stop) c.text += std::to_string(*item.stop);
    if (item.step != 1 || uniform(0, 3) == 0) c.text += ":" + (item.step != 1 ? std::to_string(item.step) : "");
  }
  return c;
}

// Checks the coalescing promise: no level could be folded away.
void ExpectCoalesced(const SlicePlan& plan) {
  ASSERT_EQ(plan.outer_counts.size(), plan.outer_strides.size());
  for (size_t k = 0; k < plan.outer_counts.size(); ++k) {
    EXPECT_GE(plan.outer_counts[k], 2u) << "level " << k;
    if (k + 1 < plan.outer_counts.size()) {
      EXPECT_NE(plan.outer_strides[k], plan.outer_counts[k + 1] * plan.outer_strides[k + 1]) << "level " << k;
    }
  }
  if (!plan.outer_strides.empty()) {
    EXPECT_NE(plan.outer_strides.back(), plan.run_bytes);
  }
}

TEST(SlicePlan, MatchesBruteForceReferenceOnRandomSlices) {
  const char* seed_env = std::getenv("STFS_SLICE_SEED");
  const uint64_t seed = seed_env ? std::strtoull(seed_env, nullptr, 10)
                                 : (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with STFS_SLICE_SEED=" + std::to_string(seed) + ")");
  std::mt19937_64 rng(seed);
  const char* cases_env = std::getenv("STFS_SLICE_CASES");  // raise for a longer soak
  const int kCases = cases_env ? std::atoi(cases_env) : 100000;
  int planned = 0, non_empty = 0, refused = 0, split_bytes = 0, sub_byte_planned = 0;
  for (int n = 0; n < kCases && !HasFailure(); ++n) {
    const RandomCase c = MakeRandomCase(rng);
    SCOPED_TRACE("case " + std::to_string(n) + ": " + std::string(DTypeName(c.dtype)) + " " +
                 ShapeToString(c.shape) + " [" + c.text + "]");
    StatusOr<std::vector<SliceItem>> parsed = ParseSliceSpec(c.text);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    ASSERT_EQ(parsed->size(), c.items.size());
    for (size_t i = 0; i < c.items.size(); ++i) ASSERT_TRUE(SameItem((*parsed)[i], c.items[i])) << "item " << i;

    const Reference ref = ComputeReference(c);
    StatusOr<SlicePlan> plan = PlanSlice(c.dtype, c.shape, c.items);
    ASSERT_EQ(plan.ok(), !ref.error) << plan.status().ToString();
    if (!plan.ok()) {
      ++refused;
      split_bytes += ref.splits_a_byte;
      EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
      bool says_boundary = plan.status().message().find("does not start/end on a byte boundary") != std::string::npos;
      EXPECT_EQ(says_boundary, ref.splits_a_byte) << plan.status().message();
      continue;
    }
    ++planned;
    non_empty += !ref.bit_ranges.empty();
    sub_byte_planned += DTypeBits(c.dtype) % 8 != 0 && !ref.bit_ranges.empty();
    EXPECT_EQ(plan->dtype, c.dtype);
    EXPECT_EQ(plan->result_shape, ref.shape);
    Windows expected;
    uint64_t bits = 0;
    for (const auto& [begin, end] : ref.bit_ranges) {
      expected.push_back({begin / 8, (end - begin) / 8});
      bits += end - begin;
    }
    EXPECT_EQ(plan->result_bytes, bits / 8);
    EXPECT_EQ(plan->Windows(), expected);
    EXPECT_EQ(plan->WindowCount(), expected.size());
    ExpectCoalesced(*plan);
  }
  // The generator must exercise every outcome, or this test could pass vacuously.
  EXPECT_GT(non_empty, kCases / 4);
  EXPECT_GT(planned - non_empty, kCases / 50);
  EXPECT_GT(refused - split_bytes, kCases / 50);
  EXPECT_GT(split_bytes, kCases / 200);
  EXPECT_GT(sub_byte_planned, kCases / 200);
  std::printf("random slices: %d planned (%d non-empty, %d sub-byte), %d refused (%d splitting a byte)\n",
              planned, non_empty, sub_byte_planned, refused, split_bytes);
}

}  // namespace
}  // namespace stfs
