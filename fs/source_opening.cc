// OpenCatalogue: local paths through core/catalogue (OpenLocalCatalogue),
// remote ones through core/remote:
//   - URL or hf:// or s3:// location of a `*.index.json`: the index, its
//     shards at the index's base location;
//   - hf://[TYPE/]ORG/REPO[@REV] (no file part): the repository
//     (Catalogue::FromRepository);
//   - s3://BUCKET/PREFIX/ (ends in '/'): what ListS3Checkpoint chooses;
//   - any other location: one safetensors object.
// Every shard of one mount is opened with the same RemoteOptions::cache, so
// the whole mount has one block-cache budget (cache_size), not one per shard.
#include "fs/source_opening.h"

#include <string>
#include <string_view>

#ifdef STFS_HAVE_REMOTE
#include "core/remote/remote_source.h"
#endif

namespace stfs {
namespace {

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

#ifdef STFS_HAVE_REMOTE

// A model repository named without a file: hf://[datasets/|spaces/]ORG/REPO[@REV].
// Sets `repo_location` to "hf://[TYPE/]ORG/REPO/" and `revision_suffix` to
// "@REV" (or ""). The revision may itself hold '/' (refs/pr/1).
bool ParseHubRepository(std::string_view location, std::string* repo_location, std::string* revision_suffix) {
  constexpr std::string_view kScheme = "hf://";
  if (location.substr(0, kScheme.size()) != kScheme) return false;
  std::string_view rest = location.substr(kScheme.size());
  std::string type;
  for (std::string_view prefix : {"datasets/", "spaces/"}) {
    if (rest.substr(0, prefix.size()) == prefix) {
      type = prefix;
      rest.remove_prefix(prefix.size());
    }
  }
  size_t at = rest.find('@');
  std::string_view repo = rest.substr(0, at);
  size_t slash = repo.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == repo.size() ||
      repo.find('/', slash + 1) != std::string_view::npos) {
    return false;  // not ORG/REPO alone: a file inside a repository
  }
  *repo_location = std::string(kScheme) + type + std::string(repo) + "/";
  *revision_suffix = at == std::string_view::npos ? std::string() : std::string(rest.substr(at));
  return true;
}

// Opens shards as `base` + NAME + `suffix`, all sharing `options.cache`.
ShardOpener RemoteShardOpener(std::string base, std::string suffix, RemoteOptions options) {
  return [base = std::move(base), suffix = std::move(suffix), options = std::move(options)](const std::string& name) {
    return OpenRemoteSource(base + name + suffix, options);
  };
}

StatusOr<Catalogue> OpenRemoteCatalogue(const std::string& location, RemoteOptions options) {
  if (options.cache == nullptr) options.cache = MakeBlockCache(options.cache_size);
  std::string repo_location, revision;
  if (ParseHubRepository(location, &repo_location, &revision)) {
    return Catalogue::FromRepository(location, RemoteShardOpener(repo_location, revision, options));
  }
  if (location.rfind("s3://", 0) == 0 && EndsWith(location, "/")) {
    ASSIGN_OR_RETURN(S3PrefixContents contents, ListS3Checkpoint(location, options));
    ShardOpener open = RemoteShardOpener(location, "", options);
    if (contents.index_name.empty()) return Catalogue::FromShards(contents.shard_names, location, open);
    ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> index_source, open(contents.index_name));
    ASSIGN_OR_RETURN(CheckpointIndex index, ReadCheckpointIndex(*index_source));
    return Catalogue::FromIndex(std::move(index), index_source->Describe(), open);
  }
  // hf://ORG/REPO/dir/x.index.json@REV: shards at hf://ORG/REPO/dir/NAME@REV.
  std::string path = location, suffix;
  if (location.rfind("hf://", 0) == 0) {
    size_t at = location.rfind('@');
    if (at != std::string::npos && at > location.rfind('/')) {
      path = location.substr(0, at);
      suffix = location.substr(at);
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> source, OpenRemoteSource(location, options));
  if (!EndsWith(path, ".index.json")) return Catalogue::FromFile(std::move(source));
  ASSIGN_OR_RETURN(CheckpointIndex index, ReadCheckpointIndex(*source));
  // Shard names are relative to the index's directory (ValidateShardName
  // keeps them there); a query string would follow the name, so an index
  // URL with one is read but its shards are joined without it.
  std::string base = path.substr(0, path.find_first_of("?#"));
  base = base.substr(0, base.rfind('/') + 1);
  return Catalogue::FromIndex(std::move(index), source->Describe(), RemoteShardOpener(base, suffix, options));
}

#endif  // STFS_HAVE_REMOTE

}  // namespace

StatusOr<Catalogue> OpenCatalogue(const CommandLine& cl) {
#ifdef STFS_HAVE_REMOTE
  if (IsRemoteLocation(cl.source)) return OpenRemoteCatalogue(cl.source, cl.remote);
#endif
  if (cl.source.find("://") != std::string::npos) {
    return Status::NotSupported(cl.source + ": remote sources are not supported by this build");
  }
  return OpenLocalCatalogue(cl.source);
}

}  // namespace stfs
