// Parsing of *.safetensors.index.json with nlohmann's parser callback: each
// weight_map entry is taken from the event stream and discarded from the
// DOM, so the DOM holds only the small metadata object and 50,000 entries
// cost one vector push and one hash insert each. nlohmann throws; nothing
// escapes this file.
#include "core/checkpoint_index.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace stfs {
namespace {

using Json = nlohmann::ordered_json;
using Event = nlohmann::detail::parse_event_t;

// Collects weight_map from parser events (depth 2 under the top-level key
// "weight_map") and notes the first problem; the DOM keeps everything else.
class IndexCollector {
 public:
  bool OnEvent(int depth, Event event, Json& parsed) {
    if (depth == 1 && event == Event::key) {
      top_key_ = parsed.get<std::string>();
      if (!top_keys_.insert(top_key_).second) Fail("key " + QuotedName(top_key_) + " appears twice");
      return true;
    }
    if (depth == 2 && event == Event::key && top_key_ == "metadata") {
      std::string key = parsed.get<std::string>();
      if (!metadata_keys_.insert(key).second) Fail("metadata key " + QuotedName(key) + " appears twice");
      return true;
    }
    if (top_key_ != "weight_map" || depth < 2) return true;
    // Inside weight_map: keep nothing in the DOM.
    if (depth == 2 && event == Event::key) {
      pending_tensor_ = parsed.get<std::string>();
      has_pending_tensor_ = true;
      return false;
    }
    if (depth == 2 && event == Event::value && has_pending_tensor_) {
      has_pending_tensor_ = false;
      if (!parsed.is_string()) {
        Fail("weight_map entry " + QuotedName(pending_tensor_) + " is " + parsed.type_name() +
             ", expected a shard file name");
      } else {
        Add(std::move(pending_tensor_), parsed.get<std::string>());
      }
      return false;
    }
    if (depth == 2 && (event == Event::object_start || event == Event::array_start) && has_pending_tensor_) {
      has_pending_tensor_ = false;
      Fail("weight_map entry " + QuotedName(pending_tensor_) + " is not a string, expected a shard file name");
    }
    return false;
  }

  const std::string& problem() const { return problem_; }
  CheckpointIndex& index() { return index_; }

 private:
  void Fail(std::string problem) {
    if (problem_.empty()) problem_ = std::move(problem);
  }

  void Add(std::string tensor, std::string shard) {
    if (!tensors_.insert(tensor).second) {
      Fail("tensor " + QuotedName(tensor) + " appears twice in weight_map");
      return;
    }
    auto [it, inserted] = shard_ids_.try_emplace(shard, static_cast<uint32_t>(index_.shard_names.size()));
    if (inserted) index_.shard_names.push_back(std::move(shard));
    index_.weight_map.push_back({std::move(tensor), it->second});
  }

  std::string top_key_;
  std::unordered_set<std::string> top_keys_;
  std::unordered_set<std::string> metadata_keys_;
  std::string pending_tensor_;
  bool has_pending_tensor_ = false;
  std::unordered_set<std::string> tensors_;
  std::unordered_map<std::string, uint32_t> shard_ids_;
  CheckpointIndex index_;
  std::string problem_;
};

// Returns true when `segment` is "." or ".." once %2E / %2e are decoded.
bool IsDotSegment(std::string_view segment) {
  std::string decoded;
  for (size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] == '%' && i + 2 < segment.size() && segment[i + 1] == '2' &&
        (segment[i + 2] == 'e' || segment[i + 2] == 'E')) {
      decoded += '.';
      i += 2;
    } else {
      decoded += segment[i];
    }
  }
  return decoded == "." || decoded == "..";
}

}  // namespace

std::string QuotedName(std::string_view name) {
  return Json(std::string(name)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

Status ValidateShardName(std::string_view name) {
  auto refuse = [&](std::string_view why) {
    return Status::InvalidArgument("shard path " + QuotedName(name) + " leaves the index's directory: " +
                                   std::string(why));
  };
  if (name.empty()) return refuse("it is empty");
  if (name[0] == '/') return refuse("it is absolute");
  for (char c : name) {
    unsigned char byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) return refuse("it holds a control byte");
    if (c == '\\' || c == '?' || c == '#') return refuse(std::string("it holds '") + c + "'");
  }
  size_t first_slash = name.find('/');
  if (name.substr(0, first_slash).find(':') != std::string_view::npos) {
    return refuse("it names a scheme or another host");
  }
  size_t start = 0;
  while (true) {
    size_t slash = name.find('/', start);
    std::string_view segment = name.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (segment.empty()) return refuse("it has an empty path segment");
    if (IsDotSegment(segment)) return refuse("it has a '.' or '..' segment");
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return Status::OK();
}

StatusOr<CheckpointIndex> ParseCheckpointIndex(std::string_view json, std::string_view index_name) {
  const std::string prefix = std::string(index_name) + ": ";
  // nlohmann stops at a NUL as if the input ended there.
  if (json.find('\0') != std::string_view::npos) {
    return Status::Corruption(prefix + "index is not valid JSON: it holds a NUL byte");
  }
  IndexCollector collector;
  Json root;
  try {
    root = Json::parse(
        json.begin(), json.end(),
        [&collector](int depth, Event event, Json& parsed) { return collector.OnEvent(depth, event, parsed); },
        /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const std::exception& e) {
    std::string what = e.what();
    size_t close = what.find("] ");  // drop "[json.exception.parse_error.101] "
    if (close != std::string::npos) what = what.substr(close + 2);
    std::replace(what.begin(), what.end(), '\n', ' ');
    return Status::Corruption(prefix + "index is not valid JSON: " + what);
  }
  if (!root.is_object()) return Status::Corruption(prefix + "index is " + root.type_name() + ", expected a JSON object");
  if (!collector.problem().empty()) return Status::Corruption(prefix + collector.problem());
  auto weight_map = root.find("weight_map");
  if (weight_map == root.end()) return Status::Corruption(prefix + "index has no weight_map");
  if (!weight_map->is_object()) {
    return Status::Corruption(prefix + "weight_map is " + weight_map->type_name() + ", expected an object");
  }
  CheckpointIndex index = std::move(collector.index());
  if (index.weight_map.empty()) return Status::Corruption(prefix + "weight_map is empty");
  auto metadata = root.find("metadata");
  if (metadata != root.end() && !metadata->is_null()) {
    if (!metadata->is_object()) {
      return Status::Corruption(prefix + "metadata is " + metadata->type_name() + ", expected an object");
    }
    index.metadata_json = metadata->dump();
  }
  return index;
}

StatusOr<CheckpointIndex> ReadCheckpointIndex(const ByteSource& source) {
  if (source.Size() > kMaxIndexSize) {
    return Status::Corruption(source.Describe() + ": index is " + std::to_string(source.Size()) +
                              " bytes, more than the limit of " + std::to_string(kMaxIndexSize));
  }
  std::string json(source.Size(), '\0');
  RETURN_IF_ERROR(ReadExactly(source, 0, json.size(), json.data()));
  return ParseCheckpointIndex(json, source.Describe());
}

}  // namespace stfs
