// Inspect reports. Directory names come from the same encoder the mount
// uses, so the report shows exactly where each tensor will appear.
#include "fs/inspect.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fs/name_encoding.h"

namespace stfs {
namespace {

using Json = nlohmann::ordered_json;

// Shows a name on one terminal line: JSON-escaped when it holds control
// bytes or is empty, as it is otherwise.
std::string Printable(const std::string& name) {
  bool plain = !name.empty() && std::none_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (plain) return name;
  return Json(name).dump(-1, ' ', false, Json::error_handler_t::replace);
}

struct Totals {
  uint64_t parameters = 0;
  uint64_t bytes = 0;
};

Totals Sum(const Catalogue& catalogue) {
  Totals t;
  for (const CatalogueTensor& tensor : catalogue.tensors()) {
    t.parameters += tensor.info.element_count;
    t.bytes += tensor.info.byte_size();
  }
  return t;
}

}  // namespace

std::string InspectTable(const Catalogue& catalogue) {
  const bool sharded = catalogue.sharded();
  struct Row { std::string name, dir, dtype, shape, bytes, offsets, shard; };
  std::vector<Row> rows;
  rows.push_back({"NAME", "DIRECTORY", "DTYPE", "SHAPE", "BYTES", "DATA_OFFSETS", "SHARD"});
  for (const CatalogueTensor& tensor : catalogue.tensors()) {
    const TensorInfo& t = tensor.info;
    std::string dir = EncodeTensorName(t.name);
    rows.push_back({Printable(t.name), dir == t.name ? "=" : dir, std::string(DTypeName(t.dtype)),
                    ShapeToString(t.shape), std::to_string(t.byte_size()),
                    "[" + std::to_string(t.begin) + "," + std::to_string(t.end) + ")",
                    Printable(catalogue.ShardOf(tensor).name)});
  }
  size_t w[6] = {0, 0, 0, 0, 0, 0};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.dir.size());
    w[2] = std::max(w[2], r.dtype.size());
    w[3] = std::max(w[3], r.shape.size());
    w[4] = std::max(w[4], r.bytes.size());
    w[5] = std::max(w[5], r.offsets.size());
  }
  std::ostringstream out;
  auto pad = [](const std::string& s, size_t width) { return s + std::string(width > s.size() ? width - s.size() : 0, ' '); };
  for (const Row& r : rows) {
    out << pad(r.name, w[0]) << "  " << pad(r.dir, w[1]) << "  " << pad(r.dtype, w[2]) << "  " << pad(r.shape, w[3])
        << "  " << std::string(w[4] - r.bytes.size(), ' ') << r.bytes << "  ";
    if (sharded) out << pad(r.offsets, w[5]) << "  " << r.shard << "\n";
    else out << r.offsets << "\n";
  }
  Totals totals = Sum(catalogue);
  out << "\n";
  out << "source:      " << catalogue.source_name() << "\n";
  if (sharded) out << "shards:      " << catalogue.shards().size() << "\n";
  out << "tensors:     " << catalogue.tensors().size() << "\n";
  out << "parameters:  " << totals.parameters << "\n";
  out << "data bytes:  " << totals.bytes << "\n";
  if (!sharded) {
    const CatalogueShard& file = catalogue.shards().front();
    out << "header:      " << file.header_size << " bytes (data starts at file offset " << file.data_start() << ")\n";
    out << "file size:   " << file.file_size << "\n";
  }
  out << "metadata:    " << catalogue.metadata_json() << "\n";
  return out.str();
}

std::string InspectJson(const Catalogue& catalogue) {
  const bool sharded = catalogue.sharded();
  Json root = Json::object();
  root["source"] = catalogue.source_name();
  if (!sharded) {
    const CatalogueShard& file = catalogue.shards().front();
    root["file_size"] = file.file_size;
    root["header_size"] = file.header_size;
    root["data_start"] = file.data_start();
  }
  Json tensors = Json::array();
  for (const CatalogueTensor& tensor : catalogue.tensors()) {
    const TensorInfo& t = tensor.info;
    Json entry = Json::object();
    entry["name"] = t.name;
    entry["directory"] = EncodeTensorName(t.name);
    entry["dtype"] = std::string(DTypeName(t.dtype));
    entry["shape"] = t.shape;
    entry["elements"] = t.element_count;
    entry["bytes"] = t.byte_size();
    entry["data_offsets"] = {t.begin, t.end};
    entry["file_offsets"] = {catalogue.FileOffset(tensor), catalogue.FileOffset(tensor) + t.byte_size()};
    if (sharded) entry["shard"] = catalogue.ShardOf(tensor).name;
    tensors.push_back(std::move(entry));
  }
  root["tensors"] = std::move(tensors);
  Totals totals = Sum(catalogue);
  root["totals"] = {{"tensors", catalogue.tensors().size()}, {"parameters", totals.parameters}, {"data_bytes", totals.bytes}};
  if (sharded) {
    Json shards = Json::array();
    for (const CatalogueShard& shard : catalogue.shards()) {
      shards.push_back({{"name", shard.name},
                        {"file_size", shard.file_size},
                        {"header_size", shard.header_size},
                        {"metadata", shard.has_metadata ? Json::parse(shard.metadata_json) : Json(nullptr)}});
    }
    root["shards"] = std::move(shards);
  }
  const bool has_metadata = sharded || catalogue.shards().front().has_metadata;
  root["metadata"] = has_metadata ? Json::parse(catalogue.metadata_json()) : Json(nullptr);
  return root.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace stfs
