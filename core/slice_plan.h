// The slice planner: numpy basic indexing on a tensor -> the result's shape
// and the fewest byte windows of the source that hold it, in result order.
//
// This is the heart of on-demand slicing: the filesystem's slice views and
// the GPU loader both read exactly the windows a plan names and nothing else.
// Plans are structured (an outer multi-index over strided runs) so that a
// column shard of a huge matrix costs O(dims) memory; windows are produced by
// iteration with adjacent runs merged, or materialised when small.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/header.h"
#include "core/status.h"

namespace stfs {

// One item of a numpy basic index.
struct SliceItem {
  enum class Kind { kIndex, kRange, kEllipsis };
  Kind kind = Kind::kRange;
  int64_t index = 0;              // kIndex: may be negative (from the end)
  std::optional<int64_t> start;   // kRange: omitted bounds are nullopt
  std::optional<int64_t> stop;
  int64_t step = 1;               // kRange: must be >= 1

  static SliceItem Index(int64_t i) { SliceItem s; s.kind = Kind::kIndex; s.index = i; return s; }
  static SliceItem Range(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1) {
    SliceItem s; s.kind = Kind::kRange; s.start = start; s.stop = stop; s.step = step; return s;
  }
  static SliceItem All() { return Range(std::nullopt, std::nullopt, 1); }
  static SliceItem Ellipsis() { SliceItem s; s.kind = Kind::kEllipsis; return s; }
};

// Parses numpy index text: "3", "0:10", "::2", "-1", "...", "1:3, ..., 0"
// (items separated by commas, whitespace ignored; "" selects everything).
StatusOr<std::vector<SliceItem>> ParseSliceSpec(std::string_view text);

// A run of bytes, relative to the tensor's first byte.
struct ByteWindow {
  uint64_t offset = 0;
  uint64_t length = 0;
  bool operator==(const ByteWindow&) const = default;
};

// What a slice reads. Windows, before merging, are:
//   for each multi-index (i_0..i_{k-1}) over outer_counts (row-major):
//     offset = base_offset + sum(i_j * outer_strides[j]), length = run_bytes
// and ForEachWindow merges those that touch into one.
struct SlicePlan {
  DType dtype = DType::U8;
  std::vector<uint64_t> result_shape;   // numpy result shape (integers drop a dim)
  uint64_t result_bytes = 0;            // total bytes of the result
  uint64_t base_offset = 0;             // bytes from the tensor's first byte
  uint64_t run_bytes = 0;               // length of each unmerged run
  std::vector<uint64_t> outer_counts;   // empty: a single run (or none if result_bytes == 0)
  std::vector<uint64_t> outer_strides;  // bytes, same length as outer_counts

  // Calls `visit` for each merged window in result order; stops early when
  // `visit` returns false. Windows never overlap and never touch.
  void ForEachWindow(const std::function<bool(const ByteWindow&)>& visit) const;
  // Returns all merged windows (use ForEachWindow for plans with many runs).
  std::vector<ByteWindow> Windows() const;
  // Number of merged windows, computed from the structure in O(dims).
  uint64_t WindowCount() const;
};

// Plans `items` on a tensor of `dtype` and `shape`. Errors: an index out of
// range, a step < 1, more than one ellipsis, too many indices, and for 4/6-bit
// dtypes a window that does not start and end on a byte boundary.
StatusOr<SlicePlan> PlanSlice(DType dtype, const std::vector<uint64_t>& shape,
                              const std::vector<SliceItem>& items);

}  // namespace stfs
