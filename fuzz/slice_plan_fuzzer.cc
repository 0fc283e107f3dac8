// Fuzz target: numpy index text parsed by ParseSliceSpec and planned by
// PlanSlice on a tensor whose dtype and shape come from the first bytes.
// An accepted plan must name windows inside the tensor that never overlap or
// touch, whose lengths add up to result_bytes, in increasing order, and
// whose count WindowCount() predicts.
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/header.h"
#include "core/slice_plan.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto& dtypes = stfs::AllDTypes();
  const stfs::DType dtype = dtypes[data[0] % dtypes.size()];
  const size_t rank = data[1] % 5;
  if (size < 2 + rank) return 0;
  std::vector<uint64_t> shape;
  for (size_t i = 0; i < rank; ++i) {
    uint8_t b = data[2 + i];
    // Mostly small dims, sometimes zero or huge (overflow paths).
    shape.push_back(b == 255 ? (uint64_t{1} << 40) : b % 17);
  }
  std::string_view spec(reinterpret_cast<const char*>(data) + 2 + rank, size - 2 - rank);
  stfs::StatusOr<uint64_t> tensor_bytes = stfs::TensorByteSize(dtype, shape);
  if (!tensor_bytes.ok()) return 0;
  stfs::StatusOr<std::vector<stfs::SliceItem>> items = stfs::ParseSliceSpec(spec);
  if (!items.ok()) return 0;
  stfs::StatusOr<stfs::SlicePlan> plan = stfs::PlanSlice(dtype, shape, *items);
  if (!plan.ok()) return 0;

  uint64_t elements = 1;
  for (uint64_t d : plan->result_shape) elements *= d;  // the result is no bigger than the tensor
  FUZZ_CHECK(plan->result_bytes <= *tensor_bytes);
  FUZZ_CHECK(elements * stfs::DTypeBits(dtype) == plan->result_bytes * 8);
  uint64_t windows = 0, bytes = 0, end = 0;
  bool first = true;
  plan->ForEachWindow([&](const stfs::ByteWindow& w) {
    FUZZ_CHECK(w.length > 0);
    FUZZ_CHECK(w.offset + w.length <= *tensor_bytes);
    FUZZ_CHECK(first || w.offset > end);  // in order, neither overlapping nor touching
    first = false;
    end = w.offset + w.length;
    bytes += w.length;
    return ++windows < 100'000;
  });
  if (windows < 100'000) {
    FUZZ_CHECK(windows == plan->WindowCount());
    FUZZ_CHECK(bytes == plan->result_bytes);
  }
  return 0;
}
