// Filesystem: rank parts — `<tensor>/parts/W/` and `<tensor>/parts/W/R[@D][~ceil]/`.
//
// Both levels live in the slice views' bounded cache (slice_view_cache.h),
// so parts share its cap, eviction and ESTALE rules: a `parts/W` directory
// is a view with parts_world = W and no files; a part is an ordinary slice
// view whose plan comes from PlanPart (core/tensor_parts.h) and whose parent
// is its `parts/W` directory. A name that is not a part of this tensor
// answers NotFound (ENOENT) and leaves one line on the daemon's stderr (its
// log), since a bare ENOENT would not say why.
#include <algorithm>
#include <cstdio>

#include "core/tensor_parts.h"
#include "fs/filesystem.h"

namespace stfs {
namespace {

Status NoSuchPart(const std::string& tensor, std::string_view path, const Status& why) {
  std::fprintf(stderr, "stfs: tensor \"%s\": parts/%.*s: %s\n", tensor.c_str(), static_cast<int>(path.size()),
               path.data(), why.message().c_str());
  return Status::NotFound("parts/" + std::string(path) + ": " + why.message());
}

}  // namespace

StatusOr<std::shared_ptr<const SliceView>> Filesystem::LookupPartsWorld(InodeId parts_dir, size_t tensor_index,
                                                                        std::string_view world) const {
  const TensorInfo& t = TensorAt(tensor_index);
  StatusOr<uint64_t> world_size = ParsePartWorldSize(world);
  if (!world_size.ok()) return NoSuchPart(t.name, world, world_size.status());
  // W must fit some dimension; which one is known only from each part's name.
  uint64_t largest = t.shape.empty() ? 0 : *std::max_element(t.shape.begin(), t.shape.end());
  if (*world_size > largest) {
    return NoSuchPart(t.name, world,
                      Status::InvalidArgument(t.shape.empty() ? "a scalar has no parts"
                                                              : "no dimension has " + std::string(world) + " rows"));
  }
  SliceView view;
  view.parent_dir = parts_dir;
  view.tensor_index = tensor_index;
  view.parts_world = *world_size;
  view.key = PartsWorldKey(parts_dir, *world_size);
  return slice_views_->FindOrAdd(std::move(view));
}

StatusOr<std::shared_ptr<const SliceView>> Filesystem::LookupPart(const SliceView& world_dir,
                                                                  std::string_view rank) const {
  const TensorInfo& t = TensorAt(world_dir.tensor_index);
  const std::string path = std::to_string(world_dir.parts_world) + "/" + std::string(rank);
  StatusOr<PartSpec> spec = ParsePartRank(world_dir.parts_world, rank);
  if (!spec.ok()) return NoSuchPart(t.name, path, spec.status());
  StatusOr<SlicePlan> plan = PlanPart(t.dtype, t.shape, *spec);
  if (!plan.ok()) return NoSuchPart(t.name, path, plan.status());
  return ViewOf(world_dir.first_ino, world_dir.tensor_index, std::move(*plan));
}

StatusOr<NodeAttr> Filesystem::LookupInView(const SliceView& view, std::string_view name) const {
  if (view.parts_world != 0) {
    ASSIGN_OR_RETURN(std::shared_ptr<const SliceView> part, LookupPart(view, name));
    return SliceAttr(*part, SliceRole::kDir);
  }
  for (int r = 1; r < static_cast<int>(SliceViewCache::kInodesPerView); ++r) {
    if (name != kSliceFileNames[r]) continue;
    if (static_cast<SliceRole>(r) == SliceRole::kNpy && !HasNpy(view)) break;
    return SliceAttr(view, static_cast<SliceRole>(r));
  }
  return Status::NotFound(std::string(name));
}

}  // namespace stfs
