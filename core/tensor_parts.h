// Rank parts: the piece of a tensor that rank R of W tensor-parallel ranks
// loads, split along one dimension, as a slice plan like any slice view.
//
// Rule (primary, "floor"): a dimension of size n split W ways gives rank R
// the rows [n*R//W, n*(R+1)//W). Every rank gets floor(n/W) or ceil(n/W)
// rows, the larger pieces last, and the W pieces tile 0..n exactly.
// Rule "ceil" (vLLM / Megatron style): size = ceil(n/W), rank R gets
// [min(n, R*size), min(n, (R+1)*size)); equal pieces except a shorter (or
// empty) tail. Both need 1 <= W <= n and 0 <= R < W.
//
// Path form, under a tensor's hidden `parts/` directory: `W/R` (dimension 0),
// `W/R@D`, and either with `~ceil` appended for the ceil rule. Numbers are
// plain decimal without leading zeros, so each part has exactly one name.
// This file knows nothing of files or FUSE; it never reads tensor bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/slice_plan.h"
#include "core/status.h"

namespace stfs {

enum class PartRule { kFloor, kCeil };

struct PartSpec {
  uint64_t world_size = 1;  // W
  uint64_t rank = 0;        // R
  uint64_t dim = 0;         // D
  PartRule rule = PartRule::kFloor;
};

// [start, stop) along the split dimension.
struct PartRange {
  uint64_t start = 0;
  uint64_t stop = 0;
  bool operator==(const PartRange&) const = default;
};

// Parses the world-size component "W" (decimal, >= 1, no leading zero).
StatusOr<uint64_t> ParsePartWorldSize(std::string_view component);

// Parses the rank component "R", "R@D", "R~ceil" or "R@D~ceil" of a part of
// `world_size` ranks. Checks only the syntax and R < W; the dimension is
// checked against a shape by PartBounds.
StatusOr<PartSpec> ParsePartRank(uint64_t world_size, std::string_view component);

// Returns the rank component that names `spec` ("3", "3@1", "3@1~ceil"):
// the inverse of ParsePartRank, with "@0" left out.
std::string PartRankName(const PartSpec& spec);

// Returns the rows of `spec`'s rank in a dimension of size `n`. Errors
// (InvalidArgument): W = 0 or W > n, R >= W.
StatusOr<PartRange> PartBounds(uint64_t n, const PartSpec& spec);

// Plans the part `spec` of a tensor of `dtype` and `shape`: the slice that
// takes PartBounds along spec.dim and every other dimension whole (the result
// keeps the tensor's rank). Errors: a scalar, D >= rank, the PartBounds
// errors, and the planner's errors (a 4/6-bit part off byte boundaries).
StatusOr<SlicePlan> PlanPart(DType dtype, const std::vector<uint64_t>& shape, const PartSpec& spec);

}  // namespace stfs
