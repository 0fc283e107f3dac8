// The FUSE metadata and directory handlers: requests become Filesystem
// calls and Status becomes errno. (Reads are fuse_read.cc's; the session
// is fuse_adapter.cc's; fuse_internal.h lists the adapter's files.)
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
#include "fs/fuse_internal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

namespace fuse_internal {

std::vector<char>& ThreadBuffer(size_t size) {
  thread_local std::vector<char> buffer;
  if (buffer.size() < size) buffer.resize(size);
  return buffer;
}

namespace {

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

}  // namespace

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

}  // namespace fuse_internal
}  // namespace stfs
