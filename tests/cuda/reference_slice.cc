// The element-by-element reference slice (see reference_slice.h).
#include "tests/cuda/reference_slice.h"

#include <algorithm>

namespace stfs::gpu::testing {

std::optional<ReferenceSlice> ReferenceSliceOf(DType dtype, const std::vector<uint64_t>& shape,
                                               const std::string& tensor, const std::vector<SliceItem>& items) {
  const size_t ndim = shape.size();
  size_t ellipses = 0, explicit_items = 0;
  for (const SliceItem& it : items) {
    if (it.kind == SliceItem::Kind::kEllipsis) {
      ++ellipses;
    } else {
      ++explicit_items;
    }
  }
  if (ellipses > 1 || explicit_items > ndim) return std::nullopt;

  // One entry per dimension: the source indices it keeps, and whether the
  // dimension stays in the result (integers drop it).
  std::vector<std::vector<uint64_t>> picks;
  std::vector<bool> kept;
  auto add_dim = [&](const SliceItem& it) -> bool {
    const int64_t n = static_cast<int64_t>(shape[picks.size()]);
    std::vector<uint64_t> chosen;
    if (it.kind == SliceItem::Kind::kIndex) {
      int64_t i = it.index < 0 ? it.index + n : it.index;
      if (i < 0 || i >= n) return false;
      chosen.push_back(static_cast<uint64_t>(i));
      kept.push_back(false);
    } else {
      if (it.step < 1) return false;
      auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
        if (!v) return dflt;
        int64_t x = *v < 0 ? *v + n : *v;
        return std::clamp<int64_t>(x, 0, n);
      };
      const int64_t start = clamp(it.start, 0);
      const int64_t stop = clamp(it.stop, n);
      for (int64_t i = start; i < stop; i += it.step) chosen.push_back(static_cast<uint64_t>(i));
      kept.push_back(true);
    }
    picks.push_back(std::move(chosen));
    return true;
  };
  for (const SliceItem& it : items) {
    if (it.kind == SliceItem::Kind::kEllipsis) {
      for (size_t k = 0; k < ndim - explicit_items; ++k) {
        if (!add_dim(SliceItem::All())) return std::nullopt;
      }
    } else if (!add_dim(it)) {
      return std::nullopt;
    }
  }
  while (picks.size() < ndim) add_dim(SliceItem::All());

  ReferenceSlice out;
  uint64_t count = 1;
  for (size_t d = 0; d < ndim; ++d) {
    if (kept[d]) out.shape.push_back(picks[d].size());
    count *= picks[d].size();
  }
  // Element strides of the source, row-major.
  std::vector<uint64_t> stride(ndim, 1);
  for (size_t d = ndim; d-- > 1;) stride[d - 1] = stride[d] * shape[d];

  const uint64_t bits = DTypeBits(dtype);
  out.bytes.assign((count * bits + 7) / 8, '\0');
  std::vector<size_t> idx(ndim, 0);
  for (uint64_t e = 0; e < count; ++e) {
    uint64_t src = 0;
    for (size_t d = 0; d < ndim; ++d) src += picks[d][idx[d]] * stride[d];
    if (bits % 8 == 0) {
      const uint64_t b = bits / 8;
      std::copy_n(tensor.data() + src * b, b, out.bytes.data() + e * b);
    } else {
      for (uint64_t k = 0; k < bits; ++k) {
        const uint64_t from = src * bits + k, to = e * bits + k;
        const int bit = (static_cast<unsigned char>(tensor[from / 8]) >> (from % 8)) & 1;
        if (bit) out.bytes[to / 8] = static_cast<char>(out.bytes[to / 8] | (1 << (to % 8)));
      }
    }
    for (size_t d = ndim; d-- > 0;) {
      if (++idx[d] < picks[d].size()) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<SliceItem> RandomSlice(std::mt19937_64& rng, const std::vector<uint64_t>& shape, bool allow_invalid) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::vector<SliceItem> items;
  const size_t ndim = shape.size();
  const size_t count = ndim == 0 ? 0 : static_cast<size_t>(pick(0, static_cast<int64_t>(ndim)));
  const bool ellipsis = ndim > 0 && pick(0, 4) == 0;
  const size_t ellipsis_at = static_cast<size_t>(pick(0, static_cast<int64_t>(count)));
  for (size_t i = 0; i < count; ++i) {
    if (ellipsis && i == ellipsis_at) items.push_back(SliceItem::Ellipsis());
    const int64_t n = static_cast<int64_t>(shape[i]);
    const int64_t kind = pick(0, 9);
    if (kind <= 1 && (n > 0 || allow_invalid)) {
      int64_t v = allow_invalid ? pick(-n - 1, n) : pick(-n, n - 1);
      items.push_back(SliceItem::Index(v));
    } else if (kind == 2) {
      items.push_back(SliceItem::All());
    } else {
      auto bound = [&]() -> std::optional<int64_t> {
        if (pick(0, 4) == 0) return std::nullopt;
        return pick(-n - 2, n + 2);
      };
      int64_t step = pick(0, 5) == 0 ? pick(2, 3) : 1;
      if (allow_invalid && pick(0, 20) == 0) step = 0;
      items.push_back(SliceItem::Range(bound(), bound(), step));
    }
  }
  if (ellipsis && ellipsis_at == count) items.push_back(SliceItem::Ellipsis());
  return items;
}

std::string SliceText(const std::vector<SliceItem>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    const SliceItem& it = items[i];
    switch (it.kind) {
      case SliceItem::Kind::kEllipsis:
        out += "...";
        break;
      case SliceItem::Kind::kIndex:
        out += std::to_string(it.index);
        break;
      case SliceItem::Kind::kRange:
        if (it.start) out += std::to_string(*it.start);
        out += ":";
        if (it.stop) out += std::to_string(*it.stop);
        if (it.step != 1) out += ":" + std::to_string(it.step);
        break;
    }
  }
  return out;
}

}  // namespace stfs::gpu::testing
