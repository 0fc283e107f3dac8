// Filesystem: slice views (`<tensor>/slices/<numpy index>/`), planned by the
// core slice planner and kept in the bounded SliceViewCache.
#include <sys/stat.h>

#include <cstring>

#include "core/npy_header.h"
#include "core/slice_reader.h"
#include "fs/filesystem.h"

namespace stfs {

StatusOr<std::shared_ptr<const SliceView>> Filesystem::FindSlice(InodeId ino, SliceRole* role) const {
  std::shared_ptr<const SliceView> view = slice_views_->Find(ino);
  if (view == nullptr) {
    if (slice_views_->WasIssued(ino)) {
      return Status::Stale("slice view inode " + std::to_string(ino) + " was evicted; look it up again");
    }
    return Status::NotFound("no inode " + std::to_string(ino));
  }
  *role = static_cast<SliceRole>((ino - view->first_ino) % SliceViewCache::kInodesPerView);
  // A parts/W directory has no files: its other inode numbers are never handed out.
  if (view->parts_world != 0 && *role != SliceRole::kDir) return Status::NotFound("no inode " + std::to_string(ino));
  return view;
}

NodeAttr Filesystem::SliceAttr(const SliceView& view, SliceRole role) const {
  NodeAttr attr;
  attr.ino = view.first_ino + static_cast<InodeId>(role);
  attr.mtime = mtime_;
  attr.mode = S_IFREG | 0444;
  switch (role) {
    case SliceRole::kDir:
      attr.is_directory = true;
      attr.mode = S_IFDIR | 0555;
      attr.nlink = 2;
      break;
    case SliceRole::kData: attr.size = view.plan.result_bytes; break;
    case SliceRole::kDtype: attr.size = DTypeName(view.plan.dtype).size() + 1; break;
    case SliceRole::kShape: attr.size = view.shape_text.size(); break;
    case SliceRole::kNpy:
      attr.size = NpyFileSize(view.plan.dtype, view.plan.result_shape, view.plan.result_bytes);
      break;
  }
  return attr;
}

StatusOr<std::shared_ptr<const SliceView>> Filesystem::LookupSlice(InodeId slices_dir, size_t tensor_index,
                                                                   std::string_view spec) const {
  const TensorInfo& t = TensorAt(tensor_index);
  // Planning is pure and needs no lock; the plan is the view's canonical key.
  ASSIGN_OR_RETURN(std::vector<SliceItem> items, ParseSliceSpec(spec));
  ASSIGN_OR_RETURN(SlicePlan plan, PlanSlice(t.dtype, t.shape, items));
  return ViewOf(slices_dir, tensor_index, std::move(plan));
}

std::shared_ptr<const SliceView> Filesystem::ViewOf(InodeId parent_dir, size_t tensor_index, SlicePlan plan) const {
  SliceView view;
  view.parent_dir = parent_dir;
  view.tensor_index = tensor_index;
  view.key = CanonicalSliceKey(parent_dir, plan);
  view.shape_text = ShapeToString(plan.result_shape) + "\n";
  view.plan = std::move(plan);
  return slice_views_->FindOrAdd(std::move(view));
}

uint64_t Filesystem::NpyFileSize(DType dtype, const std::vector<uint64_t>& shape, uint64_t data_bytes) {
  StatusOr<std::string> npy_header = EncodeNpyHeader(dtype, shape);
  return npy_header.ok() ? npy_header->size() + data_bytes : 0;
}

bool Filesystem::HasNpy(const SliceView& view) {
  return view.parts_world == 0 && NpyShapeOf(view.plan.dtype, view.plan.result_shape).ok();
}

StatusOr<size_t> Filesystem::ReadNpy(const std::string& npy_header, uint64_t data_size, uint64_t offset, size_t length,
                                     char* dst, const DataReader& read_data) {
  NpyReadSplit split = SplitNpyRead(npy_header.size(), data_size, offset, length);
  size_t done = CopyContent(npy_header, split.header_offset, split.header_length, dst);
  if (split.data_length == 0) return done;
  ASSIGN_OR_RETURN(size_t n, read_data(split.data_offset, split.data_length, dst + done));
  return done + n;
}

StatusOr<size_t> Filesystem::ReadSliceFile(const SliceView& view, SliceRole role, uint64_t offset, size_t length,
                                           char* dst, uint64_t stream) const {
  switch (role) {
    case SliceRole::kDir: return Status::InvalidArgument("is a directory");
    case SliceRole::kDtype: return CopyContent(std::string(DTypeName(view.plan.dtype)) + "\n", offset, length, dst);
    case SliceRole::kShape: return CopyContent(view.shape_text, offset, length, dst);
    case SliceRole::kData: break;
    case SliceRole::kNpy: {
      ASSIGN_OR_RETURN(std::string npy_header, EncodeNpyHeader(view.plan.dtype, view.plan.result_shape));
      return ReadNpy(npy_header, view.plan.result_bytes, offset, length, dst,
                     [&](uint64_t data_offset, size_t data_length, char* out) {
                       return ReadSliceFile(view, SliceRole::kData, data_offset, data_length, out, stream);
                     });
    }
  }
  const CatalogueTensor& tensor = catalogue_.tensors()[view.tensor_index];
  const uint64_t tensor_start = catalogue_.FileOffset(tensor);
  const ReadHint hint{stream, SliceSourceEnd(tensor_start, view.plan), tensor_start + view.plan.base_offset};
  StatusOr<size_t> n =
      ReadSliceRange(*catalogue_.ShardOf(tensor).source, tensor_start, view.plan, offset, length, dst, hint);
  if (!n.ok()) {
    CountReadError();
    return n.status();
  }
  CountRead(*n);
  return n;
}

}  // namespace stfs
