// HttpRangeSource and OpenRemoteSource (see http_range_source.h).
#include "core/remote/http_range_source.h"

#include <strings.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include "core/header.h"
#include "core/remote/remote_location.h"
#include "core/remote/s3_source.h"

namespace stfs {
namespace {

// Reads out of sequence at least this long fetch exactly their own bytes.
constexpr uint64_t kExactReadMin = 128 << 10;

// Returns 8 + N when the first 8 bytes of `prefix` hold a plausible header
// size for an object of `size` bytes, else 0.
uint64_t HeaderEnd(const std::string& prefix, uint64_t size) {
  if (prefix.size() < 8) return 0;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(prefix[i]);
  if (n > kMaxHeaderSize || 8 + n > size) return 0;
  return 8 + n;
}

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out->append(buf);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

}  // namespace

HttpRangeSource::HttpRangeSource(std::unique_ptr<RangeFetcher> fetcher, std::string prefix,
                                 const RemoteOptions& options, std::shared_ptr<BlockCache> cache)
    : fetcher_(std::move(fetcher)),
      prefix_(std::move(prefix)),
      size_(fetcher_->identity().size),
      header_end_(HeaderEnd(prefix_, size_)),
      block_size_(options.block_size),
      readahead_max_(std::min(options.readahead, cache->budget() / 2)),
      connections_(std::max(1, options.connections)),
      request_cost_(options.request_cost),
      cache_(std::move(cache)),
      owner_(cache_->NewOwner()),
      before_fetch_(options.before_fetch_for_tests),
      pattern_(options.block_size),
      run_helpers_(std::max(1, options.connections) - 1) {
  if (header_end_ != 0 && header_end_ <= prefix_.size()) {
    LearnTensorEnds(std::string_view(prefix_).substr(8, header_end_ - 8));
  }
}

HttpRangeSource::~HttpRangeSource() {
  Shutdown();
  run_helpers_.Stop();
  for (std::thread& t : workers_) t.join();
  cache_->DropOwner(owner_);
}

void HttpRangeSource::LearnTensorEnds(std::string_view header_json) const {
  StatusOr<Header> header = ParseHeaderJson(header_json, size_, fetcher_->describe());
  if (!header.ok()) return;  // ReadHeader reports it; read-ahead just runs unfenced
  std::vector<uint64_t> ends;
  ends.reserve(header->tensors.size());
  for (const TensorInfo& t : header->tensors) ends.push_back(header->data_start() + t.end);
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  std::lock_guard<std::mutex> lock(fence_mu_);
  tensor_ends_ = std::move(ends);
}

uint64_t HttpRangeSource::TensorEndAfter(uint64_t pos) const {
  std::lock_guard<std::mutex> lock(fence_mu_);
  auto it = std::upper_bound(tensor_ends_.begin(), tensor_ends_.end(), pos);
  return it == tensor_ends_.end() ? size_ : std::min(*it, size_);
}

Status HttpRangeSource::ShutDownError() const {
  return Status::IOError(fetcher_->describe() + ": source shut down");
}

void HttpRangeSource::Shutdown() {
  cancel_.store(true);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  cache_->WakeWaiters();
}

StatusOr<size_t> HttpRangeSource::ReadAt(uint64_t offset, size_t length, char* dst) const {
  if (offset >= size_ || length == 0) return size_t{0};
  length = static_cast<size_t>(std::min<uint64_t>(length, size_ - offset));
  RETURN_IF_ERROR(Read(offset, length, dst, nullptr, ReadHint{}));
  return length;
}

StatusOr<PinnedBytes> HttpRangeSource::ReadPinned(uint64_t offset, size_t length,
                                                  const ReadHint& hint) const {
  PinnedBytes bytes;
  if (offset >= size_ || length == 0) return bytes;
  length = static_cast<size_t>(std::min<uint64_t>(length, size_ - offset));
  if (offset < std::max<uint64_t>(prefix_.size(), header_end_)) {
    // Header bytes are never in cache blocks: copy them.
    char* buffer = bytes.OwnBuffer(length);
    RETURN_IF_ERROR(Read(offset, length, buffer, nullptr, hint));
    bytes.Add(buffer, length);
    return bytes;
  }
  RETURN_IF_ERROR(Read(offset, length, nullptr, &bytes, hint));
  return bytes;
}

Status HttpRangeSource::Read(uint64_t offset, size_t length, char* dst, PinnedBytes* pinned,
                             const ReadHint& hint) const {
  if (cancel_.load()) return ShutDownError();
  reads_.fetch_add(1, std::memory_order_relaxed);
  const Deadline deadline = fetcher_->DeadlineFromNow();
  const uint64_t end = offset + length;
  Status status;
  if (end <= prefix_.size()) {
    std::memcpy(dst, prefix_.data() + offset, length);
    prefix_reads_.fetch_add(1, std::memory_order_relaxed);
  } else if (offset < prefix_.size() && end <= header_end_) {
    // The rest of a header larger than the first request: fetched exactly,
    // once (ReadHeader reads it once), without filling the cache.
    size_t head = static_cast<size_t>(prefix_.size() - offset);
    std::memcpy(dst, prefix_.data() + offset, head);
    status = fetcher_->Fetch(prefix_.size(), length - head, {{dst + head, length - head}},
                             &cancel_, deadline);
    if (status.ok() && offset == 8 && end == header_end_) {
      LearnTensorEnds(std::string_view(dst, length));
    }
  } else {
    status = ReadThroughCache(offset, length, dst, pinned, hint, deadline);
  }
  if (!status.ok()) {
    read_errors_.fetch_add(1, std::memory_order_relaxed);
    return status;
  }
  bytes_read_.fetch_add(length, std::memory_order_relaxed);
  return Status::OK();
}

Status HttpRangeSource::ReadThroughCache(uint64_t offset, size_t length, char* dst,
                                         PinnedBytes* pinned, const ReadHint& hint,
                                         Deadline deadline) const {
  const uint64_t end = offset + length;
  const uint64_t first = offset / block_size_;
  const uint64_t last = (end - 1) / block_size_;
  // Each block the read touches: a pinned cache block (created by this read
  // or not), or none when the cache had no room; then the read's own bytes
  // of it are fetched straight into `dst`.
  struct Touched {
    std::shared_ptr<CachedBlock> block;
    bool mine = false;  // created here: this read must fetch and complete it
    uint64_t from = 0;  // the read's bytes of the block: [from, to)
    uint64_t to = 0;
  };
  std::vector<Touched> touched;
  Status status;
  try {
    const ReadPatternTracker::Position position = pattern_.Record(offset, length, hint.stream);
    const bool sequential = position.reads_before >= 2;
    // A large read that starts no stream of a block's worth yet fetches only
    // its own bytes of the blocks not cached: whole blocks around a random
    // read would multiply the bytes fetched by up to block_size / length, and
    // nothing suggests the rest is wanted. A scan switches to blocks (and
    // read-ahead) once it has read a block. Small reads still fetch blocks,
    // which the next small reads reuse. "Large" is a whole FUSE request (the
    // kernel splits a 1 MiB pread into 128-512 KiB requests, in sequence).
    // A stream's small tail (the last pages of an unaligned pread) goes with it.
    const uint64_t large_read = std::min<uint64_t>(block_size_ / 4, kExactReadMin);
    const bool large = length >= large_read;
    // A small read that jumps or skips ahead within its stream is most often
    // the kernel filling holes in a file it has cached: it asks only for the
    // pages it lacks (a few KiB, where memory reclaim took single pages), and
    // a whole block for each would fetch up to block_size / length times the
    // bytes. Its reads arrive out of order too (FUSE threads), so once the
    // stream is sparse every small read of it counts. (A scan's reads out of
    // order are large; small sequential reads neither skip nor leave gaps.)
    const bool hole = !large && (position.jumped || position.skipped || position.sparse);
    const bool exact = hole || (position.bytes_before < block_size_ &&
                                position.bytes_before + length >= large_read);
    touched.reserve(last - first + 1);
    for (uint64_t index = first; index <= last; ++index) {
      uint64_t block_offset = index * block_size_;
      size_t block_length = static_cast<size_t>(std::min(block_size_, size_ - block_offset));
      Touched t;
      t.from = std::max(offset, block_offset);
      t.to = std::min(end, block_offset + block_length);
      // A block reaching outside the file's bytes is not fetched whole: only
      // the read's bytes of it (a 16 KiB tensor would fetch a 4 MiB block).
      const bool outside_file = !BlockInsideFile(block_offset, block_length, hint);
      // A stream that reaches a block it has not cached in the block's middle
      // has read (or skipped, at its start) the bytes before: fetching the
      // block whole would fetch those again. Its reads take their own bytes
      // until the next block edge, where whole blocks start (a part that
      // begins mid-block: 1.17x fetched with 4 MiB blocks, else).
      const bool stream_mid_block = position.reads_before >= 1 && index == first &&
                                    offset > block_offset && large;
      BlockCache::Found found;
      t.block = exact || outside_file || stream_mid_block
                    ? cache_->FindExisting(owner_, index, &found)
                    : cache_->Acquire(owner_, index, block_offset, block_length,
                                      /*prefetch=*/false, &found);
      t.mine = found == BlockCache::Found::kCreated;
      if (found == BlockCache::Found::kNoRoom) no_room_.fetch_add(1, std::memory_order_relaxed);
      if (found == BlockCache::Found::kReady) {
        hits_.fetch_add(1, std::memory_order_relaxed);
      } else if (found == BlockCache::Found::kLoading) {
        waits_.fetch_add(1, std::memory_order_relaxed);
      } else {
        misses_.fetch_add(1, std::memory_order_relaxed);
      }
      touched.push_back(std::move(t));
    }
    ScheduleReadahead(position, offset, length, last, hint.fence);
    // A pinned read lends the blocks; bytes fetched past the cache need a
    // buffer of its own, and then the whole read is copied into that.
    if (pinned != nullptr &&
        std::any_of(touched.begin(), touched.end(), [](const Touched& t) { return !t.block; })) {
      dst = pinned->OwnBuffer(length);
      pinned->Add(dst, length);
      pinned = nullptr;
    }

    // Fetch what this read created (one request per run of consecutive
    // blocks) and what had no room (one request per run, into dst).
    for (size_t i = 0; i < touched.size() && status.ok();) {
      const bool direct = !touched[i].block;
      if (!direct && !touched[i].mine) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j + 1 < touched.size() && !touched[j + 1].block == direct &&
             (direct || touched[j + 1].mine)) {
        ++j;
      }
      if (direct) {
        uint64_t from = touched[i].from;
        uint64_t count = touched[j].to - from;
        direct_reads_.fetch_add(1, std::memory_order_relaxed);
        status = fetcher_->Fetch(from, count, {{dst + (from - offset), count}}, &cancel_, deadline);
      } else {
        std::vector<std::shared_ptr<CachedBlock>> run;
        for (size_t k = i; k <= j; ++k) run.push_back(touched[k].block);
        status = FetchBlocks(run, deadline);
      }
      i = j + 1;
    }

    for (size_t i = 0; i < touched.size() && status.ok(); ++i) {
      const Touched& t = touched[i];
      if (!t.block) continue;
      status = cache_->Wait(t.block, deadline, &cancel_);
      if (!status.ok()) break;
      const CachedBlock& block = *t.block;
      const char* bytes = block.data.get() + (t.from - block.offset);
      if (pinned != nullptr) {
        pinned->Add(bytes, t.to - t.from);
      } else {
        std::memcpy(dst + (t.from - offset), bytes, t.to - t.from);
      }
      // Past the end of a block, a sequential reader is done with the block
      // before it (one block of lag: FUSE threads deliver a scan's reads a
      // little out of order, and a straggler must not find its block gone).
      if (sequential && t.to == block.offset + block.length && block.index > 0) {
        cache_->MarkConsumed(owner_, block.index - 1);
      }
    }
  } catch (const std::exception& e) {
    status = Status::IOError(fetcher_->describe() + ": read failed: " + e.what());
  }
  if (cancel_.load() && !status.ok()) status = ShutDownError();
  // Whatever happened above, every block this read created is completed (a
  // no-op when it already was) and every pin released: no other reader may
  // wait for ever on a block this read abandoned.
  std::vector<std::shared_ptr<CachedBlock>> lent;
  for (const Touched& t : touched) {
    if (!t.block) continue;
    if (t.mine) {
      cache_->Complete(t.block, status.ok() ? Status::IOError(fetcher_->describe() +
                                                              ": read abandoned")
                                            : status);
    }
    if (pinned != nullptr && status.ok()) {
      lent.push_back(t.block);  // released when the caller drops `pinned`
    } else {
      cache_->Release(t.block);
    }
  }
  if (!lent.empty()) {
    pinned->SetRelease([cache = cache_, lent = std::move(lent)] {
      for (const auto& block : lent) cache->Release(block);
    });
  }
  return status;
}

Status HttpRangeSource::FetchBlocks(const std::vector<std::shared_ptr<CachedBlock>>& run,
                                    Deadline deadline) const {
  Status status;
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  try {
    std::vector<BodySegment> segments;
    uint64_t total = 0;
    for (const auto& block : run) {
      block->data = cache_->TakeBuffer(block->length);
      if (!block->data) {
        status = Status::ResourceExhausted(fetcher_->describe() + ": out of memory for a " +
                                           std::to_string(block->length) + "-byte block");
        break;
      }
      segments.push_back({block->data.get(), block->length});
      total += block->length;
    }
    if (status.ok() && before_fetch_) before_fetch_(run.front()->offset, total);
    if (status.ok()) status = fetcher_->Fetch(run.front()->offset, total, segments, &cancel_, deadline);
  } catch (const std::exception& e) {
    status = Status::IOError(fetcher_->describe() + ": fetch failed: " + e.what());
  }
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  for (const auto& block : run) cache_->Complete(block, status);
  return status;
}

void HttpRangeSource::ScheduleReadahead(const ReadPatternTracker::Position& position,
                                        uint64_t offset, size_t length, uint64_t last_block,
                                        uint64_t fence) const {
  const bool sequential = position.reads_before >= 2;
  if (readahead_max_ < block_size_) return;
  // Only a stream that has read two blocks' worth earns read-ahead: short
  // reads (dd count=8, a header, a small tensor) fetch about what they read,
  // and the kernel's own read-ahead already covers their next request.
  if (!sequential || position.bytes_before < 2 * block_size_) return;
  // A stream that reads a fraction of what it passes (holes in a cached
  // file) would fetch mostly bytes its reader already has.
  if (position.sparse) return;
  // The window grows with the stream (as far ahead as it has read), so a
  // short sequential read (dd count=8) fetches little beyond itself.
  uint64_t end = offset + length;
  uint64_t window =
      std::clamp<uint64_t>((position.bytes_before + length) / 2, block_size_, readahead_max_);
  uint64_t limit = std::min({TensorEndAfter(end - 1), fence, end + window});
  uint64_t from = last_block + 1;
  if (limit <= from * block_size_) return;
  uint64_t to = (limit - 1) / block_size_;
  // Only blocks that end at or before the fence (the object's last block
  // ends at its end, within any fence).
  if (fence < size_) {
    if (fence / block_size_ <= from) return;
    to = std::min(to, fence / block_size_ - 1);
  }
  std::vector<std::shared_ptr<CachedBlock>> created;
  const Deadline deadline = fetcher_->DeadlineFromNow();
  for (uint64_t index = from; index <= to; ++index) {
    uint64_t block_offset = index * block_size_;
    size_t block_length = static_cast<size_t>(std::min(block_size_, size_ - block_offset));
    BlockCache::Found found;
    auto block =
        cache_->Acquire(owner_, index, block_offset, block_length, /*prefetch=*/true, &found);
    if (found == BlockCache::Found::kNoRoom) break;
    if (found == BlockCache::Found::kCreated) created.push_back(std::move(block));
  }
  if (created.empty()) return;
  readahead_blocks_.fetch_add(created.size(), std::memory_order_relaxed);
  std::call_once(workers_started_, [this] { StartWorkers(); });
  if (workers_.empty()) {
    // No thread could be started: nobody would complete these blocks.
    for (auto& block : created) {
      cache_->Complete(block, Status::ResourceExhausted(fetcher_->describe() +
                                                        ": cannot start read-ahead threads"));
    }
    return;
  }
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (!stopping_) {
      for (auto& block : created) queue_.push_back({std::move(block), deadline});
      created.clear();
    }
  }
  queue_cv_.notify_all();
  // Shut down meanwhile: the workers may be gone, so nobody else would.
  for (auto& block : created) cache_->Complete(block, ShutDownError());
  return;
}

void HttpRangeSource::StartWorkers() const {
  try {
    for (int i = 0; i < connections_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  } catch (const std::exception&) {
    // Fewer workers (or none) than asked: the threads that started serve the queue.
  }
}

void HttpRangeSource::WorkerLoop() const {
  for (;;) {
    Queued item;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    if (cancel_.load()) {
      cache_->Complete(item.block, ShutDownError());
      continue;
    }
    (void)FetchBlocks({item.block}, item.deadline);  // errors reach readers through the block
  }
}

std::string HttpRangeSource::StatsJson() const {
  BlockCacheStats cache = cache_->Stats();
  const FetchCounters& f = fetcher_->counters();
  auto field = [](std::string* out, const char* name, uint64_t value) {
    *out += ",\"";
    *out += name;
    *out += "\":";
    *out += std::to_string(value);
  };
  std::string out = "{\"type\":\"http\",\"url\":";
  AppendJsonString(&out, fetcher_->describe());
  field(&out, "size", size_);
  field(&out, "block_size", block_size_);
  field(&out, "cache_size", cache.budget);
  field(&out, "cache_bytes", cache.bytes);
  field(&out, "cache_blocks", cache.blocks);
  field(&out, "cache_spare_bytes", cache.spare_bytes);
  field(&out, "cache_other_bytes", cache.other_bytes);
  field(&out, "readahead_max", readahead_max_);
  field(&out, "reads", reads_.load());
  field(&out, "bytes_read", bytes_read_.load());
  field(&out, "prefix_reads", prefix_reads_.load());
  field(&out, "hits", hits_.load());
  field(&out, "waits", waits_.load());
  field(&out, "misses", misses_.load());
  field(&out, "readahead_blocks", readahead_blocks_.load());
  field(&out, "readahead_unused", cache.prefetch_unused);
  field(&out, "direct_reads", direct_reads_.load());
  field(&out, "run_fetches", run_fetches_.load());
  field(&out, "no_room", no_room_.load());
  field(&out, "evictions", cache.evictions);
  field(&out, "recycled", cache.recycled);
  field(&out, "requests", f.requests.load());
  field(&out, "bytes_fetched", f.bytes_fetched.load());
  field(&out, "retries", f.retries.load());
  field(&out, "failures", f.failures.load());
  field(&out, "resolves", f.resolves.load());
  field(&out, "read_errors", read_errors_.load());
  field(&out, "in_flight", static_cast<uint64_t>(std::max(0, in_flight_.load())));
  out += ",\"stale\":";
  out += fetcher_->stale() ? "true" : "false";
  out += ",\"etag\":";
  AppendJsonString(&out, fetcher_->identity().etag);
  out += ",\"pinned_by\":";
  AppendJsonString(&out, fetcher_->identity().pinned_by());
  out += "}\n";
  return out;
}

StatusOr<std::unique_ptr<ByteSource>> OpenRemoteSource(const std::string& location,
                                                       const RemoteOptions& options) {
  if (!IsRemoteLocation(location)) {
    return Status::InvalidArgument(RedactUrl(location) +
                                   ": not an http://, https://, hf:// or s3:// location");
  }
  std::shared_ptr<BlockCache> cache =
      options.cache ? options.cache : MakeBlockCache(options.cache_size);
  if (options.block_size == 0 || cache->budget() < 2 * options.block_size) {
    return Status::InvalidArgument("cache_size (" + std::to_string(cache->budget()) +
                                   " bytes) must hold at least two blocks of "
                                   "block_size (" +
                                   std::to_string(options.block_size) + " bytes)");
  }
  HttpSettings settings = HttpSettingsFor(options);
  // Each curl handle's receive buffer counts in the cache budget.
  settings.account_memory = [cache](int64_t bytes) { cache->Account(bytes); };

  std::string url = location;
  std::string describe = RedactUrl(location);
  HttpSettings unsigned_settings;           // s3: to sign again for another region
  std::function<bool()> s3_region_moved;
  if (strncasecmp(location.c_str(), "hf://", 5) == 0) {
    ASSIGN_OR_RETURN(HubLocation hub, ParseHubLocation(location));
    url = HubResolveUrl(hub, options.hub_endpoint);
    bool has_authorization = false;
    for (const std::string& h : options.headers) {
      if (h.size() >= 14 && strncasecmp(h.c_str(), "Authorization:", 14) == 0)
        has_authorization = true;
    }
    if (!options.hub_token.empty() && !has_authorization) {
      settings.extra_headers.push_back("Authorization: Bearer " + options.hub_token);
    }
  } else if (IsS3Location(location)) {
    unsigned_settings = settings;
    ASSIGN_OR_RETURN(S3ObjectRequest s3, PrepareS3Object(location, options, &settings));
    url = std::move(s3.url);
    describe = std::move(s3.describe);
    s3_region_moved = std::move(s3.region_moved);
  }
  RetryPolicy retry{options.retries, options.retry_delay, options.retry_max_delay,
                    options.timeout};
  auto fetcher = std::make_unique<RangeFetcher>(url, describe, std::move(settings), retry,
                                                options.max_redirects);
  StatusOr<std::string> probed = fetcher->Probe(kProbeBytes, nullptr);
  if (!probed.ok() && s3_region_moved && s3_region_moved()) {
    // S3 named the bucket's region (301 / 400): sign for it, once (s3_source.h).
    ASSIGN_OR_RETURN(S3ObjectRequest s3, PrepareS3Object(location, options, &unsigned_settings));
    fetcher = std::make_unique<RangeFetcher>(s3.url, describe, std::move(unsigned_settings), retry,
                                             options.max_redirects);
    probed = fetcher->Probe(kProbeBytes, nullptr);
  }
  if (!probed.ok()) return probed.status();
  std::string prefix = std::move(*probed);
  const ObjectIdentity& id = fetcher->identity();
  if (id.etag.empty()) {
    std::fprintf(stderr,
                 "stfs: %s: the server sends no ETag; a replaced object is detected by %s\n",
                 describe.c_str(),
                 id.last_modified.empty() ? "its size only" : "Last-Modified (and size)");
  }
  std::unique_ptr<ByteSource> source =
      std::make_unique<HttpRangeSource>(std::move(fetcher), std::move(prefix), options, cache);
  return source;
}

}  // namespace stfs
