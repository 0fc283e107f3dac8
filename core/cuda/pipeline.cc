// The staging pipeline (see pipeline.h).
#include "core/cuda/pipeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

namespace stfs::gpu {
namespace {

// Reads StagedReads into a staging buffer: through the ByteSource, or with
// pread on an O_DIRECT descriptor of the same file.
class FillReader {
 public:
  FillReader(const ByteSource& source, int direct_fd, std::string path)
      : source_(source), direct_fd_(direct_fd), path_(std::move(path)) {}
  ~FillReader() {
    if (direct_fd_ >= 0) ::close(direct_fd_);
  }
  FillReader(const FillReader&) = delete;
  FillReader& operator=(const FillReader&) = delete;

  Status Read(const StagedRead& read, char* staging) const {
    char* dst = staging + read.staging_offset;
    if (direct_fd_ < 0) return ReadExactly(source_, read.file_offset, read.length, dst);
    uint64_t done = 0;
    while (done < read.length) {
      ssize_t n = ::pread(direct_fd_, dst + done, read.length - done,
                          static_cast<off_t>(read.file_offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return StatusFromErrno(errno, path_ + ": direct read at byte " +
                                          std::to_string(read.file_offset + done));
      }
      if (n == 0) break;  // end of file: fine once the required bytes are in
      done += static_cast<uint64_t>(n);
      if (done % kDirectIoAlignment != 0) break;  // short tail block at end of file
    }
    if (done < read.required) {
      return Status::IOError(path_ + ": unexpected end of data at byte " +
                             std::to_string(read.file_offset + done) + " (needed " +
                             std::to_string(read.required) + " bytes at " +
                             std::to_string(read.file_offset) + ")");
    }
    return Status::OK();
  }

 private:
  const ByteSource& source_;
  const int direct_fd_;
  const std::string path_;
};

StatusOr<std::unique_ptr<FillReader>> OpenFillReader(const TensorSource& source, bool direct_io) {
  if (!direct_io) return std::make_unique<FillReader>(source.bytes(), -1, source.Describe());
  if (source.local_path().empty()) {
    return Status::NotSupported(source.Describe() + ": direct I/O needs a local file");
  }
  int fd = ::open(source.local_path().c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (fd < 0) {
    if (errno == EINVAL) {
      return Status::NotSupported(source.local_path() +
                                  ": the filesystem refuses O_DIRECT (tmpfs does); load without "
                                  "direct I/O");
    }
    return StatusFromErrno(errno, source.local_path() + ": open with O_DIRECT");
  }
  return std::make_unique<FillReader>(source.bytes(), fd, source.local_path());
}

}  // namespace

StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(CopyEngine* engine, const LoaderOptions& options) {
  if (options.staging_buffer_count < 1 || options.staging_buffer_count > 1024) {
    return Status::InvalidArgument("staging buffer count " + std::to_string(options.staging_buffer_count) +
                                   " is outside 1..1024");
  }
  if (options.reader_threads < 0) {
    return Status::InvalidArgument("reader thread count must not be negative");
  }
  FillLimits limits;
  limits.capacity = options.staging_buffer_bytes;
  limits.alignment = options.direct_io ? kDirectIoAlignment : 1;
  RETURN_IF_ERROR(ValidateFillLimits(limits));

  std::unique_ptr<Pipeline> pipeline(new Pipeline(engine, options));
  int threads = options.reader_threads;
  if (threads == 0) {
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::min({options.staging_buffer_count, hw, 8});
  }
  pipeline->threads_ = std::clamp(threads, 1, options.staging_buffer_count);
  RETURN_IF_ERROR(engine->SetLanes(options.staging_buffer_count));
  for (int i = 0; i < options.staging_buffer_count; ++i) {
    ASSIGN_OR_RETURN(char* buffer, engine->AllocateStaging(options.staging_buffer_bytes));
    pipeline->staging_.push_back(buffer);  // freed by ~Pipeline on any later failure
  }
  return pipeline;
}

Pipeline::~Pipeline() {
  // No copy may still read a buffer we are about to free -- nor write the
  // caller's destination after the loader is gone -- even when waiting for
  // a lane's event fails (it did, under injected faults, and the freed
  // buffers' allocator words were copied out).
  engine_->Drain();
  for (char* buffer : staging_) engine_->FreeStaging(buffer);
}

Status Pipeline::Run(const TensorSource& source, SegmentStream* segments, void* stream, LoadStats* stats) {
  ASSIGN_OR_RETURN(std::unique_ptr<FillReader> reader, OpenFillReader(source, options_.direct_io));
  FillLimits limits;
  limits.capacity = options_.staging_buffer_bytes;
  limits.alignment = options_.direct_io ? kDirectIoAlignment : 1;
  limits.max_gap = options_.max_read_gap_bytes;
  FillPlanner planner(segments, limits);

  RETURN_IF_ERROR(engine_->Begin(stream));

  std::mutex mu;  // guards planner, free_lanes, first_error, *stats
  std::deque<int> free_lanes;
  for (int lane = 0; lane < static_cast<int>(staging_.size()); ++lane) free_lanes.push_back(lane);
  Status first_error;
  bool planner_done = false;

  // Each worker holds at most one lane at a time; lanes >= workers, so a
  // free lane always exists when a worker asks for one.
  std::vector<std::thread> helpers;
  std::function<void(bool)> work = [&](bool caller) {
    StagingFill fill;
    while (true) {
      int lane;
      bool spawn = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error.ok() || planner_done) return;
        if (!planner.Next(&fill)) {
          planner_done = true;
          return;
        }
        lane = free_lanes.front();
        free_lanes.pop_front();
        // Helpers start only once a second fill exists: a small load
        // costs no thread creation.
        spawn = caller && helpers.empty() && threads_ > 1 && planner.HasMore();
      }
      if (spawn) {
        caller = false;
        try {
          for (int i = 1; i < threads_; ++i) helpers.emplace_back(work, false);
        } catch (const std::system_error&) {
          // No more threads to be had: the ones running finish the load.
        }
      }
      char* buffer = staging_[static_cast<size_t>(lane)];
      Status s = engine_->WaitLane(lane);
      for (size_t i = 0; s.ok() && i < fill.reads.size(); ++i) s = reader->Read(fill.reads[i], buffer);
      if (s.ok()) s = engine_->Enqueue(lane, buffer, fill.copies.data(), fill.copies.size());
      std::lock_guard<std::mutex> lock(mu);
      free_lanes.push_back(lane);
      if (!s.ok()) {
        if (first_error.ok()) first_error = s;
        return;
      }
      stats->fills += 1;
      stats->reads += fill.reads.size();
      stats->bytes_read += fill.ReadBytes();
      stats->copies += fill.copies.size();
      for (const StagedCopy& c : fill.copies) {
        if (c.height > 1) ++stats->copies_2d;
        stats->bytes_copied += c.bytes();
      }
    }
  };

  work(true);
  for (std::thread& t : helpers) t.join();

  // After an error, wait for every copy already queued (the caller's
  // destination must not change after the call returned, and the staging
  // buffers must be free for the next load) before reporting it.
  const bool drain = options_.synchronize || !first_error.ok();
  Status finished = engine_->Finish(stream, drain);
  if (!finished.ok() && !drain) (void)engine_->Finish(stream, /*synchronize=*/true);  // errors drain too
  return first_error.ok() ? finished : first_error;
}

}  // namespace stfs::gpu
