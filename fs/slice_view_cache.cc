// The bounded slice view cache (see slice_view_cache.h for the rules).
#include "fs/slice_view_cache.h"

#include <algorithm>
#include <utility>

namespace stfs {
namespace {

// Appends `value` as a LEB128 varint: keys of small plans fit in a short
// string without a heap allocation.
void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void AppendList(const std::vector<uint64_t>& values, std::string* out) {
  AppendVarint(values.size(), out);
  for (uint64_t v : values) AppendVarint(v, out);
}

}  // namespace

std::string CanonicalSliceKey(InodeId parent_dir, const SlicePlan& plan) {
  // The plan is the planner's normal form: clamped bounds, steps and dropped
  // dimensions are all in it, so equal plans mean equal results.
  std::string key;
  AppendVarint(parent_dir, &key);
  AppendList(plan.result_shape, &key);
  AppendVarint(plan.base_offset, &key);
  AppendVarint(plan.run_bytes, &key);
  AppendList(plan.outer_counts, &key);
  AppendList(plan.outer_strides, &key);
  return key;
}

std::string PartsWorldKey(InodeId parts_dir, uint64_t world_size) {
  // A CanonicalSliceKey starts with the varint of a non-zero inode number,
  // whose first byte is never 0.
  std::string key(1, '\0');
  AppendVarint(parts_dir, &key);
  AppendVarint(world_size, &key);
  return key;
}

SliceViewCache::SliceViewCache(InodeId first_ino, size_t capacity)
    : first_ino_(first_ino), capacity_(capacity == 0 ? 1 : capacity), next_ino_(first_ino) {}

InodeId SliceViewCache::ViewInode(InodeId ino) const {
  return first_ino_ + (ino - first_ino_) / kInodesPerView * kInodesPerView;
}

SliceViewCache::Entry* SliceViewCache::FindEntryLocked(InodeId ino) {
  if (ino < first_ino_) return nullptr;
  auto it = by_ino_.find(ViewInode(ino));
  return it == by_ino_.end() ? nullptr : &it->second;
}

std::shared_ptr<const SliceView> SliceViewCache::FindOrAdd(SliceView view) {
  std::lock_guard<std::mutex> lock(mu_);
  auto known = by_key_.find(view.key);
  if (known != by_key_.end()) {
    Entry& entry = by_ino_.at(known->second);
    lru_.splice(lru_.begin(), lru_, entry.lru_position);
    return entry.view;
  }
  view.first_ino = next_ino_;
  next_ino_ += kInodesPerView;
  auto shared = std::make_shared<const SliceView>(std::move(view));
  lru_.push_front(shared->first_ino);
  by_ino_.emplace(shared->first_ino, Entry{shared, 0, lru_.begin()});
  by_key_.emplace(std::string_view(shared->key), shared->first_ino);
  EvictPastCapacityLocked();
  return shared;
}

void SliceViewCache::EvictPastCapacityLocked() {
  while (by_ino_.size() > capacity_) {
    InodeId coldest = lru_.back();
    lru_.pop_back();
    auto it = by_ino_.find(coldest);
    by_key_.erase(std::string_view(it->second.view->key));
    by_ino_.erase(it);  // open handles keep their own shared_ptr
  }
}

std::shared_ptr<const SliceView> SliceViewCache::Find(InodeId ino) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* entry = FindEntryLocked(ino);
  if (entry == nullptr) return nullptr;
  lru_.splice(lru_.begin(), lru_, entry->lru_position);
  return entry->view;
}

bool SliceViewCache::WasIssued(InodeId ino) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ino >= first_ino_ && ino < next_ino_;
}

void SliceViewCache::Remember(InodeId ino) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* entry = FindEntryLocked(ino);
  if (entry != nullptr) entry->kernel_refs++;
}

void SliceViewCache::Forget(InodeId ino, uint64_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* entry = FindEntryLocked(ino);
  if (entry == nullptr) return;  // evicted already
  entry->kernel_refs -= std::min(count, entry->kernel_refs);
  // Wholly forgotten: first to go when room is needed.
  if (entry->kernel_refs == 0) lru_.splice(lru_.end(), lru_, entry->lru_position);
}

size_t SliceViewCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_ino_.size();
}

}  // namespace stfs
