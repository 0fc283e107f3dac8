// HttpRangeSource::ReadRuns: gathered reads (a slice view, a rank part).
//
// A column part of a matrix is many short runs far apart (8 KiB every
// 64 KiB); pulling each run's whole block into the cache fetched 7x the part.
// So a gathered read takes from the cache only what is already there (ready
// or being fetched) and fetches the rest EXACTLY, straight into the reader's
// buffer:
//   - pieces of runs that touch (or are split at a block edge) are one request;
//   - gaps between pieces are fetched too (into a small scratch counted in
//     the cache budget) only while every fetched gap together stays within
//     10% of the bytes asked, smallest gaps first, so a read never fetches
//     more than 1.1x what it asks; runs so short (< 512 B on average) that a
//     request per run would cost far more than the bytes take gaps up to
//     4 KiB too;
//   - requests are at most a block long and run in parallel, up to
//     `connections` at once: the reading thread and the source's TaskPool
//     threads take them from one shared counter, so the read completes even
//     when no helper is free.
// Fetching exactly costs a request per distant run, though: a column part of
// 1 KiB rows took a request per row, and a GET costs far more than 1 KiB
// (S3: 20-50 ms and a price each). So each block of the read that holds
// missing pieces is weighed: bytes plus request_cost per request of the
// exact plan in it, against the whole block plus one request, and against
// one request for the span of its pieces (gaps into scratch). A block that
// costs less whole is fetched through the cache (pinned, created by this
// read, completed on every path), where the part's next reads and the
// node's other ranks of the same rows find it. Blocks reaching outside the
// file (before ReadHint::start or past ReadHint::fence) and blocks the cache
// has no room for go exact or as one span;
// request_cost=0 always fetches exactly.
// A single run (a tensor's `data`, a contiguous part, most slice reads) goes
// the usual way through the block cache and read-ahead (Read), fenced
// at ReadHint::fence. Every fetch goes through RangeFetcher::Fetch with the
// read's deadline and the source's cancel flag, and any error fails the whole
// read: the caller gets a Status, never a buffer with holes.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "core/remote/http_range_source.h"

namespace stfs {
namespace {

constexpr uint64_t kMaxOverfetchPercent = 10;
// Larger gaps always split requests: they bound the scratch of a request.
constexpr uint64_t kMaxFetchedGap = 256 << 10;
// Runs shorter than this on average fetch gaps up to kTinyRunGap as well.
constexpr uint64_t kTinyRunBytes = 512;
constexpr uint64_t kTinyRunGap = 4096;

// Bytes of the read that must be fetched: `length` source bytes at `offset`.
struct Missing {
  uint64_t offset;
  size_t length;
  char* dst;
};

// Missing pieces [first, last) fetched with one Range request of `length`
// bytes at `offset`; `largest_gap` sizes its scratch.
struct Request {
  size_t first;
  size_t last;
  uint64_t offset;
  uint64_t length;
  uint64_t largest_gap;
};

// Shared by the reading thread and its helpers: fetches 0..count-1.
struct Batch {
  size_t count = 0;
  std::function<Status(size_t)> fetch;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::condition_variable cv;
  size_t finished = 0;  // guarded by mu
  Status error;         // guarded by mu: the first one
};

// Groups sorted `missing` into requests (see the note at the top).
std::vector<Request> PlanRequests(const std::vector<Missing>& missing, uint64_t max_request) {
  const size_t n = missing.size();
  uint64_t asked = 0;
  for (const Missing& m : missing) asked += m.length;
  // joined[i]: piece i is fetched with piece i - 1 (and the gap between).
  std::vector<char> joined(n, 0);
  std::vector<std::pair<uint64_t, size_t>> gaps;  // (gap, i) between pieces i - 1 and i
  for (size_t i = 1; i < n; ++i) {
    const uint64_t prev_end = missing[i - 1].offset + missing[i - 1].length;
    if (missing[i].offset < prev_end) continue;  // overlapping runs: fetched apart
    const uint64_t gap = missing[i].offset - prev_end;
    if (gap == 0) {
      joined[i] = 1;
    } else if (gap <= kMaxFetchedGap) {
      gaps.emplace_back(gap, i);
    }
  }
  std::sort(gaps.begin(), gaps.end());
  uint64_t budget = asked * kMaxOverfetchPercent / 100;
  const bool tiny_runs = n > 1 && asked / n < kTinyRunBytes;
  for (const auto& [gap, i] : gaps) {
    if (gap <= budget) {
      budget -= gap;
      joined[i] = 1;
    } else if (tiny_runs && gap <= kTinyRunGap) {
      joined[i] = 1;
    }
  }
  std::vector<Request> requests;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t end = missing[i].offset + missing[i].length;
    if (!requests.empty() && joined[i] && end - requests.back().offset <= max_request) {
      Request& r = requests.back();
      r.largest_gap = std::max(r.largest_gap, missing[i].offset - (r.offset + r.length));
      r.length = end - r.offset;
      r.last = i + 1;
    } else {
      requests.push_back(Request{i, i + 1, missing[i].offset, missing[i].length, 0});
    }
  }
  return requests;
}

// Fetches `request` of `missing` into the pieces' buffers; the gaps' bytes
// land in one scratch buffer (overwritten gap after gap), counted in the
// cache budget while it lives.
Status FetchRequest(RangeFetcher& fetcher, BlockCache& cache, const std::vector<Missing>& missing,
                    const Request& request, const std::atomic<bool>* cancel, Deadline deadline) {
  std::unique_ptr<char[]> scratch;
  if (request.largest_gap != 0) {
    scratch.reset(new (std::nothrow) char[request.largest_gap]);
    if (!scratch) {
      return Status::ResourceExhausted(fetcher.describe() + ": out of memory for a " +
                                       std::to_string(request.largest_gap) + "-byte gap");
    }
  }
  const int64_t accounted = static_cast<int64_t>(request.largest_gap);
  if (accounted != 0) cache.Account(accounted);
  Status status;
  try {
    std::vector<BodySegment> segments;
    segments.reserve(2 * (request.last - request.first));
    uint64_t at = request.offset;
    for (size_t i = request.first; i < request.last; ++i) {
      if (missing[i].offset > at) segments.push_back({scratch.get(), static_cast<size_t>(missing[i].offset - at)});
      segments.push_back({missing[i].dst, missing[i].length});
      at = missing[i].offset + missing[i].length;
    }
    status = fetcher.Fetch(request.offset, request.length, segments, cancel, deadline);
  } catch (const std::exception& e) {
    status = Status::IOError(fetcher.describe() + ": fetch failed: " + e.what());
  }
  if (accounted != 0) cache.Account(-accounted);
  return status;
}

// How a block holding missing pieces is fetched when not exactly.
struct BlockWay {
  uint64_t index;
  bool whole;  // the whole block, through the cache (never outside the file: BlockInsideFile)
  bool span;   // else (or when the cache has no room) its pieces in one request
};

// Weighs each block holding pieces of sorted `missing` (each inside one
// block), planned `exact`ly: its exact cost is the plan's bytes inside it
// plus request_cost per request starting in it; one request for all its
// pieces (their span, gaps included) costs the span plus one request; the
// whole block its length plus one request. A block is fetched whole when
// that costs at most an eighth of a block more than exactly, even where its
// span would be cheaper still: the rest is what the reader's next read
// (which starts in the same block) and the node's other ranks of the same
// rows want, and bytes fetched exactly are not cached (a rank of runs so
// short that the exact plan takes whole rows would otherwise fetch them
// again for the next rank). Else a block goes as a span when that is
// cheaper than exactly. Returns the blocks not fetched exactly, ascending.
std::vector<BlockWay> WeighBlocks(const std::vector<Missing>& missing, const std::vector<Request>& exact,
                                  uint64_t block_size, uint64_t object_size, const ReadHint& hint,
                                  uint64_t request_cost) {
  std::vector<BlockWay> ways;
  if (request_cost == 0 || missing.empty()) return ways;
  // One entry per block holding pieces (ascending), however far apart.
  struct Cost {
    uint64_t index;
    uint64_t span_begin;
    uint64_t span_end;
    uint64_t exact = 0;
  };
  std::vector<Cost> costs;
  for (const Missing& m : missing) {
    const uint64_t index = m.offset / block_size;
    if (costs.empty() || costs.back().index != index) costs.push_back(Cost{index, m.offset, 0});
    costs.back().span_end = std::max(costs.back().span_end, m.offset + m.length);
  }
  Cost nowhere{0, 0, 0};  // (not reached: every block a request touches holds a piece)
  auto cost_of = [&](uint64_t index) -> Cost& {
    auto it = std::lower_bound(costs.begin(), costs.end(), index,
                               [](const Cost& c, uint64_t i) { return c.index < i; });
    return it != costs.end() && it->index == index ? *it : nowhere;
  };
  for (const Request& r : exact) {
    cost_of(r.offset / block_size).exact += request_cost;
    // A request is at most a block long and ends with a piece: it spans one
    // block or two that both hold pieces.
    for (uint64_t at = r.offset, end = r.offset + r.length; at < end;) {
      const uint64_t index = at / block_size;
      const uint64_t upto = std::min(end, (index + 1) * block_size);
      cost_of(index).exact += upto - at;
      at = upto;
    }
  }
  for (const Cost& c : costs) {
    const uint64_t offset = c.index * block_size;
    const uint64_t length = std::min(block_size, object_size - offset);
    const uint64_t span = c.span_end - c.span_begin;
    const bool whole = BlockInsideFile(offset, length, hint) && length + request_cost <= c.exact + length / 8;
    const bool as_span = span + request_cost < c.exact;
    if (whole || as_span) ways.push_back(BlockWay{c.index, whole, as_span});
  }
  return ways;
}

// Joins the requests of `requests` (planned over sorted `missing`) whose
// pieces lie in one of the `span_blocks` (ascending) into one request per
// block: the gaps between them are fetched into scratch.
void JoinSpans(const std::vector<Missing>& missing, const std::vector<uint64_t>& span_blocks,
               uint64_t block_size, std::vector<Request>* requests) {
  if (span_blocks.empty()) return;
  auto in_span = [&](size_t piece) {
    return std::binary_search(span_blocks.begin(), span_blocks.end(), missing[piece].offset / block_size);
  };
  std::vector<Request> joined;
  for (const Request& r : *requests) {
    if (!joined.empty() && in_span(r.first) &&
        missing[joined.back().last - 1].offset / block_size == missing[r.first].offset / block_size) {
      Request& j = joined.back();
      j.largest_gap = std::max({j.largest_gap, r.largest_gap, r.offset - (j.offset + j.length)});
      j.length = r.offset + r.length - j.offset;
      j.last = r.last;
    } else {
      joined.push_back(r);
    }
  }
  *requests = std::move(joined);
}

// Takes requests off `batch` until none is left; a request after a failure
// is skipped (the read fails anyway).
void Work(Batch& batch) {
  for (;;) {
    const size_t i = batch.next.fetch_add(1);
    if (i >= batch.count) return;
    Status status;
    if (!batch.failed.load()) {
      try {
        status = batch.fetch(i);
      } catch (const std::exception& e) {
        status = Status::IOError(std::string("fetch failed: ") + e.what());
      }
    }
    std::lock_guard<std::mutex> lock(batch.mu);
    if (!status.ok() && batch.error.ok()) {
      batch.error = status;
      batch.failed.store(true);
    }
    if (++batch.finished == batch.count) batch.cv.notify_all();
  }
}

// Runs `batch` on this thread and up to `helpers` threads of `pool`; returns
// once every request has finished (each ends within its deadline), so no
// helper writes into the reader's buffer afterwards.
Status RunBatch(TaskPool& pool, int helpers, const std::shared_ptr<Batch>& batch) {
  const size_t extra = std::min<size_t>(std::max(helpers, 0), batch->count - 1);
  for (size_t i = 0; i < extra; ++i) {
    // Must not throw past here: helpers already posted may be writing into
    // the reader's buffers until the wait below.
    bool posted = false;
    try {
      posted = pool.Post([batch] { Work(*batch); });
    } catch (const std::exception&) {
    }
    if (!posted) break;
  }
  Work(*batch);
  std::unique_lock<std::mutex> lock(batch->mu);
  batch->cv.wait(lock, [&] { return batch->finished == batch->count; });
  return batch->error;
}

}  // namespace

Status HttpRangeSource::ReadRuns(std::span<const ByteRun> runs, const ReadHint& hint) const {
  for (const ByteRun& run : runs) RETURN_IF_ERROR(CheckRunInside(*this, run.offset, run.length));
  if (runs.size() != 1) return ReadManyRuns(runs, hint);
  if (runs[0].length == 0) return Status::OK();
  return Read(runs[0].offset, runs[0].length, runs[0].dst, nullptr, hint);
}

Status HttpRangeSource::ReadManyRuns(std::span<const ByteRun> runs, const ReadHint& hint) const {
  if (cancel_.load()) return ShutDownError();
  reads_.fetch_add(1, std::memory_order_relaxed);
  const Deadline deadline = fetcher_->DeadlineFromNow();
  // Header bytes are never in blocks: Read serves them (from the probe's bytes).
  const uint64_t header_bytes_end = std::max<uint64_t>(prefix_.size(), header_end_);
  struct CachedPiece {
    size_t pin;  // its block: pinned[pin]
    uint64_t offset;
    size_t length;
    char* dst;
  };
  std::vector<std::shared_ptr<CachedBlock>> pinned;  // released below, whatever happens
  std::vector<std::shared_ptr<CachedBlock>> created;  // completed below, whatever happens
  std::vector<CachedPiece> cached;
  std::vector<Missing> missing;
  uint64_t asked = 0;
  Status status;
  try {
    uint64_t memo_index = UINT64_MAX;
    size_t memo_pin = SIZE_MAX;  // SIZE_MAX: block memo_index is not cached
    for (const ByteRun& run : runs) {
      asked += run.length;
      const uint64_t end = run.offset + run.length;
      uint64_t pos = run.offset;
      if (pos < header_bytes_end) {
        const uint64_t upto = std::min(end, header_bytes_end);
        status = Read(pos, upto - pos, run.dst, nullptr, hint);
        if (!status.ok()) break;
        asked -= upto - pos;  // Read counted them
        pos = upto;
      }
      while (pos < end) {
        const uint64_t index = pos / block_size_;
        const uint64_t piece_end = std::min(end, (index + 1) * block_size_);
        if (index != memo_index) {
          BlockCache::Found found;
          std::shared_ptr<CachedBlock> block = cache_->FindExisting(owner_, index, &found);
          memo_index = index;
          memo_pin = SIZE_MAX;
          if (block) {
            (found == BlockCache::Found::kReady ? hits_ : waits_).fetch_add(1, std::memory_order_relaxed);
            memo_pin = pinned.size();
            pinned.push_back(std::move(block));
          } else {
            misses_.fetch_add(1, std::memory_order_relaxed);
          }
        }
        char* dst = run.dst + (pos - run.offset);
        const size_t length = static_cast<size_t>(piece_end - pos);
        if (memo_pin != SIZE_MAX) {
          cached.push_back(CachedPiece{memo_pin, pos, length, dst});
        } else if (!missing.empty() && pos % block_size_ != 0 &&
                   missing.back().offset + missing.back().length == pos &&
                   missing.back().dst + missing.back().length == dst) {
          missing.back().length += length;
        } else {
          missing.push_back(Missing{pos, length, dst});
        }
        pos = piece_end;
      }
    }
    if (status.ok() && !missing.empty()) {
      auto by_offset = [](const Missing& a, const Missing& b) { return a.offset < b.offset; };
      if (!std::is_sorted(missing.begin(), missing.end(), by_offset)) {
        std::sort(missing.begin(), missing.end(), by_offset);
      }
      std::vector<Request> requests = PlanRequests(missing, block_size_);
      const std::vector<BlockWay> ways = WeighBlocks(missing, requests, block_size_, size_, hint, request_cost_);
      // Runs of consecutive blocks this read created, each one request, at
      // most 1/connections of the blocks long so that they run in parallel.
      std::vector<std::vector<std::shared_ptr<CachedBlock>>> block_runs;
      if (!ways.empty()) {
        const size_t longest_run = (ways.size() + connections_ - 1) / connections_;
        std::vector<Missing> exact;
        std::vector<uint64_t> span_blocks;
        size_t next = 0;  // first piece of missing not yet placed
        for (const BlockWay& way : ways) {
          const uint64_t index = way.index;
          const uint64_t offset = index * block_size_;
          for (; next < missing.size() && missing[next].offset < offset; ++next) exact.push_back(missing[next]);
          BlockCache::Found found = BlockCache::Found::kAbsent;
          std::shared_ptr<CachedBlock> block;
          if (way.whole) {
            block = cache_->Acquire(owner_, index, offset,
                                    static_cast<size_t>(std::min(block_size_, size_ - offset)),
                                    /*prefetch=*/false, &found);
          }
          if (found == BlockCache::Found::kNoRoom) no_room_.fetch_add(1, std::memory_order_relaxed);
          if (!block) {  // its pieces are fetched exactly, or as one span
            if (way.span) span_blocks.push_back(index);
            continue;
          }
          const size_t pin = pinned.size();
          pinned.push_back(block);
          if (found == BlockCache::Found::kCreated) {
            created.push_back(block);
            if (block_runs.empty() || block_runs.back().back()->index + 1 != index ||
                block_runs.back().size() == longest_run) {
              block_runs.emplace_back();
            }
            block_runs.back().push_back(std::move(block));
          }
          for (; next < missing.size() && missing[next].offset < offset + block_size_; ++next) {
            cached.push_back(CachedPiece{pin, missing[next].offset, missing[next].length, missing[next].dst});
          }
        }
        exact.insert(exact.end(), missing.begin() + static_cast<std::ptrdiff_t>(next), missing.end());
        missing = std::move(exact);
        requests = PlanRequests(missing, block_size_);
        JoinSpans(missing, span_blocks, block_size_, &requests);
      }
      auto batch = std::make_shared<Batch>();
      batch->count = block_runs.size() + requests.size();
      batch->fetch = [this, &missing, &requests, &block_runs, deadline](size_t i) {
        run_fetches_.fetch_add(1, std::memory_order_relaxed);
        // FetchBlocks completes its blocks (ready or failed) whatever happens.
        if (i < block_runs.size()) return FetchBlocks(block_runs[i], deadline);
        const Request& request = requests[i - block_runs.size()];
        if (before_fetch_) before_fetch_(request.offset, request.length);
        in_flight_.fetch_add(1, std::memory_order_relaxed);
        Status fetched = FetchRequest(*fetcher_, *cache_, missing, request, &cancel_, deadline);
        in_flight_.fetch_sub(1, std::memory_order_relaxed);
        return fetched;
      };
      if (batch->count != 0) status = RunBatch(run_helpers_, run_helpers_.threads(), batch);
    }
    for (size_t i = 0; i < cached.size() && status.ok(); ++i) {
      const CachedPiece& piece = cached[i];
      const CachedBlock& block = *pinned[piece.pin];
      if (i == 0 || piece.pin != cached[i - 1].pin) {
        status = cache_->Wait(pinned[piece.pin], deadline, &cancel_);
        if (!status.ok()) break;
      }
      std::memcpy(piece.dst, block.data.get() + (piece.offset - block.offset), piece.length);
    }
  } catch (const std::exception& e) {
    status = Status::IOError(fetcher_->describe() + ": read failed: " + e.what());
  }
  if (cancel_.load() && !status.ok()) status = ShutDownError();
  // No other reader may wait for ever on a block this read created and
  // abandoned (a request skipped after a failure, an exception): a no-op for
  // blocks already completed.
  for (const auto& block : created) {
    cache_->Complete(block, status.ok() ? Status::IOError(fetcher_->describe() + ": read abandoned") : status);
  }
  for (const auto& block : pinned) cache_->Release(block);
  if (!status.ok()) {
    read_errors_.fetch_add(1, std::memory_order_relaxed);
    return status;
  }
  bytes_read_.fetch_add(asked, std::memory_order_relaxed);
  return Status::OK();
}

}  // namespace stfs
