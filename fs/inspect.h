// `stfs inspect`: a header-only report on a source, as a table or JSON.
#pragma once

#include <string>

#include "core/header.h"

namespace stfs {

// Returns the human-readable report: one row per tensor (name, directory,
// dtype, shape, bytes, data offsets), totals, then the metadata.
std::string InspectTable(const Header& header);

// Returns the same report as one JSON object and a newline.
std::string InspectJson(const Header& header);

}  // namespace stfs
