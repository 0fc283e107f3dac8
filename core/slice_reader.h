// Reads a byte range of a slice's result straight from the source.
//
// The result of a SlicePlan is the concatenation of its runs; a reader asks
// for bytes [offset, offset+length) of that result, and this maps them to
// source runs without materialising the windows or the slice. The runs go to
// the source's ReadRuns in bounded batches: how to fetch them (coalescing
// close runs, fetching far ones in parallel) is the source's business, since
// only it knows what a request costs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/byte_source.h"
#include "core/slice_plan.h"
#include "core/status.h"

namespace stfs {

// Reads up to `length` bytes at `offset` of the slice result into `dst`;
// `tensor_start` is the absolute source offset of the tensor's first byte.
// Returns the count, 0 at or past the end of the result.
StatusOr<size_t> ReadSliceRange(const ByteSource& source, uint64_t tensor_start, const SlicePlan& plan,
                                uint64_t offset, size_t length, char* dst, const ReadHint& hint);

// The absolute source offset just past the plan's last run: a view's bytes
// all lie before it, so it is the view's read-ahead fence (ReadHint::fence).
uint64_t SliceSourceEnd(uint64_t tensor_start, const SlicePlan& plan);

}  // namespace stfs
