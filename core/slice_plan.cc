// The slice planner: numpy basic indexing -> the result's shape and the
// fewest byte windows of the source that hold it.
//
// Everything is computed in bits first, because F4 and F6 pack elements below
// a byte; the layout is coalesced (contiguous inner dims fold into the run,
// evenly spaced outer dims fold together) and only then turned into bytes,
// refusing a plan whose windows would split a byte. This file must never
// allocate per run or per window: a plan over billions of elements, and its
// iteration, stay O(dims) in memory, and no shape may make it overflow.
#include "core/slice_plan.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace stfs {
namespace {

// One dimension's selection after numpy normalisation (slice.indices).
struct DimSelection {
  uint64_t start = 0;
  uint64_t count = 0;
  uint64_t step = 1;
  bool keeps_dim = true;  // false for an integer index, which drops the dim
};

// One strided level of the layout, before or after coalescing.
struct StridedDim {
  uint64_t count = 0;
  uint64_t stride = 0;  // bits while planning, bytes in the finished plan
};

// Returns `bound` resolved against `size` the way numpy clamps slice bounds
// for a positive step: negative counts from the end, then clamp to [0, size].
uint64_t ClampBound(int64_t bound, uint64_t size) {
  if (bound < 0) {
    uint64_t from_end = 0 - static_cast<uint64_t>(bound);  // exact even for INT64_MIN
    return from_end >= size ? 0 : size - from_end;
  }
  return std::min(static_cast<uint64_t>(bound), size);
}

// Returns the element an integer item picks in a dimension of `size`, or an
// error naming the dimension, the index and the size.
StatusOr<uint64_t> ResolveIndex(int64_t index, size_t dim, uint64_t size) {
  if (index < 0) {
    uint64_t from_end = 0 - static_cast<uint64_t>(index);
    if (from_end <= size) return size - from_end;
  } else if (static_cast<uint64_t>(index) < size) {
    return static_cast<uint64_t>(index);
  }
  return Status::InvalidArgument("index " + std::to_string(index) + " is out of range for dimension " +
                                 std::to_string(dim) + " of size " + std::to_string(size));
}

// Replaces the ellipsis (or the missing tail) by whole-dimension items so
// that there is exactly one item per dimension.
StatusOr<std::vector<SliceItem>> ExpandItems(const std::vector<uint64_t>& shape,
                                             const std::vector<SliceItem>& items) {
  size_t ellipses = std::count_if(items.begin(), items.end(), [](const SliceItem& item) {
    return item.kind == SliceItem::Kind::kEllipsis;
  });
  if (ellipses > 1) {
    return Status::InvalidArgument("a slice may hold at most one '...', this one has " +
                                   std::to_string(ellipses));
  }
  size_t given = items.size() - ellipses;
  if (given > shape.size()) {
    return Status::InvalidArgument("too many indices: " + std::to_string(given) + " for a tensor of rank " +
                                   std::to_string(shape.size()) + " (shape " + ShapeToString(shape) + ")");
  }
  std::vector<SliceItem> full;
  full.reserve(shape.size());
  for (const SliceItem& item : items) {
    if (item.kind == SliceItem::Kind::kEllipsis) {
      full.insert(full.end(), shape.size() - given, SliceItem::All());
    } else {
      full.push_back(item);
    }
  }
  full.resize(shape.size(), SliceItem::All());
  return full;
}

// Normalises one item against a dimension of `size`.
StatusOr<DimSelection> SelectInDim(const SliceItem& item, size_t dim, uint64_t size) {
  DimSelection sel;
  if (item.kind == SliceItem::Kind::kIndex) {
    ASSIGN_OR_RETURN(sel.start, ResolveIndex(item.index, dim, size));
    sel.count = 1;
    sel.keeps_dim = false;
    return sel;
  }
  if (item.step < 1) {
    return Status::InvalidArgument("slice step must be at least 1, got " + std::to_string(item.step) +
                                   " for dimension " + std::to_string(dim));
  }
  sel.step = static_cast<uint64_t>(item.step);
  sel.start = item.start ? ClampBound(*item.start, size) : 0;
  uint64_t stop = item.stop ? ClampBound(*item.stop, size) : size;
  sel.count = stop > sel.start ? (stop - sel.start - 1) / sel.step + 1 : 0;
  return sel;
}

// Returns OK when the whole tensor's size in bits fits in 64 bits; the
// product skips zero dims so strides of a non-empty selection never wrap.
Status CheckBitsFit(DType dtype, const std::vector<uint64_t>& shape) {
  uint64_t bits = DTypeBits(dtype);
  for (uint64_t d : shape) {
    if (d != 0 && __builtin_mul_overflow(bits, d, &bits)) {
      return Status::InvalidArgument("tensor of dtype " + std::string(DTypeName(dtype)) + " and shape " +
                                     ShapeToString(shape) + " is too large: its size in bits overflows 64 bits");
    }
  }
  return Status::OK();
}

// Returns OK when every merged window of the bit layout starts and ends on
// a byte, which holds exactly when base, run and every stride are multiples
// of 8: runs of the innermost level never touch (its stride would equal the
// run and have folded), so the first run's start and end and the second
// run's start are always window edges; the next block of an outer level
// either starts a window or touches, and then its start is an end already
// checked. So the first misaligned edge in the order checked below is a real
// window edge, and the message names a bit that truly splits a byte.
Status CheckByteAligned(DType dtype, const std::vector<uint64_t>& shape, uint64_t base, uint64_t run,
                        const std::vector<StridedDim>& outer) {
  auto refuse = [&](const char* edge, uint64_t bit) {
    return Status::InvalidArgument(std::string(DTypeName(dtype)) + " slice of shape " + ShapeToString(shape) +
                                   " does not start/end on a byte boundary: a window would " + edge +
                                   " at bit " + std::to_string(bit) + ", inside byte " + std::to_string(bit / 8));
  };
  if (base % 8 != 0) return refuse("start", base);
  if (run % 8 != 0) return refuse("end", base + run);
  for (auto it = outer.rbegin(); it != outer.rend(); ++it) {
    if (it->stride % 8 != 0) return refuse("start", base + it->stride);
  }
  return Status::OK();
}

// Folds the strided levels of a selection (count >= 2 only, outermost
// first) so that no level could be expressed by a neighbour: contiguous
// inner levels grow the run, and a level spaced exactly one inner level
// apart merges with it. `run` starts as one element.
void Coalesce(std::vector<StridedDim>* levels, uint64_t* run) {
  while (!levels->empty() && levels->back().stride == *run) {
    *run *= levels->back().count;  // contiguous, so bounded by the tensor's size
    levels->pop_back();
  }
  std::vector<StridedDim> merged;
  merged.reserve(levels->size());
  for (const StridedDim& level : *levels) {
    uint64_t span = 0;
    if (!merged.empty() && !__builtin_mul_overflow(level.count, level.stride, &span) &&
        merged.back().stride == span) {
      merged.back().count *= level.count;
      merged.back().stride = level.stride;
    } else {
      merged.push_back(level);
    }
  }
  *levels = std::move(merged);
}

// Returns `text` without its leading and trailing whitespace.
std::string_view Trim(std::string_view text) {
  const char* kSpace = " \t\n\r\f\v";
  size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  size_t last = text.find_last_not_of(kSpace);
  return text.substr(first, last - first + 1);
}

// Parses an optionally signed decimal integer that must fill `part`.
StatusOr<int64_t> ParseInteger(std::string_view part, std::string_view whole) {
  std::string_view digits = part;
  bool plus = !digits.empty() && digits.front() == '+';  // from_chars takes only '-'
  if (plus) digits.remove_prefix(1);
  int64_t value = 0;
  auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  bool well_formed = !digits.empty() && (std::isdigit(static_cast<unsigned char>(digits.front())) ||
                                         (!plus && digits.front() == '-')) &&
                     end == digits.data() + digits.size();
  if (err == std::errc::result_out_of_range && well_formed) {
    return Status::InvalidArgument("slice '" + std::string(whole) + "': '" + std::string(part) +
                                   "' does not fit in a 64-bit integer");
  }
  if (err != std::errc() || !well_formed) {
    return Status::InvalidArgument("slice '" + std::string(whole) + "': '" + std::string(part) +
                                   "' is not an integer");
  }
  return value;
}

// Parses one comma-separated item: "...", "i", or "start:stop[:step]".
StatusOr<SliceItem> ParseItem(std::string_view item, std::string_view whole) {
  if (item == "...") return SliceItem::Ellipsis();
  std::vector<std::string_view> parts;
  size_t from = 0;
  while (true) {
    size_t colon = item.find(':', from);
    parts.push_back(Trim(item.substr(from, colon == std::string_view::npos ? colon : colon - from)));
    if (colon == std::string_view::npos) break;
    from = colon + 1;
  }
  if (parts.size() > 3) {
    return Status::InvalidArgument("slice '" + std::string(whole) + "': item '" + std::string(item) +
                                   "' has more than start:stop:step");
  }
  if (parts.size() == 1) {
    ASSIGN_OR_RETURN(int64_t index, ParseInteger(parts[0], whole));
    return SliceItem::Index(index);
  }
  std::optional<int64_t> bounds[2];
  for (int i = 0; i < 2; ++i) {
    if (parts[i].empty()) continue;
    ASSIGN_OR_RETURN(bounds[i], ParseInteger(parts[i], whole));
  }
  int64_t step = 1;
  if (parts.size() == 3 && !parts[2].empty()) {
    ASSIGN_OR_RETURN(step, ParseInteger(parts[2], whole));
  }
  return SliceItem::Range(bounds[0], bounds[1], step);
}

}  // namespace

StatusOr<std::vector<SliceItem>> ParseSliceSpec(std::string_view text) {
  std::vector<SliceItem> items;
  if (Trim(text).empty()) return items;
  size_t from = 0;
  while (from <= text.size()) {
    size_t comma = text.find(',', from);
    bool last = comma == std::string_view::npos;
    std::string_view item = Trim(text.substr(from, last ? comma : comma - from));
    from = last ? text.size() + 1 : comma + 1;
    // "1," is a one-item tuple in Python; any other empty item is a typo.
    if (item.empty() && last) break;  // text not all blank, so an item came before
    if (item.empty()) {
      return Status::InvalidArgument("slice '" + std::string(text) + "' has an empty item");
    }
    ASSIGN_OR_RETURN(SliceItem parsed, ParseItem(item, text));
    items.push_back(parsed);
  }
  return items;
}

StatusOr<SlicePlan> PlanSlice(DType dtype, const std::vector<uint64_t>& shape,
                              const std::vector<SliceItem>& items) {
  ASSIGN_OR_RETURN(std::vector<SliceItem> full, ExpandItems(shape, items));
  RETURN_IF_ERROR(CheckBitsFit(dtype, shape));

  SlicePlan plan;
  plan.dtype = dtype;
  std::vector<DimSelection> selections(shape.size());
  bool empty = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    ASSIGN_OR_RETURN(selections[d], SelectInDim(full[d], d, shape[d]));
    if (selections[d].keeps_dim) plan.result_shape.push_back(selections[d].count);
    empty = empty || selections[d].count == 0;
  }
  if (empty) return plan;  // no bytes, no windows, never misaligned

  // A non-empty selection means every dim is non-zero, so each stride and
  // offset below is bounded by the tensor's size in bits, checked above.
  uint64_t base = 0;
  uint64_t stride = DTypeBits(dtype);
  std::vector<StridedDim> levels;
  for (size_t d = shape.size(); d-- > 0;) {
    const DimSelection& sel = selections[d];
    base += sel.start * stride;
    if (sel.count >= 2) levels.push_back({sel.count, sel.step * stride});
    stride *= shape[d];
  }
  std::reverse(levels.begin(), levels.end());
  uint64_t run = DTypeBits(dtype);
  Coalesce(&levels, &run);
  RETURN_IF_ERROR(CheckByteAligned(dtype, shape, base, run, levels));

  plan.base_offset = base / 8;
  plan.run_bytes = run / 8;
  plan.result_bytes = plan.run_bytes;
  for (const StridedDim& level : levels) {
    plan.outer_counts.push_back(level.count);
    plan.outer_strides.push_back(level.stride / 8);
    plan.result_bytes *= level.count;
  }
  return plan;
}

void SlicePlan::ForEachWindow(const std::function<bool(const ByteWindow&)>& visit) const {
  size_t levels = std::min(outer_counts.size(), outer_strides.size());
  if (result_bytes == 0 || run_bytes == 0) return;
  for (size_t k = 0; k < levels; ++k) {
    if (outer_counts[k] == 0) return;
  }
  // An odometer over the outer levels, with the offset kept incrementally;
  // `pending` is the only window held, grown while the next run touches it.
  std::vector<uint64_t> index(levels, 0);
  uint64_t offset = base_offset;
  ByteWindow pending{base_offset, run_bytes};
  auto advance = [&]() {
    for (size_t k = levels; k-- > 0;) {
      if (++index[k] < outer_counts[k]) {
        offset += outer_strides[k];
        return true;
      }
      offset -= (outer_counts[k] - 1) * outer_strides[k];
      index[k] = 0;
    }
    return false;  // carried out of the outermost level: every run visited
  };
  while (advance()) {
    if (pending.offset + pending.length == offset) {
      pending.length += run_bytes;
    } else {
      if (!visit(pending)) return;
      pending = ByteWindow{offset, run_bytes};
    }
  }
  visit(pending);
}

std::vector<ByteWindow> SlicePlan::Windows() const {
  std::vector<ByteWindow> windows;
  ForEachWindow([&](const ByteWindow& window) {
    windows.push_back(window);
    return true;
  });
  return windows;
}

uint64_t SlicePlan::WindowCount() const {
  // Counted, not iterated: runs are visited in increasing offset order and
  // consecutive runs touch only across a level-k step, when that level's
  // stride equals the span of one inner block; each such step saves one
  // window. O(dims) even for a plan with 10^9 runs.
  size_t levels = std::min(outer_counts.size(), outer_strides.size());
  if (result_bytes == 0 || run_bytes == 0) return 0;
  uint64_t runs = 1;
  for (size_t k = 0; k < levels; ++k) runs *= outer_counts[k];
  if (runs == 0) return 0;
  uint64_t windows = runs;
  uint64_t inner_span = run_bytes;  // from a block's first run start to its last run end
  uint64_t inner_runs = 1;          // runs in one block below level k
  for (size_t k = levels; k-- > 0;) {
    if (outer_strides[k] == inner_span) {
      // Steps of level k: every block of level k minus its last, across all outer blocks.
      windows -= runs / (inner_runs * outer_counts[k]) * (outer_counts[k] - 1);
    }
    inner_span += (outer_counts[k] - 1) * outer_strides[k];
    inner_runs *= outer_counts[k];
  }
  return windows;
}

}  // namespace stfs
