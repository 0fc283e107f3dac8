// The `stfs` command: mount a safetensors source (mount_options.cc parses,
// serve.cc mounts), or inspect its header.
#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fs/fuse_adapter.h"
#include "fs/inspect.h"
#include "fs/mount_options.h"
#include "fs/serve.h"
#include "fs/source_opening.h"
#ifdef STFS_HAVE_REMOTE
#include "core/remote/remote_source.h"
#endif

#ifndef STFS_VERSION
#define STFS_VERSION "0.0.0"
#endif

namespace stfs {
namespace {

constexpr const char* kUsage =
    "usage: stfs [options] SOURCE MOUNTPOINT\n"
    "       stfs inspect SOURCE [--json]\n"
    "       stfs --help | --version\n"
    "\n"
    "Mounts a safetensors file read-only: one directory per tensor holding\n"
    "`dtype`, `shape` and `data` (the raw bytes), plus __metadata__ and\n"
    "__stats__ at the root. SOURCE is a local path"
#ifdef STFS_HAVE_REMOTE
    ", an http(s):// URL or hf://ORG/REPO/FILE[@REV]"
#endif
    ".\n"
    "The header is validated before anything is mounted; by default stfs\n"
    "returns once the mount answers and serves in the background.\n"
    "\n"
    "options:\n"
    "  -f                  stay in the foreground (SIGINT/SIGTERM unmount)\n"
    "  -d                  FUSE debug output (implies -f)\n"
    "  -s                  single-threaded\n"
    "  -o OPT[,OPT...]     mount options; libfuse's pass through (allow_other, ...)\n"
    "     read_reply=splice|pread  answer data reads of a local file by splicing\n"
    "                           it through a pipe (default, no copy in the daemon)\n"
    "                           or by pread into a buffer (fd is splice's old name)\n"
    "     readahead_kb=N        kernel read-ahead for the mount (default 4096, 1024 for\n"
    "                           remote sources; 0 keeps the kernel's 128)\n"
    "     threads=N             most FUSE worker threads (default 16)\n"
    "     max_slice_views=N     slice views kept at once (default 65536)\n"
    "     tree                  dotted names as nested directories (model/layers/0/...)\n"
    "     log=PATH              append the background daemon's messages (read\n"
    "                           errors, stale objects) to PATH (default: syslog\n"
    "                           when there is one; -f keeps stderr)\n"
    "     noauto_unmount        leave the mount behind if the daemon is killed\n"
    "                           (default: libfuse's auto_unmount removes it)\n"
    "     rw, ro, dev, nosuid, _netdev, nofail, defaults, ...  generic mount(8)\n"
    "                           options are accepted (fstab, mount -t fuse.stfs);\n"
    "                           the mount is read-only whatever they say\n"
    "  Relative paths (SOURCE, MOUNTPOINT, log=, cafile=) are taken from the\n"
    "  current directory. SIGINT/SIGTERM/SIGHUP unmount within 2 s; reads\n"
    "  still waiting on the source then fail with EIO.\n"
    "  -h, --help          this text\n"
    "  -V, --version       the version\n";

// Kernel read-ahead for remote mounts unless -o readahead_kb= says otherwise.
constexpr unsigned kRemoteReadaheadKb = 1024;

void PrintError(const std::string& message) { std::fprintf(stderr, "stfs: %s\n", message.c_str()); }

int RunInspect(int argc, char** argv) {
  CommandLine cl;
  bool json = false;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--json") json = true;
    else if (arg == "-h" || arg == "--help") { std::fputs(kUsage, stdout); return 0; }
    else if (arg == "-o" && i + 1 < argc) {
      for (const std::string& opt : SplitOptions(argv[++i])) {
        Status s = ApplyMountOption(opt, &cl);
        if (!s.ok()) { PrintError(s.message()); return 2; }
      }
    } else if (cl.source.empty()) cl.source = arg;
    else { PrintError("inspect: unexpected argument '" + arg + "'"); return 2; }
  }
  if (cl.source.empty()) { PrintError("inspect: missing SOURCE\n" + std::string(kUsage)); return 2; }
#ifdef STFS_HAVE_REMOTE
  ApplyRemoteEnvironment(&cl.remote);
#endif
  StatusOr<Catalogue> catalogue = OpenCatalogue(cl);
  if (!catalogue.ok()) { PrintError(catalogue.status().message()); return 1; }
  std::string report = json ? InspectJson(*catalogue) : InspectTable(*catalogue);
  std::fwrite(report.data(), 1, report.size(), stdout);
  return 0;
}

int Main(int argc, char** argv) {
  if (argc >= 2) {
    std::string first = argv[1];
    if (first == "-h" || first == "--help") { std::fputs(kUsage, stdout);
#ifdef STFS_HAVE_REMOTE
      std::fputs(("\n" + RemoteOptionsHelp()).c_str(), stdout);
#endif
      return 0; }
    if (first == "-V" || first == "--version") { std::printf("stfs %s (libfuse %s)\n", STFS_VERSION, FuseVersion().c_str()); return 0; }
    if (first == "inspect") return RunInspect(argc, argv);
  }
  // A reader closing a pipe (curl, log) must not kill the daemon.
  ::signal(SIGPIPE, SIG_IGN);
  CommandLine cl;
  Status parsed = ParseMountArgs(argc, argv, &cl);
  if (!parsed.ok()) { PrintError(parsed.message()); return 2; }
#ifdef STFS_HAVE_REMOTE
  ApplyRemoteEnvironment(&cl.remote);
  // A remote source reads ahead itself, in cache blocks; a large kernel
  // read-ahead on top only makes a short read fetch more than it needs.
  if (IsRemoteLocation(cl.source) && !cl.readahead_given) cl.serve.readahead_kb = kRemoteReadaheadKb;
  // A remote source has no fd to splice from, and the splice setup caps
  // FUSE reads at 1008 KiB: every 1 MiB the kernel reads would come as two
  // requests (1008 KiB and a 16 KiB tail). Plain replies allow 1 MiB.
  if (IsRemoteLocation(cl.source)) cl.serve.read_reply = ReadReply::kPread;
#endif
  Status paths = ResolvePaths(&cl);
  if (!paths.ok()) { PrintError(paths.message()); return 1; }
  return cl.foreground ? ServeForeground(cl) : ServeBackground(cl);
}

}  // namespace
}  // namespace stfs

int main(int argc, char** argv) {
  // Buffers of 128 KiB and more (FUSE replies, header copies) are mapped and
  // unmapped on free. glibc would otherwise raise this threshold after the
  // first free of such a buffer and keep later ones in per-thread arenas: up
  // to a 1 MiB reply per FUSE thread held for the daemon's life, outside
  // every budget. Setting it fixes the threshold (mallopt(3)).
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  try {
    return stfs::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stfs: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "stfs: internal error\n");
  }
  return 1;
}
