// Command-line parsing for mounts; see mount_options.h.
//
// mount(8) and mount.fuse3 pass generic options (rw, dev, nosuid, _netdev,
// ...) to every filesystem helper. Those the kernel understands go on to
// libfuse; those that only mean something to mount(8) are dropped; `rw` is
// accepted and ignored, since mount(8) passes it unless told `ro` and an
// stfs mount is read-only whatever it is told.
#include "fs/mount_options.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <set>

#ifdef STFS_HAVE_REMOTE
#include "core/remote/remote_source.h"
#endif

namespace stfs {
namespace {

// Generic options with no meaning for an stfs mount ("rw" included: the
// mount stays read-only) or meaningful only to mount(8) and fstab.
const std::set<std::string>& IgnoredGenericOptions() {
  static const std::set<std::string> options = {
      "rw", "ro", "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group",
      "_netdev", "nofail", "relatime", "norelatime", "strictatime", "nostrictatime",
      "lazytime", "nolazytime", "diratime", "nodiratime", "silent", "loud"};
  return options;
}

// Generic options the kernel applies to any mount; libfuse passes them on.
const std::set<std::string>& KernelFlagOptions() {
  static const std::set<std::string> options = {
      "dev", "nodev", "suid", "nosuid", "exec", "noexec", "async", "sync", "dirsync", "atime", "noatime"};
  return options;
}

StatusOr<unsigned> ParseUnsigned(const std::string& key, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  unsigned long v = std::strtoul(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v > UINT_MAX) {
    return Status::InvalidArgument("option " + key + "=" + value + ": expected a non-negative integer");
  }
  return static_cast<unsigned>(v);
}

bool IsRemoteSource(const std::string& source) {
#ifdef STFS_HAVE_REMOTE
  if (IsRemoteLocation(source)) return true;
#endif
  return source.find("://") != std::string::npos;
}

// `path` made absolute against the current directory (not resolved: a
// missing file is still reported under its own name later).
std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  std::string base = cwd;
  if (base != "/") base += '/';
  return base + path;
}

}  // namespace

std::vector<std::string> SplitOptions(const std::string& list) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == '\\' && i + 1 < list.size()) {
      out.back() += list[++i];
    } else if (list[i] == ',') {
      out.emplace_back();
    } else {
      out.back() += list[i];
    }
  }
  return out;
}

Status ApplyMountOption(const std::string& option, CommandLine* cl) {
  size_t eq = option.find('=');
  std::string key = option.substr(0, eq);
  std::string value = eq == std::string::npos ? "" : option.substr(eq + 1);
  if (option.empty() || IgnoredGenericOptions().count(option) || key == "comment" || key.rfind("x-", 0) == 0) {
    return Status::OK();
  }
  if (KernelFlagOptions().count(option)) {
    cl->serve.fuse_options.push_back(option);
    return Status::OK();
  }
  if (key == "read_reply") {
    if (value == "pread") cl->serve.read_reply = ReadReply::kPread;
    else if (value == "splice" || value == "fd") cl->serve.read_reply = ReadReply::kSplice;
    else return Status::InvalidArgument("option read_reply=" + value + ": expected splice or pread");
    return Status::OK();
  }
  if (key == "readahead_kb") {
    cl->readahead_given = true;
    ASSIGN_OR_RETURN(cl->serve.readahead_kb, ParseUnsigned(key, value));
    return Status::OK();
  }
  if (key == "threads") {
    ASSIGN_OR_RETURN(unsigned threads, ParseUnsigned(key, value));
    if (threads == 0) return Status::InvalidArgument("option threads=0: need at least one thread");
    cl->serve.max_threads = threads;
    return Status::OK();
  }
  if (key == "max_slice_views") {
    ASSIGN_OR_RETURN(unsigned views, ParseUnsigned(key, value));
    if (views == 0) return Status::InvalidArgument("option max_slice_views=0: need room for one view");
    cl->filesystem.max_slice_views = views;
    return Status::OK();
  }
  if (key == "log") {
    if (value.empty()) return Status::InvalidArgument("option log=: expected a file path");
    cl->log_path = value;
    return Status::OK();
  }
  if (option == "tree") { cl->filesystem.tree = true; return Status::OK(); }
  if (option == "auto_unmount") { cl->serve.auto_unmount = true; return Status::OK(); }
  if (option == "noauto_unmount") { cl->serve.auto_unmount = false; return Status::OK(); }
#ifdef STFS_HAVE_REMOTE
  ASSIGN_OR_RETURN(bool consumed, ApplyRemoteOption(option, &cl->remote));
  if (consumed) return Status::OK();
#endif
  cl->serve.fuse_options.push_back(option);
  return Status::OK();
}

Status ParseMountArgs(int argc, char** argv, CommandLine* cl) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-f") cl->foreground = true;
    else if (arg == "-d") { cl->foreground = true; cl->serve.debug = true; }
    else if (arg == "-s") cl->serve.single_threaded = true;
    else if (arg == "-o" || (arg.size() > 2 && arg.rfind("-o", 0) == 0)) {
      std::string list = arg == "-o" ? (i + 1 < argc ? argv[++i] : "") : arg.substr(2);
      if (list.empty()) return Status::InvalidArgument("-o needs an option list");
      for (const std::string& opt : SplitOptions(list)) RETURN_IF_ERROR(ApplyMountOption(opt, cl));
    } else if (arg == "--") {
      for (++i; i < argc; ++i) positional.push_back(argv[i]);
    } else if (arg.size() > 1 && arg[0] == '-') {
      return Status::InvalidArgument("unknown option '" + arg + "' (see stfs --help)");
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 2) {
    return Status::InvalidArgument("expected SOURCE and MOUNTPOINT (see stfs --help)");
  }
  cl->source = positional[0];
  cl->mountpoint = positional[1];
  return Status::OK();
}

Status ResolvePaths(CommandLine* cl) {
  if (!IsRemoteSource(cl->source)) cl->source = Absolute(cl->source);
  cl->log_path = Absolute(cl->log_path);
#ifdef STFS_HAVE_REMOTE
  cl->remote.ca_file = Absolute(cl->remote.ca_file);
#endif
  char resolved[PATH_MAX];
  if (::realpath(cl->mountpoint.c_str(), resolved) == nullptr) return StatusFromErrno(errno, cl->mountpoint);
  struct stat st;
  if (::stat(resolved, &st) != 0) return StatusFromErrno(errno, cl->mountpoint);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(cl->mountpoint + ": mount point is not a directory");
  cl->serve.mountpoint = resolved;
  return Status::OK();
}

}  // namespace stfs
