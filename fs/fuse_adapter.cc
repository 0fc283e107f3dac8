// The one file that knows FUSE: low-level handlers that turn requests into
// Filesystem calls and Status into errno.
//
// Every handler is a C boundary: exceptions are caught there and become EIO,
// never a crash. Content is immutable, so entries and attributes are cached
// by the kernel for a long time and files are opened with keep_cache, which
// also keeps mmap working (no direct_io) — except __stats__, which changes
// and is served with direct_io and zero timeouts.
//
// Lookup counts: every entry handed to the kernel (lookup, readdirplus) is
// Remember()ed and every FORGET passed on, which is what lets the
// Filesystem's slice view cache drop views the kernel no longer holds.
//
// Locking: the Filesystem's tree is immutable after construction and its
// slice view cache has its own mutex; the only shared mutable state here is
// ReadyState (its own mutex) and per-thread buffers.
#define FUSE_USE_VERSION 312
#include "fs/fuse_adapter.h"

#include <fcntl.h>
#include <fuse3/fuse_lowlevel.h>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <iterator>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "fs/handle_table.h"
#include "fs/mount_util.h"
#include "fs/splice_pipe.h"

namespace stfs {

int ErrnoFromStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kNotFound: return ENOENT;
    case StatusCode::kInvalidArgument: return EINVAL;
    case StatusCode::kStale: return ESTALE;
    case StatusCode::kResourceExhausted: return ENOMEM;
    case StatusCode::kOutOfRange: return EINVAL;
    case StatusCode::kNotSupported: return ENOTSUP;
    case StatusCode::kIOError:
      return status.sys_errno() != 0 ? status.sys_errno() : EIO;
    case StatusCode::kCorruption:
    case StatusCode::kUnavailable:
    case StatusCode::kInternal:
      return EIO;
  }
  return EIO;
}

namespace {

constexpr double kImmutableTimeout = 365.0 * 24 * 3600;

struct ReadyState {
  std::mutex mu;
  std::condition_variable cv;
  bool initialized = false;
  bool loop_done = false;
};

struct DirHandle;

struct Context {
  const Filesystem* fs;
  const ServeOptions* options;
  ReadyState ready;
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  // The kernel takes ENOSYS from opendir as "never send OPENDIR/RELEASEDIR
  // again" (FUSE_CAP_NO_OPENDIR_SUPPORT): listings need no handle here.
  bool zero_message_opendir = false;
  // Open files' and directories' handles (freed at RELEASE, or with the
  // session when it ends first).
  HandleTable<FileHandle> files;
  HandleTable<DirHandle> dirs;
};

Context& Ctx(fuse_req_t req) { return *static_cast<Context*>(fuse_req_userdata(req)); }

struct stat ToStat(const Context& ctx, const NodeAttr& attr) {
  struct stat st;
  std::memset(&st, 0, sizeof st);
  st.st_ino = attr.ino;
  st.st_mode = attr.mode;
  st.st_nlink = attr.nlink;
  st.st_size = static_cast<off_t>(attr.size);
  st.st_uid = ctx.uid;
  st.st_gid = ctx.gid;
  // Readers size buffers by st_blksize: 1 MiB reads of files, but glibc's
  // readdir asks getdents (and so the kernel's per-call FUSE buffer) for
  // st_blksize bytes too, which made listing a 3-entry tensor directory
  // allocate and free 256 pages. Directories get the 32 KiB floor.
  st.st_blksize = attr.is_directory ? 4096 : 1 << 20;
  st.st_blocks = static_cast<blkcnt_t>((attr.size + 511) / 512);
  st.st_atim = st.st_mtim = st.st_ctim = attr.mtime;
  return st;
}

double TimeoutFor(const NodeAttr& attr) { return attr.is_volatile ? 0.0 : kImmutableTimeout; }

fuse_entry_param ToEntry(const Context& ctx, const NodeAttr& attr) {
  fuse_entry_param e;
  std::memset(&e, 0, sizeof e);
  e.ino = attr.ino;
  e.generation = 1;
  e.attr = ToStat(ctx, attr);
  e.attr_timeout = TimeoutFor(attr);
  e.entry_timeout = kImmutableTimeout;
  return e;
}

// Runs `body`, turning any escaping exception into an EIO reply. `body`
// must not have replied when it throws.
template <typename Body>
void Guarded(fuse_req_t req, Body&& body) {
  try {
    body();
  } catch (...) {
    fuse_reply_err(req, EIO);
  }
}

void ReplyStatus(fuse_req_t req, const Status& status) { fuse_reply_err(req, ErrnoFromStatus(status)); }

void OnInit(void* userdata, fuse_conn_info* conn) {
  auto* ctx = static_cast<Context*>(userdata);
  // 1 MiB reads: the most libfuse 3.14's buffer allows.
  conn->max_write = 1 << 20;
  conn->max_readahead = 1 << 20;
  // libfuse insists that init() repeat a max_read= mount option.
  for (const std::string& option : ctx->options->fuse_options) {
    if (option.rfind("max_read=", 0) == 0) conn->max_read = static_cast<unsigned>(std::strtoul(option.c_str() + 9, nullptr, 10));
  }
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  ctx->zero_message_opendir = (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0;
  if (ctx->options->read_reply == ReadReply::kSplice && (conn->capable & FUSE_CAP_SPLICE_WRITE)) {
    conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
    // libfuse splices a reply only when it and three more pages fit in a
    // pipe, and pipes stop at 1 MiB (/proc/sys/fs/pipe-max-size); larger
    // replies fall back to a fresh malloc + pread + writev each. libfuse
    // derives max_pages from max_write, so 252 pages keep every read
    // spliceable.
    conn->max_write = kSpliceableReadBytes;
  } else {
    conn->want &= ~(FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
  }
  std::lock_guard<std::mutex> lock(ctx->ready.mu);
  ctx->ready.initialized = true;
  ctx->ready.cv.notify_all();
}

void OnLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Guarded(req, [&] {
    Context& ctx = Ctx(req);
    StatusOr<NodeAttr> attr = ctx.fs->Lookup(parent, name);
    if (attr.ok()) {
      // The kernel counts one reference per entry it receives; so do we.
      fuse_entry_param e = ToEntry(ctx, *attr);
      ctx.fs->Remember(attr->ino);
      if (fuse_reply_entry(req, &e) != 0) ctx.fs->Forget(attr->ino, 1);
    } else if (attr.status().code() == StatusCode::kNotFound) {
      // The tree never changes: let the kernel cache the miss too.
      fuse_entry_param e;
      std::memset(&e, 0, sizeof e);
      e.ino = 0;
      e.entry_timeout = kImmutableTimeout;
      fuse_reply_entry(req, &e);
    } else {
      ReplyStatus(req, attr.status());
    }
  });
}

// The kernel drops references it counted (lookups, readdirplus entries).
void OnForget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  try {
    Ctx(req).fs->Forget(ino, nlookup);
  } catch (...) {
  }
  fuse_reply_none(req);
}

void OnForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  try {
    for (size_t i = 0; i < count; ++i) Ctx(req).fs->Forget(forgets[i].ino, forgets[i].nlookup);
  } catch (...) {
  }
  fuse_reply_none(req);
}

void OnGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  Guarded(req, [&] {
    Context& ctx = Ctx(req);
    StatusOr<NodeAttr> attr = ctx.fs->GetAttr(ino);
    if (!attr.ok()) return ReplyStatus(req, attr.status());
    struct stat st = ToStat(ctx, *attr);
    fuse_reply_attr(req, &st, TimeoutFor(*attr));
  });
}

void OnOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Guarded(req, [&] {
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) return (void)fuse_reply_err(req, EROFS);
    Context& ctx = Ctx(req);
    StatusOr<FileHandle> file = ctx.fs->Open(ino);
    if (!file.ok()) {
      const Status& status = file.status();
      return (void)fuse_reply_err(req, status.code() == StatusCode::kInvalidArgument ? EISDIR : ErrnoFromStatus(status));
    }
    StatusOr<NodeAttr> attr = ctx.fs->GetAttr(ino);
    if (!attr.ok()) return ReplyStatus(req, attr.status());
    if (attr->is_volatile) {
      fi->direct_io = 1;
    } else {
      fi->keep_cache = 1;
    }
    // Every open file gets its handle: it carries the stream a remote source
    // keys read-ahead by (and, for a slice view's files, pins the view).
    fi->fh = ctx.files.Add(std::make_unique<FileHandle>(std::move(*file)));
    if (fuse_reply_open(req, fi) != 0) ctx.files.Remove(fi->fh);  // the kernel will not release it
  });
}

void OnRelease(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  Ctx(req).files.Remove(fi->fh);
  fuse_reply_err(req, 0);
}

// Per-thread reply buffer for pread replies: grows to the largest read and
// is reused, so steady-state reads allocate nothing.
std::vector<char>& ThreadBuffer(size_t size) {
  thread_local std::vector<char> buffer;
  if (buffer.size() < size) buffer.resize(size);
  return buffer;
}

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

// A directory being listed: the filesystem's shared listing (no copy of
// its entries) and the attributes of "." and "..".
struct DirHandle {
  DirListing listing;
  NodeAttr self;
  NodeAttr parent;
};

StatusOr<DirHandle> MakeDirHandle(const Context& ctx, fuse_ino_t ino) {
  ASSIGN_OR_RETURN(DirListing listing, ctx.fs->OpenDir(ino));
  if (!listing.attributes_known()) {
    // An evicted slice view: names and numbers only; ".." is unknown, so it
    // shows the view's own number.
    NodeAttr self;
    self.ino = ino;
    self.is_directory = true;
    self.mode = S_IFDIR | 0555;
    return DirHandle{std::move(listing), self, self};
  }
  ASSIGN_OR_RETURN(NodeAttr self, ctx.fs->GetAttr(ino));
  ASSIGN_OR_RETURN(InodeId parent_ino, ctx.fs->Parent(ino));
  ASSIGN_OR_RETURN(NodeAttr parent, ctx.fs->GetAttr(parent_ino));
  return DirHandle{std::move(listing), self, parent};
}

// Every directory is immutable and its listing costs nothing to find, so
// where the kernel allows, opendir is refused once with ENOSYS and every
// later open of a directory costs no request at all (nor does its
// release); the kernel then caches listings by default. `ls -lR` of a
// 100,000-tensor mount sends a third of the requests it would otherwise.
void OnOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Guarded(req, [&] {
    Context& ctx = Ctx(req);
    if (ctx.zero_message_opendir) return (void)fuse_reply_err(req, ENOSYS);
    StatusOr<DirHandle> made = MakeDirHandle(ctx, ino);
    if (!made.ok()) {
      return (void)fuse_reply_err(req, made.status().code() == StatusCode::kInvalidArgument
                                           ? ENOTDIR : ErrnoFromStatus(made.status()));
    }
    fi->fh = ctx.dirs.Add(std::make_unique<DirHandle>(std::move(*made)));
    fi->cache_readdir = 1;
    fi->keep_cache = 1;
    if (fuse_reply_open(req, fi) != 0) ctx.dirs.Remove(fi->fh);  // the kernel will not release it
  });
}

// Offsets are entry indices ("." is 0, ".." is 1), so each call starts
// where the last stopped, in constant time.
void ReadDirCommon(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  Guarded(req, [&] {
    Context& ctx = Ctx(req);
    const auto* handle = reinterpret_cast<const DirHandle*>(fi->fh);
    std::optional<DirHandle> made;  // without opendir: made for this call
    if (handle == nullptr) {
      StatusOr<DirHandle> listed = MakeDirHandle(ctx, ino);
      if (!listed.ok()) return ReplyStatus(req, listed.status());
      handle = &made.emplace(std::move(*listed));
    }
    // Reused, never zeroed: recent kernels ask for up to max_pages per call.
    std::vector<char>& buf = ThreadBuffer(size);
    size_t used = 0;
    const size_t total = handle->listing.size() + 2;
    for (size_t index = static_cast<size_t>(std::max<off_t>(off, 0)); index < total; ++index) {
      const char* name;
      NodeAttr attr;
      if (index == 0) { name = "."; attr = handle->self; }
      else if (index == 1) { name = ".."; attr = handle->parent; }
      else { name = handle->listing.NameAt(index - 2).data(); attr = handle->listing.AttrAt(index - 2); }
      size_t room = size - used;
      size_t need;
      if (plus) {
        fuse_entry_param e = ToEntry(ctx, attr);
        // "." and "..", and entries whose attributes are unknown, must not
        // be looked up (no lookup count); ino 0 says so.
        const bool name_only = index < 2 || !handle->listing.attributes_known();
        if (name_only) { std::memset(&e, 0, sizeof e); e.attr = ToStat(ctx, attr); }
        need = fuse_add_direntry_plus(req, buf.data() + used, room, name, &e, static_cast<off_t>(index + 1));
        if (need <= room && !name_only) ctx.fs->Remember(attr.ino);  // the kernel counts these too
      } else {
        struct stat st = ToStat(ctx, attr);
        need = fuse_add_direntry(req, buf.data() + used, room, name, &st, static_cast<off_t>(index + 1));
      }
      if (need > room) break;
      used += need;
    }
    fuse_reply_buf(req, buf.data(), used);
  });
}

void OnReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ReadDirCommon(req, ino, size, off, fi, false);
}

void OnReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ReadDirCommon(req, ino, size, off, fi, true);
}

void OnReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  Ctx(req).dirs.Remove(fi->fh);
  fuse_reply_err(req, 0);
}

void OnStatfs(fuse_req_t req, fuse_ino_t) {
  Guarded(req, [&] {
    Context& ctx = Ctx(req);
    struct statvfs st;
    std::memset(&st, 0, sizeof st);
    st.f_bsize = 4096;
    st.f_frsize = 4096;
    st.f_blocks = (ctx.fs->SourceBytes() + 4095) / 4096;
    st.f_files = ctx.fs->inode_count();
    st.f_namemax = 255;
    st.f_flag = ST_RDONLY;
    fuse_reply_statfs(req, &st);
  });
}

void OnAccess(fuse_req_t req, fuse_ino_t ino, int mask) {
  Guarded(req, [&] {
    if (mask & W_OK) return (void)fuse_reply_err(req, EROFS);
    StatusOr<NodeAttr> attr = Ctx(req).fs->GetAttr(ino);
    if (!attr.ok()) return ReplyStatus(req, attr.status());
    if ((mask & X_OK) && !attr->is_directory) return (void)fuse_reply_err(req, EACCES);
    fuse_reply_err(req, 0);
  });
}

// getxattr and listxattr are left unimplemented on purpose: libfuse answers
// ENOSYS, after which the kernel answers EOPNOTSUPP itself and stops asking.
// `ls -l` otherwise sends several xattr requests per entry (SELinux label,
// POSIX ACLs), which dominated `ls -lR` of a 10,000-tensor mount.

// Every operation that would change the tree.
void ReadOnly(fuse_req_t req) { fuse_reply_err(req, EROFS); }
void OnSetattr(fuse_req_t req, fuse_ino_t, struct stat*, int, fuse_file_info*) { ReadOnly(req); }
void OnMknod(fuse_req_t req, fuse_ino_t, const char*, mode_t, dev_t) { ReadOnly(req); }
void OnMkdir(fuse_req_t req, fuse_ino_t, const char*, mode_t) { ReadOnly(req); }
void OnUnlink(fuse_req_t req, fuse_ino_t, const char*) { ReadOnly(req); }
void OnRmdir(fuse_req_t req, fuse_ino_t, const char*) { ReadOnly(req); }
void OnSymlink(fuse_req_t req, const char*, fuse_ino_t, const char*) { ReadOnly(req); }
void OnRename(fuse_req_t req, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned) { ReadOnly(req); }
void OnLink(fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) { ReadOnly(req); }
void OnWrite(fuse_req_t req, fuse_ino_t, const char*, size_t, off_t, fuse_file_info*) { ReadOnly(req); }
void OnCreate(fuse_req_t req, fuse_ino_t, const char*, mode_t, fuse_file_info*) { ReadOnly(req); }
void OnSetxattr(fuse_req_t req, fuse_ino_t, const char*, const char*, size_t, int) { ReadOnly(req); }
void OnRemovexattr(fuse_req_t req, fuse_ino_t, const char*) { ReadOnly(req); }
void OnFallocate(fuse_req_t req, fuse_ino_t, int, off_t, off_t, fuse_file_info*) { ReadOnly(req); }

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof ops);
  ops.init = OnInit;
  ops.lookup = OnLookup;
  ops.forget = OnForget;
  ops.forget_multi = OnForgetMulti;
  ops.getattr = OnGetattr;
  ops.open = OnOpen;
  ops.read = OnRead;
  ops.release = OnRelease;
  ops.opendir = OnOpendir;
  ops.readdir = OnReaddir;
  ops.readdirplus = OnReaddirplus;
  ops.releasedir = OnReleasedir;
  ops.statfs = OnStatfs;
  ops.access = OnAccess;
  ops.setattr = OnSetattr;
  ops.mknod = OnMknod;
  ops.mkdir = OnMkdir;
  ops.unlink = OnUnlink;
  ops.rmdir = OnRmdir;
  ops.symlink = OnSymlink;
  ops.rename = OnRename;
  ops.link = OnLink;
  ops.write = OnWrite;
  ops.create = OnCreate;
  ops.setxattr = OnSetxattr;
  ops.removexattr = OnRemovexattr;
  ops.fallocate = OnFallocate;
  return ops;
}

std::string JoinOptions(const std::vector<std::string>& options) {
  std::string out;
  for (const std::string& o : options) {
    if (o.empty()) continue;
    if (!out.empty()) out += ',';
    out += o;
  }
  return out;
}

// Session lifecycle. A stop signal only writes a byte to a pipe (all a
// handler may do). The stopper, a normal thread, then
//   1. runs the caller's on_teardown, which makes source reads fail at once
//      (a worker blocked on a slow source answers EIO),
//   2. detaches the mount, so it is gone within milliseconds and the kernel
//      sends nothing new; requests already queued (the kernel retries a
//      failed read-ahead as a plain read) are still answered, quickly,
//   3. lets the loop end by itself once the last open file is closed, or
//      after kDrainMs ends it (fds still open then get ENOTCONN).
// libfuse blocks these signals in its workers; our own threads block them
// too, so they reach the loop thread and interrupt its wait.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kDrainMs = 1000;

std::atomic<int> g_wake_fd{-1};

void OnStopSignal(int) {
  int saved = errno;
  int fd = g_wake_fd.load();
  if (fd >= 0) (void)!::write(fd, "x", 1);
  errno = saved;
}

class StopSignals {
 public:
  explicit StopSignals(int wake_fd) {
    g_wake_fd = wake_fd;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: the loop's wait must see EINTR
    for (size_t i = 0; i < std::size(kStopSignals); ++i) ::sigaction(kStopSignals[i], &sa, &old_[i]);
  }
  ~StopSignals() {
    for (size_t i = 0; i < std::size(kStopSignals); ++i) ::sigaction(kStopSignals[i], &old_[i], nullptr);
    g_wake_fd = -1;
  }

 private:
  struct sigaction old_[std::size(kStopSignals)];
};

// Starts a thread with the stop signals blocked, so they reach the loop thread.
template <typename Body>
std::thread StartQuietThread(Body&& body) {
  sigset_t stop, old;
  sigemptyset(&stop);
  for (int sig : kStopSignals) sigaddset(&stop, sig);
  pthread_sigmask(SIG_BLOCK, &stop, &old);
  std::thread thread(std::forward<Body>(body));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return thread;
}

// Makes fuse_session_unmount only close the session (and free what it
// holds) without unmounting the path again: it skips the unmount when the
// fd polls POLLERR, as a severed connection does. If files kept the
// detached connection alive, the /dev/fuse fd is swapped for a pipe's write
// end whose reader is gone (POLLERR), which also ends the connection.
void RetireSessionFd(fuse_session* se) {
  const int fd = fuse_session_fd(se);
  pollfd p = {fd, 0, 0};
  if (::poll(&p, 1, 0) == 1 && (p.revents & POLLERR)) return;
  int broken[2];
  if (::pipe2(broken, O_CLOEXEC) != 0) return;
  ::close(broken[0]);
  ::dup2(broken[1], fd);
  ::close(broken[1]);
}

// libfuse's messages (bad options, mount errors): kept while the session is
// set up so the error the user sees can name the cause, and still printed.
std::mutex g_fuse_log_mu;
std::string g_fuse_last_message;

void CaptureFuseLog(enum fuse_log_level, const char* fmt, va_list ap) {
  char line[1024];
  std::vsnprintf(line, sizeof line, fmt, ap);
  std::fputs(line, stderr);
  std::string text = line;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::lock_guard<std::mutex> lock(g_fuse_log_mu);
  g_fuse_last_message = text;
}

// `base` and the last libfuse message, if any.
std::string WithFuseMessage(std::string base) {
  std::lock_guard<std::mutex> lock(g_fuse_log_mu);
  if (!g_fuse_last_message.empty()) base += ": " + g_fuse_last_message;
  return base;
}

// Serves the mounted session until a signal, an unmount or a refused
// readiness ends it; returns the loop's outcome. `wake` is the stop pipe;
// `*detached` tells whether the stopper already removed the mount.
Status RunSession(fuse_session* se, Context& ctx, const ServeOptions& options, const int wake[2],
                  std::atomic<bool>* detached, const std::function<bool(const Status&)>& on_ready) {
  const pthread_t loop_thread = pthread_self();
  auto loop_done = [&] {
    std::lock_guard<std::mutex> lock(ctx.ready.mu);
    return ctx.ready.loop_done;
  };
  // Readiness: wait for the kernel's INIT, then stat the mount point through
  // the mount itself, so "ready" means the mount answers. A caller that
  // refuses it (its parent is gone) stops the session.
  std::thread watcher = StartQuietThread([&] {
    {
      std::unique_lock<std::mutex> lock(ctx.ready.mu);
      ctx.ready.cv.wait(lock, [&] { return ctx.ready.initialized || ctx.ready.loop_done; });
      if (!ctx.ready.initialized) return;
    }
    struct stat st;
    Status ready = Status::OK();
    if (::stat(options.mountpoint.c_str(), &st) != 0 || st.st_ino != kRootInode) {
      ready = StatusFromErrno(errno ? errno : EIO, options.mountpoint + ": mount does not answer");
    } else {
      RaiseReadahead(options.mountpoint, options.readahead_kb, options.debug);
    }
    if (!on_ready(ready) || !ready.ok()) (void)!::write(wake[1], "x", 1);  // tear down
  });
  std::thread stopper = StartQuietThread([&] {
    pollfd stop = {wake[0], POLLIN, 0};
    bool signalled = false;
    for (;;) {
      if (loop_done()) return;
      if (::poll(&stop, 1, 100) > 0) { signalled = true; break; }
      if (fuse_session_exited(se)) break;  // unmounted from outside: the loop is ending
    }
    if (options.on_teardown) options.on_teardown();
    if (!signalled) return;
    DetachMount(options.mountpoint);
    *detached = true;
    std::unique_lock<std::mutex> lock(ctx.ready.mu);
    if (!ctx.ready.cv.wait_for(lock, std::chrono::milliseconds(kDrainMs), [&] { return ctx.ready.loop_done; })) {
      fuse_session_exit(se);
      pthread_kill(loop_thread, SIGTERM);  // interrupts the loop's wait (the handler only writes the pipe)
    }
  });

  int rc;
  if (options.single_threaded) {
    rc = fuse_session_loop(se);
  } else {
    fuse_loop_config* config = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(config, options.max_threads);
    fuse_loop_cfg_set_clone_fd(config, 0);
    rc = fuse_session_loop_mt(se, config);
    fuse_loop_cfg_destroy(config);
  }
  {
    std::lock_guard<std::mutex> lock(ctx.ready.mu);
    ctx.ready.loop_done = true;
    ctx.ready.cv.notify_all();
  }
  watcher.join();
  stopper.join();
  if (rc != 0 && rc != SIGINT && rc != SIGTERM && rc != SIGHUP) {
    return Status::IOError("FUSE session ended with error " + std::to_string(rc));
  }
  return Status::OK();
}

}  // namespace

std::string FuseVersion() { return fuse_pkgversion(); }

Status ServeFilesystem(const Filesystem& fs, const ServeOptions& options,
                       const std::function<bool(const Status&)>& on_ready) {
  Context ctx;
  ctx.fs = &fs;
  ctx.options = &options;
  {
    std::lock_guard<std::mutex> lock(g_fuse_log_mu);
    g_fuse_last_message.clear();
  }
  fuse_set_log_func(CaptureFuseLog);

  std::vector<std::string> arg_strings = {"stfs"};
  if (options.debug) arg_strings.push_back("-d");
  std::vector<std::string> fuse_options = {"ro", "default_permissions", "fsname=stfs", "subtype=stfs"};
  if (options.auto_unmount) fuse_options.push_back("auto_unmount");
  fuse_options.insert(fuse_options.end(), options.fuse_options.begin(), options.fuse_options.end());
  arg_strings.push_back("-o");
  arg_strings.push_back(JoinOptions(fuse_options));
  std::vector<char*> argv;
  for (std::string& s : arg_strings) argv.push_back(s.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  const fuse_lowlevel_ops ops = MakeOps();
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, &ctx);
  if (se == nullptr) {
    Status s = Status::InvalidArgument(WithFuseMessage("could not start a FUSE session"));
    on_ready(s);
    return s;
  }
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    fuse_session_destroy(se);
    Status s = StatusFromErrno(errno, "pipe");
    on_ready(s);
    return s;
  }
  Status result = Status::OK();
  {
    StopSignals signals(wake[1]);
    if (fuse_session_mount(se, options.mountpoint.c_str()) != 0) {
      result = Status::IOError(WithFuseMessage(options.mountpoint + ": mount failed"));
      on_ready(result);
    } else {
      std::atomic<bool> detached{false};
      result = RunSession(se, ctx, options, wake, &detached, on_ready);
      // After a detach the path may hold someone else's mount by now.
      if (detached) RetireSessionFd(se);
      fuse_session_unmount(se);
    }
  }
  ::close(wake[0]);
  ::close(wake[1]);
  fuse_session_destroy(se);
  fuse_opt_free_args(&args);
  return result;
}

}  // namespace stfs
