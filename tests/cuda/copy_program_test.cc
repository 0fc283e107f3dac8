// Tests of the copy program (planning only): fills respect the staging
// budget and alignment, column shards become covering reads plus 2-D
// copies, and executing any plan on plain memory puts every byte where its
// segment says.
#include "core/cuda/copy_program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/cuda/plan_test_util.h"

namespace stfs::gpu {
namespace {

using testing::PlanAll;
using testing::VectorSegments;

// Runs fills against `file` into `dst` (addresses in segments are offsets
// into dst) and checks each fill's invariants on the way.
void Execute(const std::vector<StagingFill>& fills, const FillLimits& limits, const std::string& file,
             std::string* dst) {
  std::string staging(limits.capacity, '\0');
  for (const StagingFill& fill : fills) {
    ASSERT_FALSE(fill.reads.empty());
    ASSERT_LE(fill.reads.size(), limits.max_reads);
    ASSERT_LE(fill.copies.size(), limits.max_copies);
    ASSERT_LE(fill.staging_bytes, limits.capacity);
    std::fill(staging.begin(), staging.end(), '\xee');
    std::vector<bool> covered(limits.capacity, false);
    uint64_t previous_end = 0;
    for (const StagedRead& r : fill.reads) {
      ASSERT_EQ(r.file_offset % limits.alignment, 0u);
      ASSERT_EQ(r.length % limits.alignment, 0u);
      ASSERT_EQ(r.staging_offset % limits.alignment, 0u);
      ASSERT_GE(r.staging_offset, previous_end) << "reads overlap in staging";
      ASSERT_LE(r.required, r.length);
      ASSERT_LE(r.staging_offset + r.length, limits.capacity);
      previous_end = r.staging_offset + r.length;
      const uint64_t avail = std::min<uint64_t>(r.length, file.size() - std::min<uint64_t>(file.size(), r.file_offset));
      ASSERT_GE(avail, r.required) << "a read requires bytes past the end of the file";
      std::memcpy(&staging[r.staging_offset], file.data() + r.file_offset, avail);
      for (uint64_t i = 0; i < r.required; ++i) covered[r.staging_offset + i] = true;
    }
    for (const StagedCopy& c : fill.copies) {
      ASSERT_GE(c.height, 1u);
      if (c.height > 1) {
        ASSERT_GE(c.src_pitch, c.width);
        ASSERT_GE(c.dst_pitch, c.width);
      }
      for (uint64_t row = 0; row < c.height; ++row) {
        const uint64_t s = c.staging_offset + row * c.src_pitch;
        const uint64_t d = c.dst + row * c.dst_pitch;
        ASSERT_LE(s + c.width, limits.capacity);
        for (uint64_t i = 0; i < c.width; ++i) ASSERT_TRUE(covered[s + i]) << "copy reads bytes no read filled";
        ASSERT_LE(d + c.width, dst->size());
        std::memcpy(dst->data() + d, &staging[s], c.width);
      }
    }
  }
}

std::string RandomFile(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

TEST(FillPlanner, WholeContiguousRangeBecomesCapacitySizedReads) {
  std::string file(10000, 'x');
  VectorSegments segments({{100, 9000, 0}});
  FillLimits limits;
  limits.capacity = 4096;
  std::vector<StagingFill> fills = PlanAll(&segments, limits);
  ASSERT_EQ(fills.size(), 3u);
  EXPECT_EQ(fills[0].reads.size(), 1u);
  EXPECT_EQ(fills[0].reads[0].length, 4096u);
  EXPECT_EQ(fills[1].reads[0].file_offset, 100u + 4096u);
  EXPECT_EQ(fills[2].reads[0].length, 9000u - 2 * 4096u);
  for (const StagingFill& f : fills) ASSERT_EQ(f.copies.size(), 1u);
}

TEST(FillPlanner, ColumnShardUsesCoveringReadsAndOne2DCopyPerFill) {
  // 64 rows of 1024 bytes; the shard owns bytes 128..256 of each row.
  std::vector<Segment> segs;
  for (uint64_t r = 0; r < 64; ++r) segs.push_back({r * 1024 + 128, 128, r * 128});
  VectorSegments segments(segs);
  FillLimits limits;
  limits.capacity = 16 * 1024;
  limits.max_gap = 4096;
  std::vector<StagingFill> fills = PlanAll(&segments, limits);
  ASSERT_EQ(fills.size(), 4u);  // 16 rows (16 KiB covering) per fill
  for (const StagingFill& f : fills) {
    ASSERT_EQ(f.reads.size(), 1u);
    ASSERT_EQ(f.copies.size(), 1u);
    EXPECT_EQ(f.copies[0].height, 16u);
    EXPECT_EQ(f.copies[0].width, 128u);
    EXPECT_EQ(f.copies[0].src_pitch, 1024u);
    EXPECT_EQ(f.copies[0].dst_pitch, 128u);
  }
}

TEST(FillPlanner, ZeroGapReadsExactlyTheRunsAndPacksThem) {
  std::vector<Segment> segs;
  for (uint64_t r = 0; r < 64; ++r) segs.push_back({r * 1024 + 128, 128, r * 128});
  VectorSegments segments(segs);
  FillLimits limits;
  limits.capacity = 16 * 1024;
  limits.max_gap = 0;
  std::vector<StagingFill> fills = PlanAll(&segments, limits);
  ASSERT_EQ(fills.size(), 1u);
  EXPECT_EQ(fills[0].reads.size(), 64u);
  EXPECT_EQ(fills[0].ReadBytes(), 64u * 128u);
  ASSERT_EQ(fills[0].copies.size(), 1u);  // packed staging -> one 1-D copy
  EXPECT_EQ(fills[0].copies[0].width, 64u * 128u);
}

TEST(FillPlanner, MaxReadsAndCopiesBoundEachFill) {
  std::vector<Segment> segs;
  for (uint64_t r = 0; r < 100; ++r) segs.push_back({r * 1000, 10 + r % 3, r * 64});
  VectorSegments segments(segs);
  FillLimits limits;
  limits.capacity = 1 << 20;
  limits.max_gap = 0;
  limits.max_reads = 7;
  limits.max_copies = 5;
  std::vector<StagingFill> fills = PlanAll(&segments, limits);
  uint64_t copied = 0;
  for (const StagingFill& f : fills) {
    EXPECT_LE(f.reads.size(), 7u);
    EXPECT_LE(f.copies.size(), 5u);
    copied += f.CopiedBytes();
  }
  uint64_t want = 0;
  for (const Segment& s : segs) want += s.length;
  EXPECT_EQ(copied, want);
}

TEST(FillPlanner, RandomSegmentStreamsLandByteExact) {
  std::mt19937_64 rng(12345);
  for (int iter = 0; iter < 300; ++iter) {
    const size_t file_size = 1 + rng() % 20000;
    std::string file = RandomFile(rng, file_size);
    FillLimits limits;
    limits.alignment = (iter % 3 == 0) ? 512 : 1;
    limits.capacity = limits.alignment * (2 + rng() % 16) + (limits.alignment == 1 ? rng() % 3000 : 0);
    limits.max_gap = (iter % 4 == 0) ? 0 : rng() % 4000;
    limits.max_reads = 1 + rng() % 50;
    limits.max_copies = 1 + rng() % 50;
    ASSERT_TRUE(ValidateFillLimits(limits).ok());
    // Segments anywhere in the file, in any order, to packed destinations
    // (a batch may name one tensor twice, or out of file order).
    std::vector<Segment> segs;
    uint64_t dst = 0;
    const int n = 1 + static_cast<int>(rng() % 40);
    uint64_t cursor = rng() % file_size;
    for (int i = 0; i < n; ++i) {
      if (rng() % 5 == 0) cursor = rng() % file_size;
      const uint64_t len = std::min<uint64_t>(file_size - cursor, rng() % 3 == 0 ? rng() % 5000 : rng() % 64);
      segs.push_back({cursor, len, dst});
      dst += len;
      cursor = std::min<uint64_t>(file_size - 1, cursor + len + rng() % 300);
    }
    std::string want;
    for (const Segment& s : segs) want += file.substr(s.file_offset, s.length);
    VectorSegments segments(segs);
    std::vector<StagingFill> fills = PlanAll(&segments, limits);
    std::string got(want.size(), '\0');
    Execute(fills, limits, file, &got);
    if (HasFatalFailure()) return;
    ASSERT_EQ(got, want) << "iteration " << iter;
  }
}

TEST(FillPlanner, DirectIoReadsAreAlignedAndMayEndPastEof) {
  std::string file(10000, 'a');
  VectorSegments segments({{5000, 4999, 0}});
  FillLimits limits;
  limits.alignment = 4096;
  limits.capacity = 4 * 4096;
  std::vector<StagingFill> fills = PlanAll(&segments, limits);
  ASSERT_EQ(fills.size(), 1u);
  const StagedRead& r = fills[0].reads[0];
  EXPECT_EQ(r.file_offset, 4096u);
  EXPECT_EQ(r.length, 8192u);  // covers 4096..12288, past the 10000-byte end
  EXPECT_EQ(r.required, 9999u - 4096u);  // bytes 5000..9998 must arrive
  EXPECT_EQ(fills[0].copies[0].staging_offset, 5000u - 4096u);
}

TEST(FillLimitsTest, RejectsNonsense) {
  FillLimits limits;
  limits.alignment = 3;
  EXPECT_FALSE(ValidateFillLimits(limits).ok());
  limits.alignment = 4096;
  limits.capacity = 4096;
  EXPECT_FALSE(ValidateFillLimits(limits).ok());
  limits.capacity = 3 * 4096 + 1;
  EXPECT_FALSE(ValidateFillLimits(limits).ok());
  limits.capacity = 3 * 4096;
  limits.max_reads = 0;
  EXPECT_FALSE(ValidateFillLimits(limits).ok());
}

SlicePlan MakePlan(uint64_t base, uint64_t run, std::vector<uint64_t> counts, std::vector<uint64_t> strides) {
  SlicePlan p;
  p.base_offset = base;
  p.run_bytes = run;
  p.outer_counts = std::move(counts);
  p.outer_strides = std::move(strides);
  p.result_bytes = run;
  for (uint64_t c : p.outer_counts) p.result_bytes *= c;
  return p;
}

std::vector<Segment> Drain(SegmentStream* s) {
  std::vector<Segment> out;
  Segment seg;
  while (s->Next(&seg)) out.push_back(seg);
  return out;
}

TEST(PlanSegmentsTest, FoldsContiguousRowsIntoOneSegment) {
  // Rows 2..6 of a [10, 256]-byte matrix, described one run per row.
  PlanSegments segs(MakePlan(512, 256, {4}, {256}), 1000, 0x10000);
  std::vector<Segment> out = Drain(&segs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].file_offset, 1512u);
  EXPECT_EQ(out[0].length, 1024u);
  EXPECT_EQ(out[0].dst, 0x10000u);
}

TEST(PlanSegmentsTest, WalksStridedRunsInResultOrder) {
  // [2, 3, 8] bytes, slice [:, ::2, 2:6]: runs of 4 at 2 + 24 i + 16 j.
  PlanSegments segs(MakePlan(2, 4, {2, 2}, {24, 16}), 0, 100);
  std::vector<Segment> out = Drain(&segs);
  ASSERT_EQ(out.size(), 4u);
  const uint64_t want[] = {2, 18, 26, 42};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i].file_offset, want[i]);
    EXPECT_EQ(out[i].dst, 100u + 4u * i);
  }
}

TEST(PlanSegmentsTest, EmptyPlanYieldsNothing) {
  PlanSegments segs(MakePlan(0, 4, {0, 3}, {12, 4}), 0, 0);
  EXPECT_TRUE(Drain(&segs).empty());
}

TEST(CheckPlanBoundsTest, CatchesInconsistentPlans) {
  EXPECT_TRUE(CheckPlanBounds(MakePlan(0, 4, {3}, {8}), 24).ok());
  EXPECT_FALSE(CheckPlanBounds(MakePlan(0, 4, {3}, {8}), 19).ok());  // last run ends at 20
  SlicePlan bad = MakePlan(0, 4, {3}, {8});
  bad.result_bytes = 11;
  EXPECT_EQ(CheckPlanBounds(bad, 24).code(), StatusCode::kInternal);
  bad = MakePlan(0, 4, {3}, {8});
  bad.outer_strides.push_back(1);
  EXPECT_FALSE(CheckPlanBounds(bad, 24).ok());
}

}  // namespace
}  // namespace stfs::gpu
