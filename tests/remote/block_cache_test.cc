// BlockCache and ReadPatternTracker: budget, LRU order, one fetch shared by
// many readers, failures that do not stick, and sequential-stream detection.
#include "core/remote/block_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "core/remote/read_pattern.h"

namespace stfs {
namespace {

constexpr size_t kBlock = 1000;

// Acquires block `index` as a demand read and, when created, completes it
// filled with the byte `index`. The read then ends (Release) unless
// `keep_pinned`, as if its reader were still copying from it.
std::shared_ptr<CachedBlock> Load(BlockCache& cache, uint64_t owner, uint64_t index,
                                  BlockCache::Found* found, bool keep_pinned = false) {
  auto block = cache.Acquire(owner, index, index * kBlock, kBlock, false, found);
  if (*found == BlockCache::Found::kCreated) {
    block->data = cache.TakeBuffer(kBlock);
    std::memset(block->data.get(), static_cast<int>(index), kBlock);
    cache.Complete(block, Status::OK());
  }
  if (block && !keep_pinned) cache.Release(block);
  return block;
}

TEST(BlockCache, EvictsLeastRecentlyUsedWithinBudget) {
  BlockCache cache(3 * kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  Load(cache, owner, 0, &found);
  Load(cache, owner, 1, &found);
  Load(cache, owner, 2, &found);
  Load(cache, owner, 0, &found);  // 0 becomes most recent
  EXPECT_EQ(found, BlockCache::Found::kReady);
  Load(cache, owner, 3, &found);  // evicts 1, the least recent
  EXPECT_EQ(found, BlockCache::Found::kCreated);
  EXPECT_EQ(cache.Stats().bytes, 3 * kBlock);
  EXPECT_EQ(cache.Stats().evictions, 1u);
  Load(cache, owner, 0, &found);
  EXPECT_EQ(found, BlockCache::Found::kReady);
  Load(cache, owner, 2, &found);
  EXPECT_EQ(found, BlockCache::Found::kReady);
  Load(cache, owner, 1, &found);
  EXPECT_EQ(found, BlockCache::Found::kCreated);
}

TEST(BlockCache, PinnedBlockIsNotEvicted) {
  BlockCache cache(kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  auto held = Load(cache, owner, 7, &found, /*keep_pinned=*/true);
  EXPECT_EQ(Load(cache, owner, 8, &found), nullptr);  // 7 is being copied from
  EXPECT_EQ(found, BlockCache::Found::kNoRoom);
  EXPECT_EQ(held->data.get()[kBlock - 1], 7);
  cache.Release(held);
  Load(cache, owner, 8, &found);  // now 7 goes
  EXPECT_EQ(found, BlockCache::Found::kCreated);
  EXPECT_EQ(cache.Stats().evictions, 1u);
  EXPECT_EQ(cache.Stats().blocks, 1u);
}

TEST(BlockCache, BuffersOfEvictedBlocksAreReused) {
  BlockCache cache(2 * kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  const char* first = Load(cache, owner, 0, &found)->data.get();
  Load(cache, owner, 1, &found);
  auto third = Load(cache, owner, 2, &found);  // evicts block 0, reuses its buffer
  EXPECT_EQ(third->data.get(), first);
  EXPECT_EQ(third->data.get()[kBlock - 1], 2);
  BlockCacheStats stats = cache.Stats();
  EXPECT_LE(stats.bytes + stats.spare_bytes, 2 * kBlock);
}

TEST(BlockCache, ConsumedBlocksGiveTheirBuffersFirstEvenBelowBudget) {
  BlockCache cache(100 * kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  auto a = Load(cache, owner, 0, &found);
  Load(cache, owner, 1, &found);
  const char* a_buffer = a->data.get();
  cache.MarkConsumed(owner, 0);
  a.reset();
  auto c = Load(cache, owner, 2, &found);  // far below budget, still reuses a's buffer
  EXPECT_EQ(c->data.get(), a_buffer);
  BlockCacheStats stats = cache.Stats();
  EXPECT_EQ(stats.blocks, 2u);
  EXPECT_EQ(stats.recycled, 1u);
  Load(cache, owner, 0, &found);
  EXPECT_EQ(found, BlockCache::Found::kCreated);
  Load(cache, owner, 1, &found);  // never consumed: still cached
  EXPECT_EQ(found, BlockCache::Found::kReady);
}

TEST(BlockCache, ConsumedBlockIsServedUntilItsBufferIsNeeded) {
  BlockCache cache(100 * kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  auto a = Load(cache, owner, 0, &found);
  cache.MarkConsumed(owner, 0);
  a.reset();
  Load(cache, owner, 0, &found);  // a straggler of the scan
  EXPECT_EQ(found, BlockCache::Found::kReady);
  Load(cache, owner, 1, &found);  // takes block 0's buffer
  Load(cache, owner, 0, &found);
  EXPECT_EQ(found, BlockCache::Found::kCreated);
  EXPECT_EQ(cache.Stats().recycled, 1u);
}

TEST(BlockCache, BufferHeldByAReaderIsNotReused) {
  BlockCache cache(kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  auto held = Load(cache, owner, 0, &found, /*keep_pinned=*/true);
  cache.DropOwner(owner);  // removed while a reader copies from it
  auto next = Load(cache, owner, 1, &found);
  ASSERT_NE(next, nullptr);
  EXPECT_NE(next->data.get(), held->data.get());
  EXPECT_EQ(held->data.get()[0], 0);
  EXPECT_EQ(next->data.get()[0], 1);
  cache.Release(held);
}

TEST(BlockCache, CompleteCountsOnlyOnce) {
  BlockCache cache(10 * kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  auto block = cache.Acquire(owner, 0, 0, kBlock, false, &found);
  block->data = AllocateBlockBuffer(kBlock);
  cache.Complete(block, Status::OK());
  cache.Complete(block, Status::IOError("late cleanup"));  // ignored: already ready
  EXPECT_TRUE(cache.Wait(block).ok());
  cache.Release(block);
  Load(cache, owner, 0, &found);
  EXPECT_EQ(found, BlockCache::Found::kReady);
}

TEST(BlockCache, WaitEndsAtItsDeadlineOrWhenCancelled) {
  BlockCache cache(10 * kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  auto block = cache.Acquire(owner, 0, 0, kBlock, false, &found);  // never completed here
  auto start = std::chrono::steady_clock::now();
  Status timed = cache.Wait(block, start + std::chrono::milliseconds(100));
  EXPECT_EQ(timed.code(), StatusCode::kIOError) << timed.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  std::atomic<bool> cancel{false};
  Status cancelled;
  std::thread waiter([&] { cancelled = cache.Wait(block, Deadline::max(), &cancel); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  start = std::chrono::steady_clock::now();
  cancel.store(true);
  cache.WakeWaiters();
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(cancelled.code(), StatusCode::kIOError);
  cache.Complete(block, Status::IOError("gone"));
  cache.Release(block);
}

TEST(BlockCache, AccountedMemoryCountsInTheBudget) {
  BlockCache cache(4 * kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  for (uint64_t i = 0; i < 4; ++i) Load(cache, owner, i, &found);
  cache.Account(2 * kBlock);  // e.g. two transfer buffers: two blocks go
  BlockCacheStats stats = cache.Stats();
  EXPECT_EQ(stats.other_bytes, 2 * kBlock);
  EXPECT_LE(stats.bytes + stats.spare_bytes + stats.other_bytes, 4 * kBlock);
  EXPECT_EQ(stats.blocks, 2u);
  cache.Account(-2 * static_cast<int64_t>(kBlock));
  EXPECT_EQ(cache.Stats().other_bytes, 0u);
}

TEST(BlockCache, PrefetchNeverExceedsTheBudget) {
  BlockCache cache(2 * kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  auto a = cache.Acquire(owner, 0, 0, kBlock, false, &found);
  auto b = cache.Acquire(owner, 1, kBlock, kBlock, false, &found);
  // Both loading: nothing may be evicted, so a prefetch gets no room.
  auto c = cache.Acquire(owner, 2, 2 * kBlock, kBlock, true, &found);
  EXPECT_EQ(found, BlockCache::Found::kNoRoom);
  EXPECT_EQ(c, nullptr);
  // Nor does a demand read (its reader fetches past the cache).
  auto d = cache.Acquire(owner, 3, 3 * kBlock, kBlock, false, &found);
  EXPECT_EQ(found, BlockCache::Found::kNoRoom);
  EXPECT_EQ(d, nullptr);
  for (auto& block : {a, b}) {
    block->data = AllocateBlockBuffer(kBlock);
    cache.Complete(block, Status::OK());
    cache.Release(block);
  }
  EXPECT_LE(cache.Stats().bytes, 2 * kBlock);
  // Once they are ready, a demand read evicts one.
  d = cache.Acquire(owner, 3, 3 * kBlock, kBlock, false, &found);
  EXPECT_EQ(found, BlockCache::Found::kCreated);
  cache.Complete(d, Status::IOError("not needed"));
  cache.Release(d);
}

TEST(BlockCache, ManyReadersShareOneFetch) {
  BlockCache cache(10 * kBlock);
  uint64_t owner = cache.NewOwner();
  std::atomic<int> fetches{0};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 16; ++i) {
    readers.emplace_back([&] {
      BlockCache::Found found;
      auto block = cache.Acquire(owner, 5, 5 * kBlock, kBlock, false, &found);
      if (found == BlockCache::Found::kCreated) {
        fetches.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        block->data = AllocateBlockBuffer(kBlock);
        std::memset(block->data.get(), 42, kBlock);
        cache.Complete(block, Status::OK());
      }
      if (!cache.Wait(block).ok() || block->data.get()[123] != 42) bad.fetch_add(1);
      cache.Release(block);
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(fetches.load(), 1);
  EXPECT_EQ(bad.load(), 0);
}

TEST(BlockCache, FailedFetchReachesWaitersAndIsNotCached) {
  BlockCache cache(10 * kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  auto block = cache.Acquire(owner, 1, kBlock, kBlock, false, &found);
  ASSERT_EQ(found, BlockCache::Found::kCreated);
  Status seen;
  std::thread waiter([&] {
    BlockCache::Found f;
    auto same = cache.Acquire(owner, 1, kBlock, kBlock, false, &f);
    EXPECT_EQ(f, BlockCache::Found::kLoading);
    seen = cache.Wait(same);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  cache.Complete(block, Status::IOError("boom"));
  waiter.join();
  EXPECT_EQ(seen.code(), StatusCode::kIOError);
  EXPECT_EQ(cache.Stats().bytes, 0u);
  auto again = cache.Acquire(owner, 1, kBlock, kBlock, false, &found);
  EXPECT_EQ(found, BlockCache::Found::kCreated);
  again->data = AllocateBlockBuffer(kBlock);
  cache.Complete(again, Status::OK());
}

TEST(BlockCache, OwnersAreSeparateAndDropOwnerFreesOnlyTheirs) {
  BlockCache cache(10 * kBlock);
  uint64_t a = cache.NewOwner();
  uint64_t b = cache.NewOwner();
  ASSERT_NE(a, b);
  BlockCache::Found found;
  Load(cache, a, 0, &found);
  Load(cache, b, 0, &found);
  EXPECT_EQ(found, BlockCache::Found::kCreated);
  cache.DropOwner(a);
  EXPECT_EQ(cache.Stats().blocks, 1u);
  Load(cache, b, 0, &found);
  EXPECT_EQ(found, BlockCache::Found::kReady);
}

TEST(BlockCache, CountsPrefetchedBlocksEvictedUnread) {
  BlockCache cache(2 * kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  auto p = cache.Acquire(owner, 0, 0, kBlock, true, &found);
  ASSERT_EQ(found, BlockCache::Found::kCreated);
  p->data = AllocateBlockBuffer(kBlock);
  cache.Complete(p, Status::OK());
  Load(cache, owner, 1, &found);
  Load(cache, owner, 2, &found);
  EXPECT_EQ(cache.Stats().prefetch_unused, 1u);
}

TEST(BlockCache, ReadaheadStillLoadingHoldsAtMostHalfTheBudget) {
  // Loading blocks cannot be evicted: were read-ahead (several streams' windows)
  // allowed the whole budget, demand reads would find no room.
  BlockCache cache(8 * kBlock);
  uint64_t owner = cache.NewOwner();
  BlockCache::Found found;
  std::vector<std::shared_ptr<CachedBlock>> ahead;
  for (uint64_t i = 0; i < 8; ++i) {
    auto block = cache.Acquire(owner, i, i * kBlock, kBlock, true, &found);
    if (found != BlockCache::Found::kCreated) break;
    ahead.push_back(block);
  }
  EXPECT_EQ(ahead.size(), 4u);
  EXPECT_EQ(found, BlockCache::Found::kNoRoom);
  auto demand = cache.Acquire(owner, 20, 20 * kBlock, kBlock, false, &found);
  EXPECT_EQ(found, BlockCache::Found::kCreated);
  // Once one is fetched, read-ahead may start another.
  ahead[0]->data = AllocateBlockBuffer(kBlock);
  cache.Complete(ahead[0], Status::OK());
  cache.Acquire(owner, 9, 9 * kBlock, kBlock, true, &found);
  EXPECT_EQ(found, BlockCache::Found::kCreated);
  for (auto& block : ahead) cache.Complete(block, Status::IOError("test over"));
  cache.Complete(demand, Status::IOError("test over"));
  cache.Release(demand);
}

// Returns how many earlier reads of its stream `offset` continues.
uint64_t ReadsBefore(ReadPatternTracker& t, uint64_t offset, uint64_t length) {
  return t.Record(offset, length).reads_before;
}

TEST(ReadPattern, SequentialReadsContinueAStream) {
  ReadPatternTracker t(4 << 20);
  EXPECT_EQ(ReadsBefore(t, 0, 131072), 0u);
  EXPECT_EQ(t.Record(131072, 131072).bytes_before, 131072u);
  EXPECT_EQ(t.Record(262144, 131072).bytes_before, 262144u);
  // Slightly out of order (two FUSE threads) still continues it.
  EXPECT_EQ(ReadsBefore(t, 524288, 131072), 3u);
  EXPECT_EQ(ReadsBefore(t, 393216, 131072), 4u);
}

TEST(ReadPattern, RandomReadsNeverMatch) {
  ReadPatternTracker t(4 << 20);
  uint64_t offsets[] = {900ull << 20, 10ull << 20,  500ull << 20,
                        70ull << 20,  300ull << 20, (10ull << 20) + (2 << 20)};
  for (uint64_t off : offsets) EXPECT_EQ(ReadsBefore(t, off, 4096), 0u) << off;
}

TEST(ReadPattern, SlackGrowsWithReadSizeUpToTheLimit) {
  ReadPatternTracker t(4 << 20);
  EXPECT_EQ(ReadsBefore(t, 0, 1 << 20), 0u);
  EXPECT_EQ(ReadsBefore(t, 4 << 20, 1 << 20), 1u);   // 3 MiB ahead: within 4 MiB
  EXPECT_EQ(ReadsBefore(t, 15 << 20, 1 << 20), 0u);  // 10 MiB ahead: another stream
}

TEST(ReadPattern, TracksSeveralInterleavedStreams) {
  ReadPatternTracker t(1 << 16);
  uint64_t bases[] = {0, 1ull << 30, 2ull << 30};
  for (uint64_t base : bases) EXPECT_EQ(ReadsBefore(t, base, 4096), 0u);
  for (uint64_t round = 1; round < 4; ++round) {
    for (uint64_t base : bases) EXPECT_EQ(ReadsBefore(t, base + round * 4096, 4096), round);
  }
}

TEST(ReadPattern, StreamsOfOneRegionAreTrackedApart) {
  // Two open files reading the same bytes in step: by offset they would be
  // one stream read twice; by stream each is its own scan.
  ReadPatternTracker t(4 << 20);
  for (uint64_t i = 0; i < 8; ++i) {
    for (uint64_t stream : {7u, 9u}) {
      ReadPatternTracker::Position p = t.Record(i * 131072, 131072, stream);
      EXPECT_EQ(p.reads_before, i) << stream;
      EXPECT_EQ(p.bytes_before, i * 131072) << stream;
    }
  }
}

TEST(ReadPattern, AStreamHoppingInOneRegionNeverAdvances) {
  // Many reads near each other, never moving on: a random reader of one
  // region. Only bytes that advance the stream count, so it never earns
  // read-ahead (which asks for two blocks' worth); by offset it would.
  ReadPatternTracker t(4 << 20);
  const uint64_t base = 40ull << 20;
  uint64_t offsets[] = {0, 65536, 16384, 131072, 32768, 98304, 0, 114688};
  uint64_t by_stream = 0, by_offset = 0;
  for (int round = 0; round < 20; ++round) {
    for (uint64_t off : offsets) {
      by_stream = t.Record(base + off, 16384, 5).bytes_before;
      by_offset = t.Record((1ull << 30) + off, 16384).bytes_before;
    }
  }
  EXPECT_LE(by_stream, 147456u);  // at most the region itself
  EXPECT_GE(by_offset, 2u << 20);
}

TEST(ReadPattern, AStreamsLateSmallReadsDoNotRestartIt) {
  // The kernel's 1008 KiB reads with a 16 KiB tail sent after the next big
  // one: the tail trails by a MiB, far beyond its own 8 lengths.
  ReadPatternTracker t(4 << 20);
  uint64_t at = 0;
  for (uint64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(t.Record(at, 1032192, 4).reads_before, 3 * i);
    EXPECT_EQ(t.Record(at + 1032192 + 16384, 1032192, 4).reads_before, 3 * i + 1);
    EXPECT_EQ(t.Record(at + 1032192, 16384, 4).reads_before, 3 * i + 2);
    at += 2 * 1032192 + 16384;
  }
}

TEST(ReadPattern, AStreamThatJumpsStartsAgain) {
  ReadPatternTracker t(4 << 20);
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(t.Record(i << 20, 1 << 20, 3).reads_before, i);
  EXPECT_EQ(t.Record(100ull << 20, 1 << 20, 3).reads_before, 0u);
  EXPECT_EQ(t.Record(101ull << 20, 1 << 20, 3).reads_before, 1u);
  // A read of stream 0 near it does not continue another stream's scan.
  EXPECT_EQ(t.Record(102ull << 20, 1 << 20).reads_before, 0u);
}

}  // namespace
}  // namespace stfs
