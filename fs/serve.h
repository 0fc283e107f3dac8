// Serving a mount from the command line: in the foreground, or in a
// daemon that reports "ready" or the error to the waiting `stfs` command.
#pragma once

#include <memory>

#include "fs/mount_options.h"

namespace stfs {

// `stfs -f`: serves until unmounted or signalled; returns the exit code.
int ServeForeground(CommandLine& cl);

// Default mode: forks the daemon and returns once the mount answers (0) or
// with the daemon's one-line error printed (1).
int ServeBackground(CommandLine& cl);

}  // namespace stfs
