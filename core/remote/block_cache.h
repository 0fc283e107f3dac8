// BlockCache: fixed-size blocks of remote objects under one memory budget.
//
// Blocks are aligned in their object (block i holds bytes [i*B, (i+1)*B)), so
// any two readers of the same bytes meet at the same entry: the first one to
// ask creates it and fetches it, everyone else waits for that one fetch.
// Ready blocks are evicted least recently used first; blocks being fetched
// or copied from (pinned) are never evicted, so the memory counted is the
// memory held. A reader also keeps a block alive while copying from it
// (shared_ptr), so even DropOwner never pulls bytes from under a reader.
// Buffers of evicted blocks no reader has pinned are recycled for new
// blocks, since touching fresh memory (page faults) costs more than the
// network on loopback. Pins are counted under the cache's lock (never by
// shared_ptr::use_count, which orders nothing): a reader's copy out of a
// buffer happens before its Release, which happens before the buffer is
// handed to another fetch. The budget also counts memory the owner reports
// with Account (e.g. curl receive buffers). The cache never does I/O itself
// and never holds its lock while copying.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"

namespace stfs {

// Block buffers are mapped (mmap) rather than malloc'ed: freeing one gives
// its memory back to the system at once, so the process's RSS follows the
// budget instead of malloc's arenas and thresholds.
struct BufferUnmap {
  size_t mapped = 0;
  void operator()(char* p) const;
};
using BlockBuffer = std::unique_ptr<char, BufferUnmap>;

// Allocates a block buffer, or null when out of memory. Large buffers are
// 2 MiB-aligned and asked to be backed by huge pages: filling a fresh 4 MiB
// block then costs two page faults instead of 1024, which on a VM is the
// difference between 0.1 and 1 GB/s.
BlockBuffer AllocateBlockBuffer(size_t length);

using Deadline = std::chrono::steady_clock::time_point;

struct CachedBlock {
  uint64_t owner = 0;   // which source
  uint64_t index = 0;   // block number in the object
  uint64_t offset = 0;  // first byte in the object
  size_t length = 0;    // B, or less for the object's last block
  // Written only by the one fetcher while loading; read only once ready.
  BlockBuffer data;

  // Guarded by the cache's mutex.
  enum class State { kLoading, kReady, kFailed };
  State state = State::kLoading;
  Status error;
  bool prefetched = false;  // created by read-ahead
  bool used = false;        // read by someone since it was created
  bool consumed = false;    // a sequential reader has read past it
  int pins = 0;             // demand readers between Acquire and Release
};

struct BlockCacheStats {
  uint64_t budget = 0;
  uint64_t bytes = 0;        // ready + loading blocks in the cache
  uint64_t spare_bytes = 0;  // buffers kept for reuse
  uint64_t other_bytes = 0;  // memory reported with Account (transfer buffers)
  uint64_t blocks = 0;
  uint64_t evictions = 0;
  uint64_t recycled = 0;         // consumed blocks dropped early to reuse their buffers
  uint64_t prefetch_unused = 0;  // read-ahead blocks evicted before anyone read them
};

class BlockCache {
 public:
  explicit BlockCache(uint64_t budget_bytes);
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // Returns a number no other source of this cache uses.
  uint64_t NewOwner();

  enum class Found {
    kReady,    // cached: read it
    kLoading,  // someone is fetching it: Wait() for it
    kCreated,  // the caller must fetch it and call Complete()
    kNoRoom,   // the budget is taken by blocks being fetched or pinned
    kAbsent,   // (FindExisting) not in the cache
  };
  // Finds block `index` of `owner`, or creates it in the loading state.
  // Nothing is created past the budget (kNoRoom, null): a demand reader
  // then fetches its bytes without the cache. Read-ahead (`prefetch`) may
  // hold at most half the budget in blocks still loading: loading blocks
  // cannot be evicted, and several streams' windows together must not
  // leave demand reads without room. A demand read (!prefetch)
  // that gets a block pins it: the caller must Release it when done.
  std::shared_ptr<CachedBlock> Acquire(uint64_t owner, uint64_t index, uint64_t offset,
                                       size_t length, bool prefetch, Found* found);

  // Finds block `index` of `owner` (ready or loading) and pins it like a
  // demand Acquire, without ever creating it (null and kAbsent).
  std::shared_ptr<CachedBlock> FindExisting(uint64_t owner, uint64_t index, Found* found);

  // Unpins a block a demand read got from Acquire or FindExisting.
  void Release(const std::shared_ptr<CachedBlock>& block);

  // Ends the fetch of a block created by Acquire: ready when `status` is OK,
  // else failed and removed (a later read fetches afresh). Wakes waiters.
  // Only the first call for a block counts, so an error path may complete
  // every block it created without tracking which are done.
  void Complete(const std::shared_ptr<CachedBlock>& block, const Status& status);

  // Adds (or with a negative number, removes) memory outside the blocks
  // that the budget must cover; ready blocks are evicted to make room.
  void Account(int64_t bytes);

  // Marks a block a sequential reader has read to its end: it becomes the
  // first to go, and its buffer is reused for the next new block even below
  // the budget. A scan then cycles through a few buffers instead of filling
  // the whole budget with fresh memory (page faults and zeroing cost more
  // than loopback transfers) and evicting everything else; the kernel's page
  // cache holds what the scan read.
  void MarkConsumed(uint64_t owner, uint64_t index);

  // Returns a buffer of `length` bytes for a block being fetched: a recycled
  // one when there is one, else a new one (null when out of memory).
  BlockBuffer TakeBuffer(size_t length);

  // Waits until `block` is ready (OK) or failed (its error), at most until
  // `deadline`, and no longer once `*cancel` is true (IOError then).
  Status Wait(const std::shared_ptr<CachedBlock>& block, Deadline deadline = Deadline::max(),
              const std::atomic<bool>* cancel = nullptr);

  // Wakes every Wait so that it looks at its `cancel` flag again.
  void WakeWaiters();

  // Removes every block of `owner` (its source is going away). Blocks still
  // loading must have been completed first.
  void DropOwner(uint64_t owner);

  BlockCacheStats Stats() const;
  uint64_t budget() const { return budget_; }

 private:
  struct Key {
    uint64_t owner;
    uint64_t index;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(k.owner * 0x9E3779B97F4A7C15ull ^ k.index);
    }
  };
  struct Entry {
    std::shared_ptr<CachedBlock> block;
    std::list<Key>::iterator lru;  // position in lru_ (front = most recent)
  };

  // Returns an entry's block to a reader (pinned unless `prefetch`).
  std::shared_ptr<CachedBlock> Existing(Entry& entry, bool prefetch, Found* found);  // requires mu_
  // Evicts ready blocks, oldest first, until `incoming` more bytes fit.
  void EvictFor(uint64_t incoming);                                   // requires mu_
  uint64_t Used() const { return bytes_ + other_bytes_; }             // requires mu_
  void Remove(std::unordered_map<Key, Entry, KeyHash>::iterator it);  // requires mu_
  // Keeps `buffer` for reuse when the budget allows, else frees it.
  void Recycle(BlockBuffer buffer, size_t length);  // requires mu_

  const uint64_t budget_;
  mutable std::mutex mu_;
  std::condition_variable done_;  // a block left the loading state
  std::unordered_map<Key, Entry, KeyHash> entries_;
  std::list<Key> lru_;
  std::vector<std::pair<size_t, BlockBuffer>> spare_;  // recycled buffers and their lengths
  uint64_t spare_bytes_ = 0;
  uint64_t bytes_ = 0;
  uint64_t other_bytes_ = 0;
  uint64_t prefetch_loading_bytes_ = 0;  // read-ahead blocks created, not yet completed
  uint64_t next_owner_ = 1;
  uint64_t evictions_ = 0;
  uint64_t recycled_ = 0;
  uint64_t prefetch_unused_ = 0;
};

}  // namespace stfs
