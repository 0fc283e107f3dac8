// BlockCache (see block_cache.h).
#include "core/remote/block_cache.h"

#include <sys/mman.h>

#include "core/remote/remote_source.h"

namespace stfs {

BlockBuffer AllocateBlockBuffer(size_t length) {
  constexpr size_t kHugePage = 2 << 20;
  if (length < kHugePage) return BlockBuffer(static_cast<char*>(std::malloc(length ? length : 1)));
  size_t rounded = (length + kHugePage - 1) / kHugePage * kHugePage;
  char* p = static_cast<char*>(std::aligned_alloc(kHugePage, rounded));
  if (p) ::madvise(p, rounded, MADV_HUGEPAGE);  // a hint: failure is harmless
  return BlockBuffer(p);
}

BlockCache::BlockCache(uint64_t budget_bytes) : budget_(budget_bytes) {}

std::shared_ptr<BlockCache> MakeBlockCache(uint64_t budget_bytes) {
  return std::make_shared<BlockCache>(budget_bytes);
}

uint64_t BlockCache::NewOwner() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_owner_++;
}

void BlockCache::Recycle(BlockBuffer buffer, size_t length) {
  if (!buffer || bytes_ + spare_bytes_ + length > budget_) return;
  spare_bytes_ += length;
  spare_.emplace_back(length, std::move(buffer));
}

void BlockCache::MarkConsumed(uint64_t owner, uint64_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(Key{owner, index});
  if (it == entries_.end() || it->second.block->state != CachedBlock::State::kReady) return;
  it->second.block->consumed = true;
  lru_.splice(lru_.end(), lru_, it->second.lru);
}

BlockBuffer BlockCache::TakeBuffer(size_t length) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = spare_.begin(); it != spare_.end(); ++it) {
      if (it->first == length) {
        BlockBuffer buffer = std::move(it->second);
        spare_bytes_ -= length;
        spare_.erase(it);
        return buffer;
      }
    }
  }
  return AllocateBlockBuffer(length);
}

void BlockCache::Remove(std::unordered_map<Key, Entry, KeyHash>::iterator it) {
  std::shared_ptr<CachedBlock> block = std::move(it->second.block);
  if (block->prefetched && !block->used && block->state == CachedBlock::State::kReady) {
    ++prefetch_unused_;
  }
  bytes_ -= block->length;
  // Nobody else holds it (no reader copying): its buffer can serve a new block.
  if (block.use_count() == 1 && block->state == CachedBlock::State::kReady) {
    Recycle(std::move(block->data), block->length);
  }
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

void BlockCache::EvictFor(uint64_t incoming) {
  // Walk from the least recently used end; list iterators stay valid when
  // another element is erased, so `it` survives the removal of its neighbour.
  for (auto it = lru_.end(); bytes_ + incoming > budget_ && it != lru_.begin();) {
    auto victim = std::prev(it);
    auto entry = entries_.find(*victim);
    if (entry->second.block->state != CachedBlock::State::kReady) {
      it = victim;
      continue;
    }
    Remove(entry);
    ++evictions_;
  }
}

std::shared_ptr<CachedBlock> BlockCache::Acquire(uint64_t owner, uint64_t index, uint64_t offset,
                                                 size_t length, bool prefetch, Found* found) {
  std::lock_guard<std::mutex> lock(mu_);
  Key key{owner, index};
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    std::shared_ptr<CachedBlock>& block = it->second.block;
    if (!prefetch) {
      block->used = true;
      // A consumed block read again is almost always a straggler of the same
      // scan (FUSE threads deliver reads slightly out of order): it stays
      // first in line for reuse.
      if (!block->consumed) lru_.splice(lru_.begin(), lru_, it->second.lru);
    }
    *found = block->state == CachedBlock::State::kReady ? Found::kReady : Found::kLoading;
    return block;
  }
  // A consumed block gives its buffer to this one. Consumed blocks form the
  // old end of the LRU list; the newest of them may still be being copied by
  // its reader, so look a few deep for one nobody holds.
  int looked = 0;
  for (auto it = lru_.end(); it != lru_.begin() && looked < 8; ++looked) {
    --it;
    auto entry = entries_.find(*it);
    const std::shared_ptr<CachedBlock>& old = entry->second.block;
    if (!old->consumed) break;
    if (old->state == CachedBlock::State::kReady && old.use_count() == 1) {
      Remove(entry);
      ++recycled_;
      break;
    }
  }
  EvictFor(length);
  // Spare buffers beyond what the budget leaves free go back to the system
  // (one block of slack: the new block is about to take a spare).
  while (!spare_.empty() && bytes_ + spare_bytes_ > budget_) {
    spare_bytes_ -= spare_.back().first;
    spare_.pop_back();
  }
  if (prefetch && bytes_ + length > budget_) {
    *found = Found::kNoRoom;
    return nullptr;
  }
  auto block = std::make_shared<CachedBlock>();
  block->owner = owner;
  block->index = index;
  block->offset = offset;
  block->length = length;
  block->prefetched = prefetch;
  block->used = !prefetch;
  lru_.push_front(key);
  entries_.emplace(key, Entry{block, lru_.begin()});
  bytes_ += length;
  *found = Found::kCreated;
  return block;
}

void BlockCache::Complete(const std::shared_ptr<CachedBlock>& block, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (status.ok()) {
      block->state = CachedBlock::State::kReady;
      // Demand reads may have pushed the cache over budget while loading.
      if (bytes_ > budget_) EvictFor(0);
    } else {
      block->state = CachedBlock::State::kFailed;
      block->error = status;
      auto it = entries_.find(Key{block->owner, block->index});
      if (it != entries_.end() && it->second.block == block) Remove(it);
      block->data.reset();
    }
  }
  done_.notify_all();
}

Status BlockCache::Wait(const std::shared_ptr<CachedBlock>& block) {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return block->state != CachedBlock::State::kLoading; });
  if (block->state == CachedBlock::State::kFailed) return block->error;
  return Status::OK();
}

void BlockCache::DropOwner(uint64_t owner) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->first.owner == owner) Remove(it);
    it = next;
  }
}

BlockCacheStats BlockCache::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BlockCacheStats s;
  s.budget = budget_;
  s.bytes = bytes_;
  s.spare_bytes = spare_bytes_;
  s.blocks = entries_.size();
  s.evictions = evictions_;
  s.recycled = recycled_;
  s.prefetch_unused = prefetch_unused_;
  return s;
}

}  // namespace stfs
