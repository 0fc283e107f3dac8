// BlockCache (see block_cache.h).
#include "core/remote/block_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>

#include "core/remote/remote_source.h"

namespace stfs {

void BufferUnmap::operator()(char* p) const {
  if (p) ::munmap(p, mapped);
}

BlockBuffer AllocateBlockBuffer(size_t length) {
  constexpr size_t kPage = 4096;
  constexpr size_t kHugePage = 2 << 20;
  size_t rounded = (std::max<size_t>(length, 1) + kPage - 1) / kPage * kPage;
  if (rounded < kHugePage) {
    void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return BlockBuffer();
    return BlockBuffer(static_cast<char*>(p), BufferUnmap{rounded});
  }
  // Map one huge page more than needed and trim both ends to align.
  rounded = (length + kHugePage - 1) / kHugePage * kHugePage;
  size_t span = rounded + kHugePage;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return BlockBuffer();
  uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (begin + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > begin) ::munmap(raw, aligned - begin);
  size_t tail = begin + span - (aligned + rounded);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + rounded), tail);
  char* p = reinterpret_cast<char*>(aligned);
  ::madvise(p, rounded, MADV_HUGEPAGE);  // a hint: failure is harmless
  return BlockBuffer(p, BufferUnmap{rounded});
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
  if (!buffer || Used() + spare_bytes_ + length > budget_) return;
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
  // No reader is copying from it: its buffer can serve a new block.
  if (block->pins == 0 && block->state == CachedBlock::State::kReady) {
    Recycle(std::move(block->data), block->length);
  }
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

void BlockCache::EvictFor(uint64_t incoming) {
  // Walk from the least recently used end; list iterators stay valid when
  // another element is erased, so `it` survives the removal of its neighbour.
  for (auto it = lru_.end(); Used() + incoming > budget_ && it != lru_.begin();) {
    auto victim = std::prev(it);
    auto entry = entries_.find(*victim);
    // Blocks being fetched or copied from stay: dropping one would not free
    // its memory, only stop counting it.
    const CachedBlock& block = *entry->second.block;
    if (block.state != CachedBlock::State::kReady || block.pins > 0) {
      it = victim;
      continue;
    }
    Remove(entry);
    ++evictions_;
  }
}

std::shared_ptr<CachedBlock> BlockCache::Existing(Entry& entry, bool prefetch, Found* found) {
  std::shared_ptr<CachedBlock>& block = entry.block;
  if (!prefetch) {
    block->used = true;
    ++block->pins;
    // A consumed block read again is almost always a straggler of the same
    // scan (FUSE threads deliver reads slightly out of order): it stays
    // first in line for reuse.
    if (!block->consumed) lru_.splice(lru_.begin(), lru_, entry.lru);
  }
  *found = block->state == CachedBlock::State::kReady ? Found::kReady : Found::kLoading;
  return block;
}

std::shared_ptr<CachedBlock> BlockCache::FindExisting(uint64_t owner, uint64_t index,
                                                      Found* found) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(Key{owner, index});
  if (it == entries_.end()) {
    *found = Found::kAbsent;
    return nullptr;
  }
  return Existing(it->second, /*prefetch=*/false, found);
}

std::shared_ptr<CachedBlock> BlockCache::Acquire(uint64_t owner, uint64_t index, uint64_t offset,
                                                 size_t length, bool prefetch, Found* found) {
  std::lock_guard<std::mutex> lock(mu_);
  Key key{owner, index};
  auto it = entries_.find(key);
  if (it != entries_.end()) return Existing(it->second, prefetch, found);
  if (prefetch && prefetch_loading_bytes_ + length > budget_ / 2) {
    *found = Found::kNoRoom;
    return nullptr;
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
    if (old->state == CachedBlock::State::kReady && old->pins == 0) {
      Remove(entry);
      ++recycled_;
      break;
    }
  }
  EvictFor(length);
  // Spare buffers beyond what the budget leaves free go back to the system
  // (one block of slack: the new block is about to take a spare).
  while (!spare_.empty() && Used() + spare_bytes_ > budget_) {
    spare_bytes_ -= spare_.back().first;
    spare_.pop_back();
  }
  if (Used() + length > budget_) {
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
  block->pins = prefetch ? 0 : 1;
  if (prefetch) prefetch_loading_bytes_ += length;
  lru_.push_front(key);
  entries_.emplace(key, Entry{block, lru_.begin()});
  bytes_ += length;
  *found = Found::kCreated;
  return block;
}

void BlockCache::Release(const std::shared_ptr<CachedBlock>& block) {
  std::lock_guard<std::mutex> lock(mu_);
  --block->pins;
}

void BlockCache::Account(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes < 0 && static_cast<uint64_t>(-bytes) > other_bytes_) {
    other_bytes_ = 0;
  } else {
    other_bytes_ += bytes;
  }
  if (Used() > budget_) EvictFor(0);
}

void BlockCache::Complete(const std::shared_ptr<CachedBlock>& block, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (block->state != CachedBlock::State::kLoading) return;
    if (block->prefetched) prefetch_loading_bytes_ -= block->length;
    if (status.ok()) {
      block->state = CachedBlock::State::kReady;
      if (Used() > budget_) EvictFor(0);
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

Status BlockCache::Wait(const std::shared_ptr<CachedBlock>& block, Deadline deadline,
                        const std::atomic<bool>* cancel) {
  std::unique_lock<std::mutex> lock(mu_);
  auto settled = [&] {
    return block->state != CachedBlock::State::kLoading || (cancel && cancel->load());
  };
  if (deadline == Deadline::max()) {
    done_.wait(lock, settled);
  } else if (!done_.wait_until(lock, deadline, settled)) {
    return Status::IOError("timed out waiting for bytes " + std::to_string(block->offset) +
                           "+" + std::to_string(block->length) + " being fetched");
  }
  if (block->state == CachedBlock::State::kFailed) return block->error;
  if (block->state == CachedBlock::State::kLoading) {
    return Status::IOError("source shut down while waiting for bytes " +
                           std::to_string(block->offset) + "+" + std::to_string(block->length));
  }
  return Status::OK();
}

void BlockCache::WakeWaiters() {
  { std::lock_guard<std::mutex> lock(mu_); }
  done_.notify_all();
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
  s.other_bytes = other_bytes_;
  s.blocks = entries_.size();
  s.evictions = evictions_;
  s.recycled = recycled_;
  s.prefetch_unused = prefetch_unused_;
  return s;
}

}  // namespace stfs
