// The copy-program interpreter and the property it checks: over random
// batches (many destinations, adjacent and interleaved in memory, every
// dtype, random slices and shards), no copy writes a byte outside its own
// request's destination, every result byte is written exactly once, and the
// bytes equal an independent reference slice. Plus the regression that
// motivated it: two requests' rows must never merge into one 2-D copy.
#include "core/cuda/copy_interpreter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/loader.h"
#include "tests/cuda/plan_test_util.h"
#include "tests/cuda/reference_slice.h"

namespace stfs::gpu {
namespace {

using testing::PlanAll;
using testing::RandomShape;
using testing::RandomSlice;
using testing::ReferenceSliceOf;
using testing::SliceText;
using testing::VectorSegments;

TEST(CopyInterpreter, RowsOfTwoRequestsNeverShareA2DCopy) {
  // Equal-width rows of two requests whose file and destination offsets
  // both increase: the old planner merged them into one 2-D copy whose
  // pitch spanned the 200 MiB between the two allocations.
  const uintptr_t a = 0x10000000, b = a + (200u << 20);
  VectorSegments segments({{0, 100, a, 0}, {300, 100, b, 1}});
  FillLimits limits;
  limits.capacity = 4096;
  std::vector<StagingFill> fills = PlanAll(&segments, limits);
  ASSERT_EQ(fills.size(), 1u);
  ASSERT_EQ(fills[0].copies.size(), 2u);
  EXPECT_EQ(fills[0].copies[0].height, 1u);
  EXPECT_EQ(fills[0].copies[0].request, 0u);
  EXPECT_EQ(fills[0].copies[1].request, 1u);
}

TEST(CopyInterpreter, ContiguousRowsOfTwoRequestsStayTwoCopies) {
  // Back-to-back in the file and in memory: still one copy per destination.
  VectorSegments segments({{0, 64, 0x1000, 0}, {64, 64, 0x1040, 1}});
  FillLimits limits;
  limits.capacity = 4096;
  std::vector<StagingFill> fills = PlanAll(&segments, limits);
  ASSERT_EQ(fills.size(), 1u);
  EXPECT_EQ(fills[0].copies.size(), 2u);
}

TEST(CopyInterpreter, FlagsAWriteIntoAnotherRequestsDestination) {
  auto in = CopyInterpreter::Create(0x1000, 256, {{0, 0x1000, 64, 64}, {1, 0x1040, 64, 64}});
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  StagingFill fill;
  fill.reads.push_back({0, 128, 128, 0});
  StagedCopy c;  // request 0's copy, two rows, the second in request 1's destination
  c.dst = 0x1000;
  c.width = 32;
  c.height = 2;
  c.src_pitch = 64;
  c.dst_pitch = 64;
  c.request = 0;
  fill.copies.push_back(c);
  Status s = in->Run(fill, std::string(256, 'x'), 256);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("destination of request 1"), std::string::npos) << s.message();
}

TEST(CopyInterpreter, FlagsWritesOutsideEveryDestinationAndUnfilledStaging) {
  auto in = CopyInterpreter::Create(0x1000, 256, {{0, 0x1000, 64, 64}});
  ASSERT_TRUE(in.ok());
  StagingFill fill;
  fill.reads.push_back({0, 64, 64, 0});
  StagedCopy c;
  c.dst = 0x1020;
  c.width = 64;  // ends 32 bytes past the destination
  fill.copies.push_back(c);
  EXPECT_NE(in->Run(fill, std::string(256, 'x'), 256).message().find("past the end of its own destination"),
            std::string::npos);
  fill.copies[0].dst = 0x1080;
  fill.copies[0].width = 16;
  EXPECT_NE(in->Run(fill, std::string(256, 'x'), 256).message().find("outside every destination"),
            std::string::npos);
  fill.copies[0].width = 64;
  fill.copies[0].dst = 0x1000;
  fill.copies[0].staging_offset = 32;  // bytes 64..96 of staging were never read
  EXPECT_NE(in->Run(fill, std::string(256, 'x'), 256).message().find("no read filled"), std::string::npos);
}

TEST(CopyInterpreter, CheckCompleteWantsEveryByteOnce) {
  auto in = CopyInterpreter::Create(0, 128, {{0, 0, 64, 64}});
  ASSERT_TRUE(in.ok());
  StagingFill fill;
  fill.reads.push_back({0, 64, 64, 0});
  StagedCopy c;
  c.width = 32;
  fill.copies.push_back(c);
  ASSERT_TRUE(in->Run(fill, std::string(64, 'y'), 64).ok());
  EXPECT_FALSE(in->CheckComplete().ok());  // bytes 32..64 missing
  fill.copies[0].width = 64;
  ASSERT_TRUE(in->Run(fill, std::string(64, 'y'), 64).ok());
  EXPECT_FALSE(in->CheckComplete().ok());  // bytes 0..32 written twice
  EXPECT_FALSE(CopyInterpreter::Create(0, 128, {{0, 0, 64, 64}, {1, 32, 64, 64}}).ok());  // overlap
}

// ---- the property test ------------------------------------------------------

struct FileTensor {
  DType dtype;
  std::vector<uint64_t> shape;
  uint64_t offset;  // in the file
  std::string bytes;
};

uint64_t ByteSize(DType dtype, const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n * DTypeBits(dtype) / 8;
}

struct Request {
  size_t tensor;
  std::vector<SliceItem> slice;
  SlicePlan plan;
};

// A slice of `shape`: random, a row or column shard of a random rank, or all.
std::vector<SliceItem> RandomRequestSlice(std::mt19937_64& rng, const std::vector<uint64_t>& shape) {
  const int kind = static_cast<int>(rng() % 4);
  if (kind == 0 || shape.empty()) return {};
  if (kind == 1) {
    const int world = 1 + static_cast<int>(rng() % 8);
    const int dim = rng() % 2 == 0 ? 0 : -1;
    auto items = ShardSlice(shape, dim, static_cast<int>(rng() % static_cast<uint64_t>(world)), world);
    if (items.ok()) return *items;
  }
  return RandomSlice(rng, shape, /*allow_invalid=*/false);
}

TEST(CopyInterpreter, RandomBatchesWriteOnlyTheirOwnDestinations) {
  std::mt19937_64 rng(20261201);
  int batches = 0, copies_2d = 0, requests_total = 0;
  std::vector<int> dtype_seen(kDTypeCount, 0);
  for (int iter = 0; iter < 400; ++iter) {
    // The "file": tensors back to back (sometimes with holes), random bytes.
    std::vector<FileTensor> tensors;
    std::string file(static_cast<size_t>(rng() % 64), '\x11');  // a header stand-in
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      FileTensor t;
      t.dtype = AllDTypes()[(iter * 7 + i) % kDTypeCount];
      t.shape = RandomShape(rng, t.dtype, 24);
      if (rng() % 3 == 0) file.append(rng() % 40, '\x22');
      t.offset = file.size();
      t.bytes.resize(ByteSize(t.dtype, t.shape));
      for (char& c : t.bytes) c = static_cast<char>(rng() & 0xff);
      file += t.bytes;
      tensors.push_back(std::move(t));
    }
    // Many requests, the same tensor possibly more than once.
    std::vector<Request> requests;
    const int m = 1 + static_cast<int>(rng() % 24);
    for (int i = 0; i < m; ++i) {
      Request r;
      r.tensor = rng() % tensors.size();
      const FileTensor& t = tensors[r.tensor];
      r.slice = RandomRequestSlice(rng, t.shape);
      auto plan = PlanSlice(t.dtype, t.shape, r.slice);
      if (!plan.ok()) continue;  // e.g. a sub-byte window off a byte boundary
      r.plan = *plan;
      requests.push_back(std::move(r));
    }
    if (requests.empty()) continue;
    // Destinations: adjacent (packed), or interleaved in a shuffled order
    // with small holes, sometimes with spare capacity.
    const uintptr_t base = 0x7f0000000000;
    std::vector<size_t> order(requests.size());
    std::iota(order.begin(), order.end(), 0);
    const bool interleaved = rng() % 2 == 0;
    if (interleaved) std::shuffle(order.begin(), order.end(), rng);
    std::vector<Destination> dests(requests.size());
    uint64_t cursor = 0;
    for (size_t k : order) {
      if (interleaved) cursor += rng() % 4;
      const uint64_t bytes = requests[k].plan.result_bytes;
      const uint64_t slack = rng() % 3 == 0 ? rng() % 16 : 0;
      dests[k] = {static_cast<uint32_t>(k), base + cursor, bytes + slack, bytes};
      cursor += bytes + slack;
    }
    auto in = CopyInterpreter::Create(base, cursor + 8, dests);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    // Segments in file order, as the loader sorts them, or as given.
    std::vector<size_t> load_order(requests.size());
    std::iota(load_order.begin(), load_order.end(), 0);
    if (rng() % 4 != 0) {
      std::stable_sort(load_order.begin(), load_order.end(), [&](size_t x, size_t y) {
        return tensors[requests[x].tensor].offset + requests[x].plan.base_offset <
               tensors[requests[y].tensor].offset + requests[y].plan.base_offset;
      });
    }
    BatchSegments segments;
    for (size_t k : load_order) {
      segments.Add(requests[k].plan, tensors[requests[k].tensor].offset, dests[k].address,
                   static_cast<uint32_t>(k));
    }
    FillLimits limits;
    limits.alignment = rng() % 4 == 0 ? 64 : 1;
    limits.capacity = limits.alignment * (2 + rng() % 32) + (limits.alignment == 1 ? rng() % 2000 : 0);
    const uint64_t gaps[] = {0, 8, 200, 1 << 20};
    limits.max_gap = gaps[rng() % 4];
    limits.max_reads = 1 + rng() % 64;
    limits.max_copies = 1 + rng() % 64;
    ASSERT_TRUE(ValidateFillLimits(limits).ok());
    FillPlanner planner(&segments, limits);
    StagingFill fill;
    while (planner.Next(&fill)) {
      for (const StagedCopy& c : fill.copies) copies_2d += c.height > 1;
      Status s = in->Run(fill, file, limits.capacity);
      ASSERT_TRUE(s.ok()) << "iteration " << iter << ": " << s.ToString();
    }
    Status complete = in->CheckComplete();
    ASSERT_TRUE(complete.ok()) << "iteration " << iter << ": " << complete.ToString();
    for (size_t k = 0; k < requests.size(); ++k) {
      const FileTensor& t = tensors[requests[k].tensor];
      auto want = ReferenceSliceOf(t.dtype, t.shape, t.bytes, requests[k].slice);
      ASSERT_TRUE(want.has_value());
      ASSERT_EQ(in->Bytes(dests[k].address, requests[k].plan.result_bytes), want->bytes)
          << "iteration " << iter << ", request " << k << " [" << SliceText(requests[k].slice) << "]";
      ++dtype_seen[static_cast<size_t>(t.dtype)];
    }
    ++batches;
    requests_total += static_cast<int>(requests.size());
  }
  EXPECT_GT(batches, 300);
  EXPECT_GT(copies_2d, 100) << "the batches should exercise 2-D copies";
  for (DType d : AllDTypes()) EXPECT_GT(dtype_seen[static_cast<size_t>(d)], 0) << DTypeName(d);
  RecordProperty("requests", requests_total);
}

}  // namespace
}  // namespace stfs::gpu
