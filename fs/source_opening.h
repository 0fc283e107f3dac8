// Opening a SOURCE from the command line as a Catalogue: one safetensors
// file, an index.json with its shards, a directory of shards (local), or a
// remote object when built with remote support. Shared by mounting and
// `stfs inspect`, so both take the same sources.
#pragma once

#include "core/catalogue.h"
#include "core/status.h"
#include "fs/mount_options.h"

namespace stfs {

// Opens and validates SOURCE: every shard's header is read and checked
// against the index before this returns.
StatusOr<Catalogue> OpenCatalogue(const CommandLine& cl);

}  // namespace stfs
