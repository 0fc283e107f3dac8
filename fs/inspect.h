// `stfs inspect`: a header-only report on a source, as a table or JSON.
// For a sharded checkpoint (index or directory) each tensor also names its
// shard, and the report lists the shards.
#pragma once

#include <string>

#include "core/catalogue.h"

namespace stfs {

// Returns the human-readable report: one row per tensor (name, directory,
// dtype, shape, bytes, data offsets; and shard when sharded), totals, then
// the metadata.
std::string InspectTable(const Catalogue& catalogue);

// Returns the same report as one JSON object and a newline.
std::string InspectJson(const Catalogue& catalogue);

}  // namespace stfs
