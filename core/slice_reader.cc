// Slice result ranges -> source reads (see slice_reader.h).
#include "core/slice_reader.h"

#include <algorithm>
#include <vector>

namespace stfs {
namespace {

// A piece of the requested range: `length` result bytes from `source_offset`.
struct Piece {
  uint64_t source_offset;
  size_t length;
  size_t dst_offset;
};

// A gathered span is read in one go when it is at most this large, not much
// larger than the bytes it delivers, and its gaps are small on average: one
// read per run costs more than copying a gap of a few KiB, but wider gaps
// (a column piece's 56 KiB between 8 KiB rows) are left unread, so the
// source gives only the bytes asked for (rank parts: <= 1.1x the part).
constexpr uint64_t kMaxGatherSpan = 8 << 20;
constexpr uint64_t kMaxGatherOverread = 16;
constexpr uint64_t kMaxAverageGatherGap = 4096;
// Pieces handled per gather, bounding memory per request.
constexpr size_t kMaxBatch = 4096;

}  // namespace

StatusOr<size_t> ReadSliceRange(const ByteSource& source, uint64_t tensor_start, const SlicePlan& plan,
                                uint64_t offset, size_t length, char* dst) {
  if (offset >= plan.result_bytes || length == 0) return size_t{0};
  length = static_cast<size_t>(std::min<uint64_t>(length, plan.result_bytes - offset));

  // Pieces of the request, one per run it touches (adjacent ones merged),
  // handled in bounded batches so memory stays small whatever the run size.
  std::vector<Piece> batch;
  batch.reserve(kMaxBatch);
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status::OK();
    const uint64_t span_begin = batch.front().source_offset;
    const uint64_t span_end = batch.back().source_offset + batch.back().length;
    uint64_t delivered = 0;
    bool ascending = true;
    for (size_t i = 0; i < batch.size(); ++i) {
      delivered += batch[i].length;
      if (i && batch[i].source_offset < batch[i - 1].source_offset + batch[i - 1].length) ascending = false;
    }
    if (batch.size() > 1 && ascending && span_end - span_begin <= kMaxGatherSpan &&
        span_end - span_begin <= kMaxGatherOverread * delivered &&
        span_end - span_begin - delivered <= kMaxAverageGatherGap * (batch.size() - 1)) {
      thread_local std::vector<char> span;
      span.resize(span_end - span_begin);
      RETURN_IF_ERROR(ReadExactly(source, span_begin, span.size(), span.data()));
      for (const Piece& p : batch) {
        std::copy_n(span.data() + (p.source_offset - span_begin), p.length, dst + p.dst_offset);
      }
    } else {
      for (const Piece& p : batch) RETURN_IF_ERROR(ReadExactly(source, p.source_offset, p.length, dst + p.dst_offset));
    }
    batch.clear();
    return Status::OK();
  };
  auto add = [&](uint64_t src, size_t take, size_t dst_offset) -> Status {
    if (!batch.empty() && batch.back().source_offset + batch.back().length == src) {
      batch.back().length += take;
      return Status::OK();
    }
    if (batch.size() == kMaxBatch) RETURN_IF_ERROR(flush());
    batch.push_back({src, take, dst_offset});
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
