// Reads a byte range of a slice's result straight from the source.
//
// The result of a SlicePlan is the concatenation of its runs; a reader asks
// for bytes [offset, offset+length) of that result, and this maps them to
// source windows without materialising the windows or the slice. Small runs
// that lie close together are fetched with one read of their span and
// gathered, so a strided slice costs few reads, not one per element.
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
                                uint64_t offset, size_t length, char* dst);

}  // namespace stfs
