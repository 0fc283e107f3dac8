// Slice result ranges -> source runs (see slice_reader.h).
#include "core/slice_reader.h"

#include <algorithm>
#include <vector>

namespace stfs {
namespace {

// Runs handed to the source per ReadRuns call, bounding memory per request
// (16 bytes a run) whatever the slice.
constexpr size_t kMaxBatch = 4096;

}  // namespace

uint64_t SliceSourceEnd(uint64_t tensor_start, const SlicePlan& plan) {
  uint64_t end = tensor_start + plan.base_offset;
  if (plan.result_bytes == 0) return end;
  if (plan.outer_counts.empty()) return end + plan.result_bytes;
  for (size_t j = 0; j < plan.outer_counts.size(); ++j) end += (plan.outer_counts[j] - 1) * plan.outer_strides[j];
  return end + plan.run_bytes;
}

StatusOr<size_t> ReadSliceRange(const ByteSource& source, uint64_t tensor_start, const SlicePlan& plan,
                                uint64_t offset, size_t length, char* dst, const ReadHint& hint) {
  if (offset >= plan.result_bytes || length == 0) return size_t{0};
  length = static_cast<size_t>(std::min<uint64_t>(length, plan.result_bytes - offset));

  // Runs of the request, one per plan run it touches (adjacent ones merged).
  std::vector<ByteRun> batch;
  batch.reserve(std::min<uint64_t>(kMaxBatch, plan.run_bytes ? length / plan.run_bytes + 2 : 1));
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status::OK();
    Status status = source.ReadRuns(batch, hint);
    batch.clear();
    return status;
  };
  auto add = [&](uint64_t src, size_t take, size_t dst_offset) -> Status {
    if (!batch.empty() && batch.back().offset + batch.back().length == src) {
      batch.back().length += take;
      return Status::OK();
    }
    if (batch.size() == kMaxBatch) RETURN_IF_ERROR(flush());
    batch.push_back(ByteRun{src, take, dst + dst_offset});
    return Status::OK();
  };

  if (plan.outer_counts.empty()) {
    RETURN_IF_ERROR(add(tensor_start + plan.base_offset + offset, length, 0));
  } else {
    const uint64_t run = plan.run_bytes;
    const size_t dims = plan.outer_counts.size();
    uint64_t run_index = offset / run;
    uint64_t within = offset % run;
    // Multi-index of the first run touched (row-major over outer_counts).
    std::vector<uint64_t> index(dims);
    for (size_t j = dims; j-- > 0;) {
      index[j] = run_index % plan.outer_counts[j];
      run_index /= plan.outer_counts[j];
    }
    size_t done = 0;
    while (done < length) {
      uint64_t run_start = tensor_start + plan.base_offset;
      for (size_t j = 0; j < dims; ++j) run_start += index[j] * plan.outer_strides[j];
      size_t take = static_cast<size_t>(std::min<uint64_t>(run - within, length - done));
      RETURN_IF_ERROR(add(run_start + within, take, done));
      done += take;
      within = 0;
      for (size_t j = dims; j-- > 0;) {  // next run
        if (++index[j] < plan.outer_counts[j]) break;
        index[j] = 0;
      }
    }
  }
  RETURN_IF_ERROR(flush());
  return length;
}

}  // namespace stfs
