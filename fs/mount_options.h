// The `stfs SOURCE MOUNTPOINT [-o ...]` command line: parsing, -o options
// (ours, the remote source's, the generic ones mount(8) passes, libfuse's),
// and paths resolved against the caller's directory before the daemon
// changes to `/`.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "fs/fuse_adapter.h"
#ifdef STFS_HAVE_REMOTE
#include "core/remote/remote_source.h"
#endif

namespace stfs {

struct CommandLine {
  std::string source;
  std::string mountpoint;
  bool foreground = false;
  std::string log_path;  // where the background daemon's stderr goes ("" = syslog)
  bool readahead_given = false;
  ServeOptions serve;
  FilesystemOptions filesystem;
#ifdef STFS_HAVE_REMOTE
  RemoteOptions remote;
#endif
};

// Splits "a,b\,c" at unescaped commas.
std::vector<std::string> SplitOptions(const std::string& list);

// Applies one -o option: ours, the remote source's, a generic mount(8)
// option, or one passed to libfuse.
Status ApplyMountOption(const std::string& option, CommandLine* cl);

// Parses `stfs [options] SOURCE MOUNTPOINT [options]` (mount.fuse3 puts
// `-o LIST` after the positional arguments).
Status ParseMountArgs(int argc, char** argv, CommandLine* cl);

// Makes SOURCE (a local one), -o log= and -o cafile= absolute against the
// current directory, and resolves and checks the mount point.
Status ResolvePaths(CommandLine* cl);

}  // namespace stfs
