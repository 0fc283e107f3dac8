// SliceViewCache: the slice views a mount has looked up, bounded in number.
//
// A slice view is the directory `<tensor>/slices/<numpy index>/` with its
// `data`, `dtype`, `shape` and `data.npy`: five inode numbers from the
// view's first one.
// Views are keyed by their canonical form (the parent directory and the
// planner's normalised plan), so `0:4`, `0:4:1` and `:4` of one tensor are
// one view.
//
// Memory rule: the cache holds at most `capacity` views, whatever clients do.
// Each view counts the kernel's references (lookups replied minus FORGETs,
// over its five inodes). When a new view would pass the cap, the least
// recently used view goes; a view the kernel has wholly forgotten is moved
// to the cold end at once, so it goes before any view still referenced.
// Inode numbers are never reused (a 64-bit counter), so an inode of an
// evicted view is known to be stale: the filesystem answers ESTALE for it,
// on which the kernel's path walk looks the name up again (LOOKUP_REVAL) and
// gets a fresh view under a new inode number. Open files and directory
// handles hold a shared_ptr to their view, so reads through them never see
// it go. An evicted view's directory still lists its three names (without
// attributes, which the kernel then looks up and so gets the fresh view);
// only a relative path from a working directory inside an evicted view
// fails with ESTALE, as there is no path for the kernel to walk again.
//
// Thread-safe: one mutex guards the maps and the LRU list; it is never held
// while reading the source or planning a slice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/slice_plan.h"

namespace stfs {

using InodeId = uint64_t;

struct SliceView {
  InodeId first_ino = 0;   // the view's directory; data, dtype, shape, data.npy follow
  InodeId parent_dir = 0;  // where it was looked up: a tensor's `slices`, or any
                           // other directory whose names plan slices
  size_t tensor_index = 0;
  // Non-zero for a tensor's `parts/W` directory (W here): a directory only,
  // whose names plan rank parts; `plan` and `shape_text` are then unused.
  uint64_t parts_world = 0;
  SlicePlan plan;
  std::string shape_text;  // "[a,b]\n"
  std::string key;         // canonical form, see CanonicalSliceKey
};

// Returns the canonical key of `plan` looked up in directory `parent_dir`:
// equal for two names there exactly when they select the same bytes in the
// same shape. The parent is part of the key so that a view directory never
// has two parents (one tensor's `slices` holds plans of that tensor only).
std::string CanonicalSliceKey(InodeId parent_dir, const SlicePlan& plan);
// Returns the key of the `parts/W` directory looked up in `parts_dir`; it
// never equals a CanonicalSliceKey (those never start with a 0 byte).
std::string PartsWorldKey(InodeId parts_dir, uint64_t world_size);

class SliceViewCache {
 public:
  static constexpr InodeId kInodesPerView = 5;

  // Views get inode numbers from `first_ino` upwards.
  SliceViewCache(InodeId first_ino, size_t capacity);
  SliceViewCache(const SliceViewCache&) = delete;
  SliceViewCache& operator=(const SliceViewCache&) = delete;

  // Returns the view with `view.key`, adding `view` (numbered here) when
  // there is none; evicts the least recently used view past the capacity.
  std::shared_ptr<const SliceView> FindOrAdd(SliceView view);
  // Returns the view owning `ino` (any of its inodes), or nullptr.
  std::shared_ptr<const SliceView> Find(InodeId ino);
  // True for an inode number this cache handed out (live or evicted).
  bool WasIssued(InodeId ino) const;
  // True for a view directory's inode number (live or evicted).
  bool IsViewDirectory(InodeId ino) const {
    return WasIssued(ino) && (ino - first_ino_) % kInodesPerView == 0;
  }
  // Counts one kernel reference to `ino` (a lookup or readdirplus entry).
  void Remember(InodeId ino);
  // Drops `count` kernel references to `ino` (FORGET).
  void Forget(InodeId ino, uint64_t count);

  size_t size() const;
  size_t capacity() const { return capacity_; }
  InodeId first_ino() const { return first_ino_; }

 private:
  struct Entry {
    std::shared_ptr<const SliceView> view;
    uint64_t kernel_refs = 0;
    std::list<InodeId>::iterator lru_position;  // front: most recently used
  };
  InodeId ViewInode(InodeId ino) const;
  Entry* FindEntryLocked(InodeId ino);
  void EvictPastCapacityLocked();

  const InodeId first_ino_;
  const size_t capacity_;
  mutable std::mutex mu_;
  InodeId next_ino_;                                   // guarded by mu_
  std::unordered_map<InodeId, Entry> by_ino_;          // guarded by mu_; keyed by first_ino
  // Keys point into the views' own `key` strings, which live as long as the
  // entry in by_ino_.
  std::unordered_map<std::string_view, InodeId> by_key_;  // guarded by mu_
  std::list<InodeId> lru_;                             // guarded by mu_
};

}  // namespace stfs
