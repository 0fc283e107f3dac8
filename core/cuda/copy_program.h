// The copy program: which source bytes go into which staging buffer, and
// which copies then place them in the destination.
//
// This is the planning half of the GPU loader, kept apart from execution so
// that it runs (and is tested byte-exact) without a GPU. A load is a stream
// of Segments (a run of file bytes and where the run goes); FillPlanner cuts
// that stream into StagingFills, each of which fits one staging buffer:
//   - reads: file ranges to pread into the buffer. Segments closer together
//     than `max_gap` share one read (the covering read of a column shard);
//   - copies: 1-D or 2-D (pitched) copies from the buffer to the destination.
//     Equal-width runs at a constant stride merge into one 2-D copy, so a
//     column shard costs one cudaMemcpy2DAsync per buffer, not one per row.
//     Copies merge only within one request (one destination): a copy never
//     spans two destinations, however their addresses happen to lie.
//     copy_interpreter.h checks that rule byte by byte.
// Memory is bounded: segments are pulled lazily and each fill holds at most
// `max_reads` reads and `max_copies` copies, whatever the tensor size.
// Nothing here touches a file, a device or a thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/slice_plan.h"
#include "core/status.h"

namespace stfs::gpu {

// A run of source bytes and the destination address it belongs at.
struct Segment {
  uint64_t file_offset = 0;
  uint64_t length = 0;
  uintptr_t dst = 0;     // an address in the destination memory (device or host)
  uint32_t request = 0;  // which request (and so which destination) it belongs to
};

// Yields segments one at a time, in the order they should be loaded.
class SegmentStream {
 public:
  virtual ~SegmentStream() = default;
  // Stores the next segment in `out`; returns false when none remain.
  virtual bool Next(Segment* out) = 0;
};

// One pread into a staging buffer. With direct I/O, `file_offset`,
// `length` and `staging_offset` are multiples of the alignment and only the
// first `required` bytes must arrive (the rest may lie past the end of file).
struct StagedRead {
  uint64_t file_offset = 0;
  uint64_t length = 0;
  uint64_t required = 0;
  uint64_t staging_offset = 0;
};

// Copies `height` rows of `width` bytes: row r goes from
// staging + staging_offset + r * src_pitch to dst + r * dst_pitch.
// A 1-D copy has height 1 (pitches then unused).
struct StagedCopy {
  uint64_t staging_offset = 0;
  uint64_t src_pitch = 0;
  uintptr_t dst = 0;
  uint64_t dst_pitch = 0;
  uint64_t width = 0;
  uint64_t height = 1;
  uint32_t request = 0;  // the one request whose destination every row lies in

  uint64_t bytes() const { return width * height; }
  bool operator==(const StagedCopy&) const = default;
};

// What one staging buffer receives and where its bytes then go.
struct StagingFill {
  std::vector<StagedRead> reads;
  std::vector<StagedCopy> copies;
  uint64_t staging_bytes = 0;  // highest staging offset used, plus one

  void Clear() { reads.clear(); copies.clear(); staging_bytes = 0; }
  uint64_t ReadBytes() const;
  uint64_t CopiedBytes() const;
};

struct FillLimits {
  uint64_t capacity = 16 << 20;  // bytes of one staging buffer
  uint64_t alignment = 1;        // direct I/O: the block size (a power of two)
  uint64_t max_gap = 32 << 10;   // read through holes up to this size
  size_t max_reads = 4096;       // per fill
  size_t max_copies = 4096;      // per fill
};

// Rows further apart than this never merge into one 2-D copy (pitch limits
// of the copy engines).
inline constexpr uint64_t kMaxCopyPitch = uint64_t{1} << 30;

// Checks limits for sense: capacity of at least two alignment blocks, a
// power-of-two alignment, non-zero per-fill bounds.
Status ValidateFillLimits(const FillLimits& limits);

// Cuts a segment stream into staging fills (see the top of this file).
class FillPlanner {
 public:
  // `segments` must outlive the planner; `limits` must have passed
  // ValidateFillLimits.
  FillPlanner(SegmentStream* segments, const FillLimits& limits);

  // Plans the next fill into `fill`; returns false when the stream is done.
  bool Next(StagingFill* fill);
  // True when segments remain for another fill.
  bool HasMore() { return Peek(); }

 private:
  bool Peek();  // makes pending_ hold a segment with bytes left, if any
  void AddCopy(StagingFill* fill, uint64_t staging_offset, uintptr_t dst, uint64_t width, uint32_t request);

  SegmentStream* const segments_;
  const FillLimits limits_;
  Segment pending_;
  bool has_pending_ = false;
  bool exhausted_ = false;
};

// The segments of one slice plan of a tensor whose first byte sits at
// `tensor_file_offset`, placed packed (in result order) from `dst`. Walks
// the plan's structured form lazily: O(dims) memory for any slice.
class PlanSegments final : public SegmentStream {
 public:
  PlanSegments(const SlicePlan& plan, uint64_t tensor_file_offset, uintptr_t dst, uint32_t request = 0);
  bool Next(Segment* out) override;

 private:
  uint32_t request_ = 0;
  uint64_t base_ = 0;
  uint64_t run_ = 0;
  std::vector<uint64_t> counts_;
  std::vector<uint64_t> strides_;
  std::vector<uint64_t> index_;
  uintptr_t dst_ = 0;
  bool done_ = false;
};

// The segments of many planned requests, one after another in the order
// added; request ids travel with their segments.
class BatchSegments final : public SegmentStream {
 public:
  void Add(const SlicePlan& plan, uint64_t tensor_file_offset, uintptr_t dst, uint32_t request) {
    items_.emplace_back(plan, tensor_file_offset, dst, request);
  }
  bool Next(Segment* out) override;

 private:
  std::vector<PlanSegments> items_;
  size_t current_ = 0;
};

// Checks that `plan` is self-consistent and stays inside a tensor of
// `tensor_bytes` bytes: run_bytes times the outer counts is result_bytes and
// the last run ends inside the tensor. Guards the loader against planner bugs.
Status CheckPlanBounds(const SlicePlan& plan, uint64_t tensor_bytes);

}  // namespace stfs::gpu
