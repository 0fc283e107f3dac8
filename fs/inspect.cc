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

Totals Sum(const Header& header) {
  Totals t;
  for (const TensorInfo& info : header.tensors) {
    t.parameters += info.element_count;
    t.bytes += info.byte_size();
  }
  return t;
}

}  // namespace

std::string InspectTable(const Header& header) {
  struct Row { std::string name, dir, dtype, shape, bytes, offsets; };
  std::vector<Row> rows;
  rows.push_back({"NAME", "DIRECTORY", "DTYPE", "SHAPE", "BYTES", "DATA_OFFSETS"});
  for (const TensorInfo& t : header.tensors) {
    std::string dir = EncodeTensorName(t.name);
    rows.push_back({Printable(t.name), dir == t.name ? "=" : dir, std::string(DTypeName(t.dtype)),
                    ShapeToString(t.shape), std::to_string(t.byte_size()),
                    "[" + std::to_string(t.begin) + "," + std::to_string(t.end) + ")"});
  }
  size_t w[5] = {0, 0, 0, 0, 0};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.dir.size());
    w[2] = std::max(w[2], r.dtype.size());
    w[3] = std::max(w[3], r.shape.size());
    w[4] = std::max(w[4], r.bytes.size());
  }
  std::ostringstream out;
  auto pad = [](const std::string& s, size_t width) { return s + std::string(width > s.size() ? width - s.size() : 0, ' '); };
  for (const Row& r : rows) {
    out << pad(r.name, w[0]) << "  " << pad(r.dir, w[1]) << "  " << pad(r.dtype, w[2]) << "  " << pad(r.shape, w[3])
        << "  " << std::string(w[4] - r.bytes.size(), ' ') << r.bytes << "  " << r.offsets << "\n";
  }
  Totals totals = Sum(header);
  out << "\n";
  out << "source:      " << header.source << "\n";
  out << "tensors:     " << header.tensors.size() << "\n";
  out << "parameters:  " << totals.parameters << "\n";
  out << "data bytes:  " << totals.bytes << "\n";
  out << "header:      " << header.header_size << " bytes (data starts at file offset " << header.data_start() << ")\n";
  out << "file size:   " << header.file_size << "\n";
  out << "metadata:    " << header.MetadataJson() << "\n";
  return out.str();
}

std::string InspectJson(const Header& header) {
  Json root = Json::object();
  root["source"] = header.source;
  root["file_size"] = header.file_size;
  root["header_size"] = header.header_size;
  root["data_start"] = header.data_start();
  Json tensors = Json::array();
  for (const TensorInfo& t : header.tensors) {
    Json entry = Json::object();
    entry["name"] = t.name;
    entry["directory"] = EncodeTensorName(t.name);
    entry["dtype"] = std::string(DTypeName(t.dtype));
    entry["shape"] = t.shape;
    entry["elements"] = t.element_count;
    entry["bytes"] = t.byte_size();
    entry["data_offsets"] = {t.begin, t.end};
    entry["file_offsets"] = {header.data_start() + t.begin, header.data_start() + t.end};
    tensors.push_back(std::move(entry));
  }
  root["tensors"] = std::move(tensors);
  Totals totals = Sum(header);
  root["totals"] = {{"tensors", header.tensors.size()}, {"parameters", totals.parameters}, {"data_bytes", totals.bytes}};
  Json metadata = Json::object();
  for (const auto& [k, v] : header.metadata) metadata[k] = v;
  root["metadata"] = header.has_metadata ? metadata : Json(nullptr);
  return root.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace stfs
