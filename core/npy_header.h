// NumPy .npy headers for tensor bytes: `data.npy` is EncodeNpyHeader(...)
// followed by the tensor's bytes unchanged, so numpy.load(mmap_mode='r')
// maps the tensor with zero copies.
//
// The header is byte for byte what numpy.save writes for the same dtype and
// shape (numpy >= 1.24: keys sorted, 21-digit growth room after the first
// dimension, padded with spaces to a multiple of 64 bytes, ending in '\n';
// version 1.0, or 2.0 when the header does not fit in 65535 bytes).
//
// Dtypes numpy lacks are given a faithful stand-in of the same element size,
// so the bytes and the array geometry are exact and only the interpretation
// is left to the reader: BF16 -> '<u2', the F8 family (E4M3, E5M2, the FNUZ
// variants, E8M0) -> '|u1'. Sub-byte dtypes (F4, F6_E2M3, F6_E3M2) become
// packed bytes '|u1': the last dimension becomes its byte count when it holds
// whole bytes, else the array is one-dimensional of the total byte count; a
// bit count that is not whole bytes cannot be described (no .npy). An .npy
// header has room for no extra keys (numpy refuses them), so the true dtype
// is recorded where it always is: the tensor's `dtype` file beside data.npy.
// This file never reads tensor bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace stfs {

// How a dtype is written in an .npy header.
struct NpyType {
  std::string_view descr;  // numpy dtype.str: "<f2", "|b1", "<u2" (BF16), ...
  bool exact;              // numpy has this dtype; false for a stand-in
};

// Returns the .npy descriptor of `dtype` (a stand-in where numpy lacks it).
NpyType NpyTypeOf(DType dtype);

// Returns the shape the .npy header declares for a tensor of `dtype` and
// `shape`: `shape` itself for whole-byte dtypes; for sub-byte dtypes the
// packed-byte shape described above. NotSupported when the tensor's bits are
// not whole bytes.
StatusOr<std::vector<uint64_t>> NpyShapeOf(DType dtype, const std::vector<uint64_t>& shape);

// Returns the complete .npy header (magic, version, length, dict, padding)
// for an array of `dtype` and `shape`; its size is a multiple of 64.
// NotSupported when the bytes cannot be described.
StatusOr<std::string> EncodeNpyHeader(DType dtype, const std::vector<uint64_t>& shape);

// Where a read of [offset, offset + length) of an .npy file made of a
// `header_size`-byte header and `data_size` data bytes falls: first the
// header's bytes, then the data's. Lengths are clipped at the file's end.
struct NpyReadSplit {
  uint64_t header_offset = 0;
  uint64_t header_length = 0;  // bytes to copy from the header string
  uint64_t data_offset = 0;    // offset inside the tensor's data
  uint64_t data_length = 0;    // bytes to read from the tensor's data
};
NpyReadSplit SplitNpyRead(uint64_t header_size, uint64_t data_size, uint64_t offset, uint64_t length);

}  // namespace stfs
