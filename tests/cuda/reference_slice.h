// An independent reference for numpy basic indexing on raw tensor bytes,
// used to check the GPU loader byte for byte.
//
// It must never share code with the core slice planner or the loader: it
// enumerates result elements one by one (bit by bit for 4- and 6-bit
// dtypes) from the numpy rules, so it is slow and obviously right.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/slice_plan.h"

namespace stfs::gpu::testing {

struct ReferenceSlice {
  std::vector<uint64_t> shape;
  std::string bytes;
};

// Applies `items` to a tensor of `dtype` and `shape` whose bytes are
// `tensor`; nullopt when numpy would raise (index out of range, step < 1,
// two ellipses, too many indices).
std::optional<ReferenceSlice> ReferenceSliceOf(DType dtype, const std::vector<uint64_t>& shape,
                                               const std::string& tensor, const std::vector<SliceItem>& items);

// Returns a random index for `shape`: a mix of integers (some negative,
// some out of range when `allow_invalid`), ranges with omitted / negative /
// oversized bounds and steps 1..3, and sometimes an ellipsis.
std::vector<SliceItem> RandomSlice(std::mt19937_64& rng, const std::vector<uint64_t>& shape, bool allow_invalid);

// Renders items as numpy text ("1:3, ..., -1"), for failure messages and to
// exercise ParseSliceSpec.
std::string SliceText(const std::vector<SliceItem>& items);

}  // namespace stfs::gpu::testing
