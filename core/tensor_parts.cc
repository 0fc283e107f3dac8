// Rank parts: parsing of `W/R@D~ceil` names, the split rules, and the bridge
// to the slice planner. All arithmetic is overflow-free for any uint64 n and
// W (products go through 128 bits).
#include "core/tensor_parts.h"

#include <algorithm>
#include <charconv>

namespace stfs {
namespace {

constexpr std::string_view kCeilSuffix = "~ceil";

// Parses canonical decimal text: digits only, no sign, no leading zero
// (except "0" itself), fits in uint64.
StatusOr<uint64_t> ParseCanonicalNumber(std::string_view text, std::string_view what) {
  uint64_t value = 0;
  bool digits_only = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  bool leading_zero = text.size() > 1 && text[0] == '0';
  if (digits_only && !leading_zero) {
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error == std::errc() && end == text.data() + text.size()) return value;
  }
  return Status::InvalidArgument(std::string(what) + " '" + std::string(text) +
                                 "' is not a decimal number without leading zeros");
}

// Returns n*k/w rounded down, exactly, for k <= w.
uint64_t ScaledFloor(uint64_t n, uint64_t k, uint64_t w) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(n) * k / w);
}

}  // namespace

StatusOr<uint64_t> ParsePartWorldSize(std::string_view component) {
  ASSIGN_OR_RETURN(uint64_t world_size, ParseCanonicalNumber(component, "part world size"));
  if (world_size == 0) return Status::InvalidArgument("part world size must be at least 1");
  return world_size;
}

StatusOr<PartSpec> ParsePartRank(uint64_t world_size, std::string_view component) {
  PartSpec spec;
  spec.world_size = world_size;
  std::string_view rest = component;
  if (rest.size() >= kCeilSuffix.size() && rest.substr(rest.size() - kCeilSuffix.size()) == kCeilSuffix) {
    spec.rule = PartRule::kCeil;
    rest.remove_suffix(kCeilSuffix.size());
  }
  size_t at = rest.find('@');
  ASSIGN_OR_RETURN(spec.rank, ParseCanonicalNumber(rest.substr(0, at), "part rank"));
  if (at != std::string_view::npos) {
    ASSIGN_OR_RETURN(spec.dim, ParseCanonicalNumber(rest.substr(at + 1), "part dimension"));
    // "R@0" is the same part as "R": refuse it so each part has one name.
    if (spec.dim == 0) {
      return Status::InvalidArgument("part '" + std::string(component) + "': write dimension 0 as '" +
                                     PartRankName(spec) + "'");
    }
  }
  if (world_size == 0 || spec.rank >= world_size) {
    return Status::InvalidArgument("part rank " + std::to_string(spec.rank) + " is out of range for " +
                                   std::to_string(world_size) + " ranks");
  }
  return spec;
}

std::string PartRankName(const PartSpec& spec) {
  std::string name = std::to_string(spec.rank);
  if (spec.dim != 0) name += "@" + std::to_string(spec.dim);
  if (spec.rule == PartRule::kCeil) name += kCeilSuffix;
  return name;
}

StatusOr<PartRange> PartBounds(uint64_t n, const PartSpec& spec) {
  const uint64_t w = spec.world_size;
  if (w == 0 || w > n) {
    return Status::InvalidArgument("cannot split a dimension of size " + std::to_string(n) + " into " +
                                   std::to_string(w) + " parts (need 1 <= parts <= size)");
  }
  if (spec.rank >= w) {
    return Status::InvalidArgument("part rank " + std::to_string(spec.rank) + " is out of range for " +
                                   std::to_string(w) + " ranks");
  }
  if (spec.rule == PartRule::kFloor) {
    return PartRange{ScaledFloor(n, spec.rank, w), ScaledFloor(n, spec.rank + 1, w)};
  }
  const uint64_t size = n / w + (n % w != 0 ? 1 : 0);
  auto clamped = [&](uint64_t k) {
    // k * size may exceed uint64 only when it is already past n.
    unsigned __int128 product = static_cast<unsigned __int128>(k) * size;
    return product >= n ? n : static_cast<uint64_t>(product);
  };
  return PartRange{clamped(spec.rank), clamped(spec.rank + 1)};
}

StatusOr<SlicePlan> PlanPart(DType dtype, const std::vector<uint64_t>& shape, const PartSpec& spec) {
  if (shape.empty()) return Status::InvalidArgument("a scalar has no dimension to split into parts");
  if (spec.dim >= shape.size()) {
    return Status::InvalidArgument("part dimension " + std::to_string(spec.dim) + " is out of range for a tensor of rank " +
                                   std::to_string(shape.size()) + " (shape " + ShapeToString(shape) + ")");
  }
  ASSIGN_OR_RETURN(PartRange range, PartBounds(shape[spec.dim], spec));
  std::vector<SliceItem> items(shape.size(), SliceItem::All());
  // The planner takes int64 bounds; a dimension beyond 2^63 cannot exist in
  // a file (its bytes would overflow), but refuse it rather than wrap.
  constexpr uint64_t kMaxBound = static_cast<uint64_t>(INT64_MAX);
  if (range.stop > kMaxBound) return Status::InvalidArgument("part bounds exceed the slice planner's range");
  items[spec.dim] = SliceItem::Range(static_cast<int64_t>(range.start), static_cast<int64_t>(range.stop));
  return PlanSlice(dtype, shape, items);
}

}  // namespace stfs
