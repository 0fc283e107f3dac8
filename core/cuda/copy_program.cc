// Planning of staging fills (see copy_program.h).
#include "core/cuda/copy_program.h"

#include <string>

namespace stfs::gpu {
namespace {

uint64_t AlignDown(uint64_t v, uint64_t a) { return v & ~(a - 1); }
uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

}  // namespace

uint64_t StagingFill::ReadBytes() const {
  uint64_t total = 0;
  for (const StagedRead& r : reads) total += r.length;
  return total;
}

uint64_t StagingFill::CopiedBytes() const {
  uint64_t total = 0;
  for (const StagedCopy& c : copies) total += c.bytes();
  return total;
}

Status ValidateFillLimits(const FillLimits& limits) {
  const uint64_t a = limits.alignment;
  if (a == 0 || (a & (a - 1)) != 0) {
    return Status::InvalidArgument("staging alignment " + std::to_string(a) +
                                   " is not a power of two");
  }
  if (limits.capacity < 2 * a || limits.capacity % a != 0) {
    return Status::InvalidArgument("staging buffer size " + std::to_string(limits.capacity) +
                                   " must be a multiple of " + std::to_string(a) +
                                   " and at least " + std::to_string(2 * a) + " bytes");
  }
  if (limits.max_reads == 0 || limits.max_copies == 0) {
    return Status::InvalidArgument("per-fill read and copy limits must be at least 1");
  }
  return Status::OK();
}

FillPlanner::FillPlanner(SegmentStream* segments, const FillLimits& limits)
    : segments_(segments), limits_(limits) {}

bool FillPlanner::Peek() {
  while (!has_pending_) {
    if (exhausted_) return false;
    if (!segments_->Next(&pending_)) {
      exhausted_ = true;
      return false;
    }
    has_pending_ = pending_.length > 0;
  }
  return true;
}

void FillPlanner::AddCopy(StagingFill* fill, uint64_t src, uintptr_t dst, uint64_t width, uint32_t request) {
  // Merging is only ever within one request: rows of two destinations are
  // never one copy, even when their addresses line up.
  if (!fill->copies.empty() && fill->copies.back().request == request) {
    StagedCopy& last = fill->copies.back();
    if (last.height == 1 && last.staging_offset + last.width == src && last.dst + last.width == dst) {
      last.width += width;  // contiguous on both sides: one longer 1-D copy
      return;
    }
    if (width == last.width) {
      if (last.height == 1) {
        if (src > last.staging_offset && dst > last.dst) {
          const uint64_t sp = src - last.staging_offset;
          const uint64_t dp = dst - last.dst;
          if (sp >= width && dp >= width && sp <= kMaxCopyPitch && dp <= kMaxCopyPitch) {
            last.src_pitch = sp;
            last.dst_pitch = dp;
            last.height = 2;
            return;
          }
        }
      } else if (src == last.staging_offset + last.height * last.src_pitch &&
                 dst == last.dst + last.height * last.dst_pitch) {
        ++last.height;
        return;
      }
    }
  }
  StagedCopy copy;
  copy.staging_offset = src;
  copy.dst = dst;
  copy.width = width;
  copy.request = request;
  fill->copies.push_back(copy);
}

bool FillPlanner::Next(StagingFill* fill) {
  fill->Clear();
  const uint64_t a = limits_.alignment;
  const uint64_t capacity = limits_.capacity;
  bool have_read = false;  // fill->reads.back() may still grow
  uint64_t read_end = 0;   // file offset one past the last byte it must hold

  // Moves `len` bytes of the pending segment into the last read.
  auto take = [&](uint64_t len) {
    StagedRead& read = fill->reads.back();
    AddCopy(fill, read.staging_offset + (pending_.file_offset - read.file_offset), pending_.dst, len,
            pending_.request);
    read_end = pending_.file_offset + len;
    read.required = read_end - read.file_offset;
    read.length = AlignUp(read_end, a) - read.file_offset;
    fill->staging_bytes = read.staging_offset + read.length;
    pending_.file_offset += len;
    pending_.dst += len;
    pending_.length -= len;
    if (pending_.length == 0) has_pending_ = false;
  };

  while (Peek()) {
    if (fill->copies.size() >= limits_.max_copies) break;
    // A segment bigger than an empty buffer holds is split wherever it falls.
    const bool oversized = pending_.length > capacity - a;
    if (have_read) {
      const StagedRead& read = fill->reads.back();
      const bool forward = pending_.file_offset >= read_end;
      if (forward && pending_.file_offset - read_end <= limits_.max_gap) {
        // Furthest file offset this read can reach inside the buffer
        // (aligned, since offsets and capacity are).
        const uint64_t limit_end = read.file_offset + (capacity - read.staging_offset);
        if (pending_.file_offset + pending_.length <= limit_end) {
          take(pending_.length);
          continue;
        }
        // Split only what continues the read seamlessly, or what would not
        // fit an empty buffer anyway; otherwise it starts the next fill.
        if (pending_.file_offset < limit_end && (pending_.file_offset == read_end || oversized)) {
          take(limit_end - pending_.file_offset);
        }
        break;
      }
    }
    // Start a new read for the pending segment.
    if (fill->reads.size() >= limits_.max_reads) break;
    const uint64_t staging_offset = AlignUp(fill->staging_bytes, a);
    if (staging_offset + a > capacity) break;
    const uint64_t start = AlignDown(pending_.file_offset, a);
    const uint64_t limit_end = start + (capacity - staging_offset);
    const bool fits = pending_.file_offset + pending_.length <= limit_end;
    if (!fits && !fill->reads.empty() && !oversized) break;
    StagedRead read;
    read.file_offset = start;
    read.staging_offset = staging_offset;
    fill->reads.push_back(read);
    have_read = true;
    if (fits) {
      take(pending_.length);
    } else {
      take(limit_end - pending_.file_offset);
      break;
    }
  }
  return !fill->reads.empty();
}

PlanSegments::PlanSegments(const SlicePlan& plan, uint64_t tensor_file_offset, uintptr_t dst,
                           uint32_t request)
    : request_(request), base_(tensor_file_offset + plan.base_offset), run_(plan.run_bytes), dst_(dst) {
  if (plan.result_bytes == 0 || plan.run_bytes == 0) {
    done_ = true;
    return;
  }
  for (size_t i = 0; i < plan.outer_counts.size() && i < plan.outer_strides.size(); ++i) {
    if (plan.outer_counts[i] == 0) {
      done_ = true;
      return;
    }
    if (plan.outer_counts[i] == 1) continue;  // contributes no offset
    counts_.push_back(plan.outer_counts[i]);
    strides_.push_back(plan.outer_strides[i]);
  }
  // Fold dimensions that the file lays out contiguously, so a row shard is
  // one segment rather than one per row.
  bool changed = true;
  while (changed) {
    changed = false;
    if (!counts_.empty() && strides_.back() == run_) {
      run_ *= counts_.back();
      counts_.pop_back();
      strides_.pop_back();
      changed = true;
      continue;
    }
    for (size_t j = 1; j < counts_.size(); ++j) {
      if (strides_[j - 1] == counts_[j] * strides_[j]) {
        counts_[j - 1] *= counts_[j];
        strides_[j - 1] = strides_[j];
        counts_.erase(counts_.begin() + static_cast<std::ptrdiff_t>(j));
        strides_.erase(strides_.begin() + static_cast<std::ptrdiff_t>(j));
        changed = true;
        break;
      }
    }
  }
  index_.assign(counts_.size(), 0);
}

bool PlanSegments::Next(Segment* out) {
  if (done_) return false;
  uint64_t offset = base_;
  for (size_t j = 0; j < index_.size(); ++j) offset += index_[j] * strides_[j];
  out->file_offset = offset;
  out->length = run_;
  out->dst = dst_;
  out->request = request_;
  dst_ += run_;
  // Advance the multi-index, innermost fastest.
  size_t j = index_.size();
  while (true) {
    if (j == 0) {
      done_ = true;
      break;
    }
    --j;
    if (++index_[j] < counts_[j]) break;
    index_[j] = 0;
  }
  return true;
}

bool BatchSegments::Next(Segment* out) {
  while (current_ < items_.size()) {
    if (items_[current_].Next(out)) return true;
    ++current_;
  }
  return false;
}

Status CheckPlanBounds(const SlicePlan& plan, uint64_t tensor_bytes) {
  if (plan.outer_counts.size() != plan.outer_strides.size()) {
    return Status::Internal("slice plan has " + std::to_string(plan.outer_counts.size()) +
                            " outer counts but " + std::to_string(plan.outer_strides.size()) +
                            " strides");
  }
  if (plan.result_bytes == 0) return Status::OK();
  unsigned __int128 total = plan.run_bytes;
  unsigned __int128 last = plan.base_offset;
  for (size_t i = 0; i < plan.outer_counts.size(); ++i) {
    total *= plan.outer_counts[i];
    if (plan.outer_counts[i] > 0) {
      last += static_cast<unsigned __int128>(plan.outer_counts[i] - 1) * plan.outer_strides[i];
    }
  }
  if (total != plan.result_bytes) {
    return Status::Internal("slice plan runs add up to " + std::to_string(static_cast<uint64_t>(total)) +
                            " bytes, not the result's " + std::to_string(plan.result_bytes));
  }
  if (last + plan.run_bytes > tensor_bytes) {
    return Status::Internal("slice plan reaches past the tensor's " + std::to_string(tensor_bytes) +
                            " bytes");
  }
  return Status::OK();
}

}  // namespace stfs::gpu
