// Catalogue building: shards opened and their headers read on a bounded
// pool of threads, then one pass over every shard's tensors against hash
// maps of weight_map, so the work is linear in the number of tensors.
#include "core/catalogue.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <system_error>
#include <thread>

namespace stfs {
namespace {

// A shard opened and its header read, or the reason it could not be.
struct ReadShard {
  std::unique_ptr<ByteSource> source;
  std::optional<Header> header;
  Status status;
};

// Opens each of `names` and reads its header on at most
// options.parallel_shard_reads threads. Stops starting new shards after the
// first failure; returns the failure of the lowest-numbered shard that failed.
StatusOr<std::vector<ReadShard>> ReadShardsInParallel(const std::vector<std::string>& names,
                                                      std::string_view index_name, const ShardOpener& open,
                                                      const CatalogueOptions& options) {
  std::vector<ReadShard> shards(names.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i = next++; i < names.size() && !failed; i = next++) {
      ReadShard& shard = shards[i];
      try {
        StatusOr<std::unique_ptr<ByteSource>> source = open(names[i]);
        if (!source.ok()) {
          shard.status = Status(source.status()).WithContext(
              std::string(index_name) + ": shard " + QuotedName(names[i]) + " cannot be opened");
        } else {
          shard.source = std::move(*source);
          StatusOr<Header> header = ReadHeader(*shard.source);
          if (header.ok()) shard.header = std::move(*header); else shard.status = header.status();
        }
      } catch (const std::exception& e) {
        shard.status = Status::Internal(std::string(index_name) + ": shard " + QuotedName(names[i]) + ": " + e.what());
      }
      if (!shard.status.ok()) failed = true;
    }
  };
  size_t thread_count = std::min<size_t>(names.size(), std::max(1, options.parallel_shard_reads));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < thread_count; ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: the ones running (and this one) finish the work
    }
  }
  work();
  for (std::thread& thread : threads) thread.join();
  for (ReadShard& shard : shards) {
    if (!shard.status.ok()) return shard.status;
  }
  return shards;
}

// Moves a read shard's source and header facts into a CatalogueShard; the
// header's tensors stay in `header` for the caller.
CatalogueShard MakeShard(std::string name, std::unique_ptr<ByteSource> source, const Header& header) {
  CatalogueShard shard;
  shard.name = std::move(name);
  shard.source = std::move(source);
  shard.header_size = header.header_size;
  shard.file_size = header.file_size;
  shard.metadata_json = header.MetadataJson();
  shard.has_metadata = header.has_metadata;
  return shard;
}

}  // namespace

const CatalogueTensor* Catalogue::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

void Catalogue::BuildNameIndex() {
  by_name_.clear();
  by_name_.reserve(tensors_.size());
  for (uint32_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].info.name, i);
}

Catalogue Catalogue::FromHeader(std::unique_ptr<ByteSource> source, Header header) {
  Catalogue catalogue;
  catalogue.source_name_ = source->Describe();
  catalogue.metadata_json_ = header.MetadataJson();
  std::string name = source->Describe();
  catalogue.shards_.push_back(MakeShard(std::move(name), std::move(source), header));
  catalogue.tensors_.reserve(header.tensors.size());
  for (TensorInfo& info : header.tensors) catalogue.tensors_.push_back({std::move(info), 0});
  catalogue.BuildNameIndex();
  return catalogue;
}

StatusOr<Catalogue> Catalogue::FromFile(std::unique_ptr<ByteSource> source) {
  ASSIGN_OR_RETURN(Header header, ReadHeader(*source));
  return FromHeader(std::move(source), std::move(header));
}

StatusOr<Catalogue> Catalogue::FromIndex(CheckpointIndex index, std::string index_name, const ShardOpener& open,
                                         const CatalogueOptions& options) {
  const std::string prefix = index_name + ": ";
  for (const std::string& shard : index.shard_names) {
    Status valid = ValidateShardName(shard);
    if (!valid.ok()) return Status::InvalidArgument(prefix + valid.message());
  }
  ASSIGN_OR_RETURN(std::vector<ReadShard> read, ReadShardsInParallel(index.shard_names, index_name, open, options));

  // weight_map position of each tensor name.
  std::unordered_map<std::string_view, uint32_t> position;
  position.reserve(index.weight_map.size());
  for (uint32_t i = 0; i < index.weight_map.size(); ++i) position.emplace(index.weight_map[i].tensor, i);

  Catalogue catalogue;
  catalogue.source_name_ = index_name;
  catalogue.sharded_ = true;
  catalogue.metadata_json_ = index.metadata_json;
  catalogue.tensors_.resize(index.weight_map.size());
  std::vector<bool> found(index.weight_map.size(), false);
  for (uint32_t s = 0; s < read.size(); ++s) {
    const std::string& shard_name = index.shard_names[s];
    for (TensorInfo& info : read[s].header->tensors) {
      auto it = position.find(info.name);
      if (it == position.end()) {
        return Status::Corruption(prefix + "shard " + QuotedName(shard_name) + " holds tensor " + QuotedName(info.name) +
                                  ", which weight_map lacks");
      }
      uint32_t i = it->second;
      if (found[i]) {
        return Status::Corruption(prefix + "tensor " + QuotedName(info.name) + " is in two shards: " +
                                  QuotedName(index.shard_names[catalogue.tensors_[i].shard]) + " and " + QuotedName(shard_name));
      }
      found[i] = true;
      catalogue.tensors_[i] = {std::move(info), s};
    }
  }
  for (uint32_t i = 0; i < index.weight_map.size(); ++i) {
    const CheckpointIndex::Entry& entry = index.weight_map[i];
    if (found[i] && catalogue.tensors_[i].shard == entry.shard) continue;
    std::string problem = prefix + "weight_map puts tensor " + QuotedName(entry.tensor) + " in shard " +
                          QuotedName(index.shard_names[entry.shard]) + ", which lacks it";
    if (found[i]) problem += " (it is in shard " + QuotedName(index.shard_names[catalogue.tensors_[i].shard]) + ")";
    return Status::Corruption(problem);
  }
  catalogue.shards_.reserve(read.size());
  for (uint32_t s = 0; s < read.size(); ++s) {
    catalogue.shards_.push_back(MakeShard(index.shard_names[s], std::move(read[s].source), *read[s].header));
  }
  catalogue.BuildNameIndex();
  return catalogue;
}

StatusOr<Catalogue> Catalogue::FromShards(const std::vector<std::string>& shard_names, std::string source_name,
                                          const ShardOpener& open, const CatalogueOptions& options) {
  if (shard_names.empty()) return Status::NotFound(source_name + ": no .safetensors file");
  ASSIGN_OR_RETURN(std::vector<ReadShard> read, ReadShardsInParallel(shard_names, source_name, open, options));
  Catalogue catalogue;
  catalogue.source_name_ = std::move(source_name);
  catalogue.sharded_ = true;
  size_t total = 0;
  for (const ReadShard& shard : read) total += shard.header->tensors.size();
  catalogue.tensors_.reserve(total);
  std::unordered_map<std::string_view, uint32_t> owner;  // views into the headers, alive until return
  owner.reserve(total);
  for (uint32_t s = 0; s < read.size(); ++s) {
    for (const TensorInfo& info : read[s].header->tensors) {
      auto [it, inserted] = owner.emplace(info.name, s);
      if (!inserted) {
        return Status::Corruption(catalogue.source_name_ + ": tensor " + QuotedName(info.name) + " is in two shards: " +
                                  QuotedName(shard_names[it->second]) + " and " + QuotedName(shard_names[s]));
      }
    }
  }
  for (uint32_t s = 0; s < read.size(); ++s) {
    // `owner` is done with; moving the names out is safe now.
    for (TensorInfo& info : read[s].header->tensors) catalogue.tensors_.push_back({std::move(info), s});
    catalogue.shards_.push_back(MakeShard(shard_names[s], std::move(read[s].source), *read[s].header));
  }
  catalogue.BuildNameIndex();
  return catalogue;
}

StatusOr<Catalogue> Catalogue::FromRepository(const std::string& repository_name, const ShardOpener& open,
                                              const CatalogueOptions& options) {
  const std::string index_name = "model.safetensors.index.json";
  StatusOr<std::unique_ptr<ByteSource>> index_source = open(index_name);
  if (index_source.ok()) {
    ASSIGN_OR_RETURN(CheckpointIndex index, ReadCheckpointIndex(**index_source));
    return FromIndex(std::move(index), (*index_source)->Describe(), open, options);
  }
  if (index_source.status().code() != StatusCode::kNotFound) return index_source.status();
  StatusOr<std::unique_ptr<ByteSource>> single = open("model.safetensors");
  if (!single.ok()) {
    if (single.status().code() != StatusCode::kNotFound) return single.status();
    return Status::NotFound(repository_name + ": holds neither " + index_name + " nor model.safetensors");
  }
  return FromFile(std::move(*single));
}

ShardOpener LocalShardOpener(std::string directory) {
  return [directory = std::move(directory)](const std::string& name) {
    return OpenLocalFile(directory.empty() ? name : directory + "/" + name);
  };
}

namespace {

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

StatusOr<Catalogue> OpenLocalIndex(const std::string& index_path, const std::string& directory,
                                   const CatalogueOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> index_source, OpenLocalFile(index_path));
  ASSIGN_OR_RETURN(CheckpointIndex index, ReadCheckpointIndex(*index_source));
  return Catalogue::FromIndex(std::move(index), index_path, LocalShardOpener(directory), options);
}

StatusOr<Catalogue> OpenLocalDirectory(const std::string& directory, const CatalogueOptions& options) {
  namespace fs = std::filesystem;
  std::error_code error;
  std::vector<std::string> indexes, shards;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    std::string name = it->path().filename().string();
    std::error_code kind_error;
    if (!it->is_regular_file(kind_error)) continue;  // follows symlinks (the Hugging Face cache uses them)
    if (EndsWith(name, ".safetensors.index.json")) indexes.push_back(name);
    else if (EndsWith(name, ".safetensors")) shards.push_back(name);
  }
  if (error) return StatusFromErrno(error.value(), directory);
  std::sort(indexes.begin(), indexes.end());
  if (indexes.size() > 1) {
    return Status::InvalidArgument(directory + ": holds " + std::to_string(indexes.size()) +
                                   " index files (" + indexes[0] + ", " + indexes[1] +
                                   (indexes.size() > 2 ? ", ..." : "") + "); name the one to mount");
  }
  if (indexes.size() == 1) return OpenLocalIndex(directory + "/" + indexes[0], directory, options);
  if (shards.empty()) return Status::NotFound(directory + ": holds no .safetensors file and no .safetensors.index.json");
  std::sort(shards.begin(), shards.end());
  return Catalogue::FromShards(shards, directory, LocalShardOpener(directory), options);
}

}  // namespace

StatusOr<Catalogue> OpenLocalCatalogue(const std::string& path, const CatalogueOptions& options) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return StatusFromErrno(errno, path);
  if (S_ISDIR(info.st_mode)) return OpenLocalDirectory(path, options);
  if (EndsWith(path, ".index.json")) {
    size_t slash = path.rfind('/');
    std::string directory = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    return OpenLocalIndex(path, directory, options);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenLocalFile(path));
  return Catalogue::FromFile(std::move(source));
}

}  // namespace stfs
