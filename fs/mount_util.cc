// Mount point helpers; see mount_util.h.
#include "fs/mount_util.h"

#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace stfs {
namespace {

// Decodes the octal escapes (\040 for space) /proc/self/mountinfo uses.
std::string UnescapeMountinfo(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      int v = 0;
      bool ok = true;
      for (int k = 1; k <= 3; ++k) {
        char c = field[i + k];
        if (c < '0' || c > '7') { ok = false; break; }
        v = v * 8 + (c - '0');
      }
      if (ok) { out += static_cast<char>(v); i += 3; continue; }
    }
    out += field[i];
  }
  return out;
}

}  // namespace

void RaiseReadahead(const std::string& mountpoint, unsigned readahead_kb, bool debug) {
  if (readahead_kb == 0) return;
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  std::string device;
  while (std::getline(mountinfo, line)) {
    std::istringstream fields(line);
    std::string id, parent, majmin, root, mnt;
    fields >> id >> parent >> majmin >> root >> mnt;
    if (UnescapeMountinfo(mnt) == mountpoint) device = majmin;  // the last match is the top mount
  }
  if (device.empty()) return;
  std::ofstream ra("/sys/class/bdi/" + device + "/read_ahead_kb");
  ra << readahead_kb;
  ra.close();
  if (debug) {
    std::fprintf(stderr, "stfs: read_ahead_kb=%u for bdi %s: %s\n", readahead_kb, device.c_str(),
                 ra ? "set" : "not set (needs root)");
  }
}

void DetachMount(const std::string& mountpoint) {
  if (::umount2(mountpoint.c_str(), MNT_DETACH) == 0) return;
  const char* argv[] = {"fusermount3", "-u", "-z", "-q", "--", mountpoint.c_str(), nullptr};
  pid_t pid = -1;
  if (posix_spawnp(&pid, "fusermount3", nullptr, nullptr, const_cast<char* const*>(argv), environ) == 0) {
    ::waitpid(pid, nullptr, 0);
  }
}

}  // namespace stfs
