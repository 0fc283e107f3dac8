// Small helpers shared by the planning tests: a segment stream over a
// vector, planning a whole stream, and random shapes valid for any dtype.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "core/cuda/copy_program.h"
#include "core/dtype.h"

namespace stfs::gpu::testing {

class VectorSegments final : public SegmentStream {
 public:
  explicit VectorSegments(std::vector<Segment> segments) : segments_(std::move(segments)) {}
  bool Next(Segment* out) override {
    if (next_ >= segments_.size()) return false;
    *out = segments_[next_++];
    return true;
  }

 private:
  std::vector<Segment> segments_;
  size_t next_ = 0;
};

inline std::vector<StagingFill> PlanAll(SegmentStream* segments, const FillLimits& limits) {
  FillPlanner planner(segments, limits);
  std::vector<StagingFill> fills;
  StagingFill fill;
  while (planner.Next(&fill)) fills.push_back(fill);
  return fills;
}

// A random shape of up to 3 dims of at most `max_dim`, some 0 or 1, whose
// byte size is whole (4- and 6-bit dtypes get a last dim that is a multiple
// of 8).
inline std::vector<uint64_t> RandomShape(std::mt19937_64& rng, DType dtype, uint64_t max_dim = 40) {
  std::vector<uint64_t> shape(rng() % 4);
  for (uint64_t& d : shape) d = rng() % 7 == 0 ? rng() % 2 : 1 + rng() % max_dim;
  if (DTypeBits(dtype) % 8 != 0) {
    if (shape.empty()) shape.push_back(8);
    shape.back() = 8 * (1 + rng() % 6);
  }
  return shape;
}

}  // namespace stfs::gpu::testing
