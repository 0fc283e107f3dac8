// ReadSliceRange: any byte range of a slice result equals the same range of
// the concatenated plan windows, for random shapes, slices and reads.
#include "core/slice_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tests/test_files.h"

namespace stfs {
namespace {

TEST(SliceReader, RandomRangesMatchConcatenatedWindows) {
  testing::TempDir dir;
  std::string bytes = testing::RandomBytes(1 << 16);
  std::string path = dir.Write("blob", bytes);
  auto source = OpenLocalFile(path);
  ASSERT_TRUE(source.ok());
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const DType dtypes[] = {DType::U8, DType::F16, DType::F32, DType::F64};
  int checked = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    DType dtype = dtypes[rng() % 4];
    std::vector<uint64_t> shape(1 + rng() % 4);
    uint64_t elements = 1;
    for (auto& d : shape) { d = 1 + rng() % 9; elements *= d; }
    uint64_t tensor_bytes = elements * DTypeBits(dtype) / 8;
    if (tensor_bytes + 64 > bytes.size()) continue;
    uint64_t tensor_start = rng() % 64;
    std::vector<SliceItem> items;
    for (size_t i = 0; i < shape.size() && rng() % 4 != 0; ++i) {
      if (rng() % 3 == 0) {
        items.push_back(SliceItem::Index(static_cast<int64_t>(rng() % shape[i])));
      } else {
        int64_t a = static_cast<int64_t>(rng() % (shape[i] + 1));
        int64_t b = static_cast<int64_t>(rng() % (shape[i] + 1));
        items.push_back(SliceItem::Range(std::min(a, b), std::max(a, b), 1 + static_cast<int64_t>(rng() % 3)));
      }
    }
    auto plan = PlanSlice(dtype, shape, items);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    std::string expected;
    for (const ByteWindow& w : plan->Windows()) expected += bytes.substr(tensor_start + w.offset, w.length);
    ASSERT_EQ(expected.size(), plan->result_bytes);
    for (int r = 0; r < 5; ++r) {
      uint64_t off = expected.empty() ? 0 : rng() % (expected.size() + 2);
      size_t len = 1 + rng() % (expected.size() + 8);
      std::string got(len, '\0');
      auto n = ReadSliceRange(**source, tensor_start, *plan, off, len, got.data(), ReadHint{});
      ASSERT_TRUE(n.ok()) << n.status().ToString();
      size_t want = off >= expected.size() ? 0 : std::min<size_t>(len, expected.size() - off);
      ASSERT_EQ(*n, want);
      ASSERT_EQ(got.substr(0, want), expected.substr(std::min<size_t>(off, expected.size()), want));
      ++checked;
    }
  }
  EXPECT_GT(checked, 5000);
}

TEST(SliceReader, ColumnShardOfLargeMatrixUsesBoundedMemoryAndIsExact) {
  testing::TempDir dir;
  const uint64_t rows = 2048, cols = 512;  // U16: 2 MiB
  std::string bytes = testing::RandomBytes(rows * cols * 2);
  auto source = OpenLocalFile(dir.Write("m", bytes));
  ASSERT_TRUE(source.ok());
  auto items = ParseSliceSpec(":, 448:");
  ASSERT_TRUE(items.ok());
  auto plan = PlanSlice(DType::U16, {rows, cols}, *items);
  ASSERT_TRUE(plan.ok());
  std::string got(plan->result_bytes, '\0');
  auto n = ReadSliceRange(**source, 0, *plan, 0, got.size(), got.data(), ReadHint{});
  ASSERT_TRUE(n.ok());
  for (uint64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(got.substr(r * 128, 128), bytes.substr(r * cols * 2 + 448 * 2, 128)) << "row " << r;
  }
}

// Counts the bytes and runs a reader asks of a string, and keeps the hints.
class CountingSource : public ByteSource {
 public:
  explicit CountingSource(std::string bytes) : bytes_(std::move(bytes)) {}
  StatusOr<size_t> ReadAt(uint64_t offset, size_t length, char* dst) const override {
    size_t n = offset >= bytes_.size() ? 0 : std::min<uint64_t>(length, bytes_.size() - offset);
    std::copy_n(bytes_.data() + offset, n, dst);
    asked_ += n;
    return n;
  }
  Status ReadRuns(std::span<const ByteRun> runs, const ReadHint& hint) const override {
    largest_batch_ = std::max(largest_batch_, runs.size());
    for (const ByteRun& run : runs) {
      if (run.offset + run.length > hint.fence) past_fence_ = true;
    }
    last_hint_ = hint;
    return ByteSource::ReadRuns(runs, hint);
  }
  uint64_t Size() const override { return bytes_.size(); }
  const std::string& Describe() const override { return name_; }
  uint64_t asked() const { return asked_; }
  size_t largest_batch() const { return largest_batch_; }
  bool past_fence() const { return past_fence_; }
  const ReadHint& last_hint() const { return last_hint_; }

 private:
  std::string bytes_, name_ = "counting";
  mutable uint64_t asked_ = 0;
  mutable size_t largest_batch_ = 0;
  mutable bool past_fence_ = false;
  mutable ReadHint last_hint_;
};

TEST(SliceReader, HandsTheSourceExactlyTheRunsInBoundedBatchesWithinTheFence) {
  const uint64_t rows = 8192, cols = 256;  // F32 rows of 1 KiB
  std::string bytes = testing::RandomBytes(rows * cols * 4 + 100);
  for (const char* spec : {":, 64:128", ":, ::2", "100:300", "::3, 7"}) {
    SCOPED_TRACE(spec);
    CountingSource source(bytes);
    auto plan = PlanSlice(DType::F32, {rows, cols}, *ParseSliceSpec(spec));
    ASSERT_TRUE(plan.ok());
    const uint64_t fence = SliceSourceEnd(100, *plan);
    std::string expected;
    uint64_t last_end = 0;
    for (const ByteWindow& w : plan->Windows()) {
      expected += bytes.substr(100 + w.offset, w.length);
      last_end = 100 + w.offset + w.length;
    }
    EXPECT_EQ(fence, last_end);
    std::string got(plan->result_bytes, '\0');
    for (uint64_t off = 0; off < got.size(); off += 1 << 20) {
      const ReadHint hint{7, fence};
      ASSERT_TRUE(
          ReadSliceRange(source, 100, *plan, off, std::min<uint64_t>(1 << 20, got.size() - off), got.data() + off, hint)
              .ok());
    }
    EXPECT_EQ(got, expected);
    EXPECT_EQ(source.asked(), got.size());  // the default ReadRuns reads each run, no gap
    EXPECT_LE(source.largest_batch(), 4096u);
    EXPECT_FALSE(source.past_fence());
    EXPECT_EQ(source.last_hint().stream, 7u);
    EXPECT_EQ(source.last_hint().fence, fence);
  }
}

TEST(LocalFileSource, ReadRunsIsExactForAnyRunSetAndRefusesRunsPastTheEnd) {
  testing::TempDir dir;
  std::string bytes = testing::RandomBytes(1 << 20);
  auto source = OpenLocalFile(dir.Write("m", bytes));
  ASSERT_TRUE(source.ok());
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<ByteRun> runs;
    std::vector<std::string> got(1 + rng() % 50);
    uint64_t at = rng() % 4096;
    for (std::string& g : got) {
      const uint64_t length = rng() % 3 == 0 ? 1 + rng() % 16 : 1 + rng() % 9000;
      if (at + length > bytes.size()) break;
      g.assign(length, '\0');
      runs.push_back(ByteRun{at, length, g.data()});
      at += length + (rng() % 2 ? rng() % 64 : rng() % 20000);
    }
    if (rng() % 4 == 0) std::shuffle(runs.begin(), runs.end(), rng);
    ASSERT_TRUE((*source)->ReadRuns(runs, ReadHint{}).ok());
    for (const ByteRun& run : runs) ASSERT_EQ(std::string(run.dst, run.length), bytes.substr(run.offset, run.length));
  }
  char byte;
  const ByteRun past_end{bytes.size(), 1, &byte};
  Status past = (*source)->ReadRuns(std::span<const ByteRun>(&past_end, 1), ReadHint{});
  EXPECT_FALSE(past.ok());
  EXPECT_NE(past.message().find(dir.path()), std::string::npos) << past.ToString();
}

TEST(SliceReader, ShortSourceIsAnError) {
  testing::TempDir dir;
  auto source = OpenLocalFile(dir.Write("m", testing::RandomBytes(100)));
  ASSERT_TRUE(source.ok());
  auto plan = PlanSlice(DType::U8, {10, 20}, {});
  ASSERT_TRUE(plan.ok());
  std::string got(200, '\0');
  EXPECT_FALSE(ReadSliceRange(**source, 0, *plan, 0, 200, got.data(), ReadHint{}).ok());
}

}  // namespace
}  // namespace stfs
