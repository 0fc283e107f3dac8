// HttpRangeSource: the ByteSource of a remote object (see remote_source.h).
//
// Reads are served from three places: the bytes of the first request (the
// header, usually), header bytes past them (fetched exactly, uncached), and
// the block cache for everything else. A sequential reader gets read-ahead:
// parallel block requests issued to worker threads, never past the end of
// the tensor being read (learned from the header), never over the cache
// budget. A random reader fetches only the blocks it touches. The source
// never serves a byte that RangeFetcher has not checked. Read-ahead and
// blocks never reach past a read's ReadHint::fence (the end of what the open
// file maps to). Gathered reads (ReadRuns: a slice or a rank part) copy what
// is cached and fetch the rest exactly, close runs coalesced, or in whole
// blocks where that costs less counting each request as request_cost bytes,
// in parallel (http_range_runs.cc).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/byte_source.h"
#include "core/pinned_read.h"
#include "core/remote/block_cache.h"
#include "core/remote/range_fetcher.h"
#include "core/remote/read_pattern.h"
#include "core/remote/remote_source.h"
#include "core/remote/task_pool.h"

namespace stfs {

// Bytes asked for by the first request (format.md "Remote headers").
inline constexpr uint64_t kProbeBytes = 100'000;

// Whether block [offset, offset+length) lies within the bytes of the file
// being read (ReadHint::start to ReadHint::fence): only such a block is ever
// fetched whole, by a single read or a gathered one.
inline bool BlockInsideFile(uint64_t offset, uint64_t length, const ReadHint& hint) {
  return offset >= hint.start && offset + length <= hint.fence;
}

class HttpRangeSource final : public ByteSource, public PinnedReadable {
 public:
  // `prefix` is what fetcher->Probe returned.
  HttpRangeSource(std::unique_ptr<RangeFetcher> fetcher, std::string prefix,
                  const RemoteOptions& options, std::shared_ptr<BlockCache> cache);
  ~HttpRangeSource() override;

  StatusOr<size_t> ReadAt(uint64_t offset, size_t length, char* dst) const override;
  // Cached bytes come as spans of pinned cache blocks (no copy).
  StatusOr<PinnedBytes> ReadPinned(uint64_t offset, size_t length,
                                   const ReadHint& hint) const override;
  Status ReadRuns(std::span<const ByteRun> runs, const ReadHint& hint) const override;
  uint64_t Size() const override { return size_; }
  const std::string& Describe() const override { return fetcher_->describe(); }
  timespec ModificationTime() const override { return fetcher_->identity().mtime; }
  int FileDescriptor() const override { return -1; }
  std::string StatsJson() const override;
  void Shutdown() override;

 private:
  struct Queued {
    std::shared_ptr<CachedBlock> block;
    Deadline deadline;  // from when it was queued: a reader waiting on it waits no longer
  };

  // Reads [offset, offset+length) (inside the object) into `dst`, or, when
  // `pinned` is given, lends cache blocks to it (dst is then unused). What
  // ReadAt, ReadPinned and ReadRuns share; `hint` keys read-ahead by stream
  // and fences it.
  Status Read(uint64_t offset, size_t length, char* dst, PinnedBytes* pinned,
              const ReadHint& hint) const;
  Status ReadThroughCache(uint64_t offset, size_t length, char* dst, PinnedBytes* pinned,
                          const ReadHint& hint, Deadline deadline) const;
  // ReadRuns of several runs (http_range_runs.cc).
  Status ReadManyRuns(std::span<const ByteRun> runs, const ReadHint& hint) const;
  // Fetches consecutive blocks with one request and completes each (ready
  // or failed, also when something throws).
  Status FetchBlocks(const std::vector<std::shared_ptr<CachedBlock>>& run,
                     Deadline deadline) const;
  Status ShutDownError() const;
  // Starts read-ahead when the read (at `position` of its stream) continues
  // a sequential stream; never for bytes at or past `fence` (the end of the
  // reader's file in the object), nor past the tensor's end.
  void ScheduleReadahead(const ReadPatternTracker::Position& position, uint64_t offset,
                         size_t length, uint64_t last_block, uint64_t fence) const;
  void StartWorkers() const;
  void WorkerLoop() const;
  // Learns where tensors end from the header JSON, to fence read-ahead.
  void LearnTensorEnds(std::string_view header_json) const;
  // Returns the end of the tensor holding byte `pos` (or the object's end).
  uint64_t TensorEndAfter(uint64_t pos) const;

  const std::unique_ptr<RangeFetcher> fetcher_;
  const std::string prefix_;
  const uint64_t size_;
  const uint64_t header_end_;  // 8 + N when the first 8 bytes were plausible, else 0
  const uint64_t block_size_;
  const uint64_t readahead_max_;
  const int connections_;
  const uint64_t request_cost_;  // bytes a request is worth (RemoteOptions::request_cost)
  const std::shared_ptr<BlockCache> cache_;
  const uint64_t owner_;
  const std::function<void(uint64_t, uint64_t)> before_fetch_;  // tests only

  mutable ReadPatternTracker pattern_;
  mutable std::atomic<bool> cancel_{false};

  mutable std::mutex fence_mu_;
  mutable std::vector<uint64_t> tensor_ends_;  // guarded by fence_mu_, sorted

  mutable std::once_flag workers_started_;
  mutable std::mutex queue_mu_;
  mutable std::condition_variable queue_cv_;
  mutable std::deque<Queued> queue_;                        // guarded by queue_mu_
  mutable bool stopping_ = false;                           // guarded by queue_mu_
  mutable std::vector<std::thread> workers_;

  mutable std::atomic<uint64_t> reads_{0};
  mutable std::atomic<uint64_t> bytes_read_{0};
  mutable std::atomic<uint64_t> prefix_reads_{0};
  mutable std::atomic<uint64_t> hits_{0};
  mutable std::atomic<uint64_t> waits_{0};
  mutable std::atomic<uint64_t> misses_{0};
  mutable std::atomic<uint64_t> readahead_blocks_{0};
  mutable std::atomic<uint64_t> read_errors_{0};
  mutable std::atomic<uint64_t> direct_reads_{0};  // fetched past the cache
  mutable std::atomic<uint64_t> no_room_{0};       // blocks a read found no room for
  mutable std::atomic<int> in_flight_{0};
  mutable std::atomic<uint64_t> run_fetches_{0};  // requests of ReadRuns (exact or of blocks)

  // Helps ReadRuns fetch its requests in parallel (connections - 1 threads:
  // the reading thread is the other one). Declared last: stopped (joined)
  // first, while everything its tasks use still exists.
  mutable TaskPool run_helpers_;
};

}  // namespace stfs
