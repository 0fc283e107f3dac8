// FUSE-free helpers around a mount point that the adapter uses: the mount's
// kernel read-ahead, and detaching a mount while its session still runs.
#pragma once

#include <string>

namespace stfs {

// Raises the mount's kernel read-ahead (as gcsfuse does): FUSE's bdi starts
// at 128 KiB, which caps sequential reads at 128 KiB requests. Needs root;
// `debug` reports the outcome on stderr.
void RaiseReadahead(const std::string& mountpoint, unsigned readahead_kb, bool debug);

// Removes the mount from the namespace without touching the session's fd
// (workers still use it): umount2(MNT_DETACH) as root, else fusermount3 -uz.
void DetachMount(const std::string& mountpoint);

}  // namespace stfs
