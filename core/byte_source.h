// ByteSource: the one narrow interface every reader of safetensors bytes uses.
//
// A source is an immutable run of bytes (a local file, a remote object, a
// file inside an stfs mount). Implementations must be safe for concurrent use:
// many threads call ReadAt at once without external locking. A source never
// mmaps a local file: a file truncated under a mapping kills the process with
// SIGBUS, whereas pread returns a short count we can turn into an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "core/status.h"

namespace stfs {

// What the reader knows about a read, so that a source can fetch well.
struct ReadHint {
  uint64_t stream = 0;          // the open file reading (0: unknown); read-ahead is tracked per stream
  uint64_t fence = UINT64_MAX;  // source offset the file's bytes end at: never read ahead past it
  uint64_t start = 0;           // source offset the file's bytes begin at: bytes before are not its own
};

// One piece of a gathered read: `length` source bytes at `offset` into `dst`.
struct ByteRun {
  uint64_t offset;
  size_t length;
  char* dst;
};

class ByteSource {
 public:
  ByteSource() = default;
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;
  virtual ~ByteSource() = default;

  // Reads up to `length` bytes at `offset` into `dst`; returns how many were
  // read. Fewer than `length` only when the range crosses Size(); 0 at or past
  // the end. Safe for concurrent use.
  virtual StatusOr<size_t> ReadAt(uint64_t offset, size_t length, char* dst) const = 0;

  // Reads every run exactly (each must lie within Size(), else an error naming
  // the source), in any order, possibly in parallel. A source that can fetch
  // several runs in one request or at once (a remote one) does so; on an
  // error some dst bytes may have been written, but the caller gets the
  // Status. Default: ReadExactly of each in turn.
  virtual Status ReadRuns(std::span<const ByteRun> runs, const ReadHint& hint) const;

  // Total size in bytes, fixed for the life of the source.
  virtual uint64_t Size() const = 0;

  // Names the source in messages: a path or a URL with credentials removed.
  virtual const std::string& Describe() const = 0;

  // Modification time of the source (file mtime, HTTP Last-Modified), or 0.
  virtual timespec ModificationTime() const { return timespec{0, 0}; }

  // A file descriptor whose bytes at the same offsets are this source's, for
  // callers that can hand an fd to the kernel (splice); -1 when there is none.
  virtual int FileDescriptor() const { return -1; }

  // Statistics as one JSON object and a newline (cache hits, bytes fetched),
  // or an empty string when the source keeps none.
  virtual std::string StatsJson() const { return std::string(); }

  // Makes every ReadAt in flight or to come fail promptly (within about a
  // second) with an IOError, e.g. while the mount is torn down. Idempotent;
  // safe from any thread (not from a signal handler).
  virtual void Shutdown() {}
};

// Reads exactly `length` bytes at `offset`, failing with Corruption/IOError
// naming the source when fewer are available.
Status ReadExactly(const ByteSource& source, uint64_t offset, size_t length, char* dst);
// The same with what the reader knows: ReadRuns of one run.
Status ReadExactly(const ByteSource& source, uint64_t offset, size_t length, char* dst, const ReadHint& hint);

// An IOError naming the source unless [offset, +length) lies within its Size().
Status CheckRunInside(const ByteSource& source, uint64_t offset, size_t length);

// Opens a local file for positional reads (pread, never mmap).
StatusOr<std::unique_ptr<ByteSource>> OpenLocalFile(const std::string& path);

}  // namespace stfs
