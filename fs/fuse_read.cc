// The FUSE read path: how a `data` read is answered, cheapest first.
//   1. splice: source fd -> per-thread pipe -> /dev/fuse, no copy through
//      user space (local sources with an fd, ReadReply::kSplice);
//   2. lent memory: a remote source's cache blocks, pinned while
//      fuse_reply_iov writes them (one copy fewer than a buffer);
//   3. pread into a per-thread buffer and reply with it.
// Errors are logged with the inode and offset and answered as errno; a
// source that shrank since mounting reads as EIO, never as end of file.
#include "fs/fuse_internal.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fs/splice_pipe.h"

namespace stfs::fuse_internal {
namespace {

void LogReadError(fuse_ino_t ino, off_t off, const std::string& what) {
  std::fprintf(stderr, "stfs: read of inode %llu at %lld failed: %s\n", static_cast<unsigned long long>(ino),
               static_cast<long long>(off), what.c_str());
}

// Answers a `data` read by splicing; returns false (nothing replied) when
// this read cannot be spliced and should take the pread path.
bool TrySpliceReply(fuse_req_t req, const Context& ctx, fuse_ino_t ino, size_t size, off_t off) {
  StatusOr<SourceWindow> window = ctx.fs->DataWindow(ino, static_cast<uint64_t>(off), size);
  if (!window.ok() || window->fd < 0) return false;  // not a data file, or no fd (remote)
  if (window->length == 0) {
    fuse_reply_buf(req, nullptr, 0);
    return true;
  }
  // Splicing source -> our pipe ourselves catches a short count (the source
  // shrank) as EIO; handing libfuse the source fd would turn it into a short
  // reply, which the kernel takes as end of file.
  thread_local SplicePipe pipe;
  if (pipe.capacity() < window->length) return false;
  if (!pipe.Fill(window->fd, window->offset, window->length)) {
    int err = errno;
    pipe.Reset();
    ctx.fs->CountReadError();
    LogReadError(ino, off, window->source->Describe() + ": " + std::strerror(err) +
                               (err == EIO ? " (source shorter than when mounted?)" : ""));
    fuse_reply_err(req, EIO);
    return true;
  }
  fuse_bufvec buf = FUSE_BUFVEC_INIT(window->length);
  buf.buf[0].flags = FUSE_BUF_IS_FD;
  buf.buf[0].fd = pipe.read_end();
  // Counted before the reply: once it is written the reader may read
  // __stats__ and must find its bytes there. (A reply the kernel refuses,
  // e.g. an interrupted reader, is then counted as served.)
  ctx.fs->CountRead(window->length);
  if (fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE) != 0) {
    pipe.Reset();  // the reply may have left bytes behind
  }
  return true;
}

// Answers a `data` read with the source's own memory (a remote source's
// cache blocks, pinned until the reply is written): one copy fewer than
// copying into a reply buffer. Returns false (nothing replied) when the
// source does not lend memory or this is not a data file.
bool TryLentReply(fuse_req_t req, const Context& ctx, const FileHandle& file, size_t size, off_t off) {
  const fuse_ino_t ino = file.ino;
  StatusOr<PinnedBytes> lent = ctx.fs->LendData(file, static_cast<uint64_t>(off), size);
  if (!lent.ok()) {
    const StatusCode code = lent.status().code();
    if (code == StatusCode::kNotSupported || code == StatusCode::kInvalidArgument) return false;
    LogReadError(ino, off, lent.status().message());
    ReplyStatus(req, lent.status());
    return true;
  }
  thread_local std::vector<iovec> iov;
  iov.clear();
  for (const PinnedSpan& span : lent->spans()) iov.push_back({const_cast<char*>(span.data), span.length});
  if (iov.empty()) {
    fuse_reply_buf(req, nullptr, 0);
  } else {
    fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
  }
  return true;  // `lent` unpins the blocks now that the reply is written
}

}  // namespace

void OnRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  Guarded(req, [&] {
    Context& ctx = Ctx(req);
    if (off < 0) return (void)fuse_reply_err(req, EINVAL);
    const auto* handle = reinterpret_cast<const FileHandle*>(fi->fh);
    const bool plain = handle == nullptr || handle->view == nullptr;  // not a slice view's
    if (plain && ctx.options->read_reply == ReadReply::kSplice && TrySpliceReply(req, ctx, ino, size, off)) {
      return;
    }
    if (handle != nullptr && TryLentReply(req, ctx, *handle, size, off)) return;
    std::vector<char>& buffer = ThreadBuffer(size);
    StatusOr<size_t> n = handle != nullptr ? ctx.fs->Read(*handle, static_cast<uint64_t>(off), size, buffer.data())
                                           : ctx.fs->Read(ino, static_cast<uint64_t>(off), size, buffer.data());
    if (!n.ok()) {
      LogReadError(ino, off, n.status().message());
      return ReplyStatus(req, n.status());
    }
    fuse_reply_buf(req, buffer.data(), *n);
  });
}

}  // namespace stfs::fuse_internal
