// ListObjectsV2 pagination and the choice of a prefix's objects (see s3_list.h).
#include "core/remote/s3_list.h"

#include <algorithm>
#include <unordered_set>

#include "core/remote/remote_location.h"

namespace stfs {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string S3ListQuery(std::string_view prefix, std::string_view continuation_token, int page_size) {
  std::string query;
  if (!continuation_token.empty()) {
    query += "continuation-token=" + PercentEncode(continuation_token, /*keep_slash=*/false) + "&";
  }
  query += "delimiter=%2F&list-type=2&";
  if (page_size > 0) query += "max-keys=" + std::to_string(page_size) + "&";
  query += "prefix=" + PercentEncode(prefix, /*keep_slash=*/false);
  return query;
}

StatusOr<std::string> S3ListUrl(const S3Endpoint& endpoint, std::string_view bucket,
                                std::string_view prefix, std::string_view continuation_token,
                                int page_size) {
  ASSIGN_OR_RETURN(std::string url, S3ObjectUrl(endpoint, bucket, ""));
  return url + "?" + S3ListQuery(prefix, continuation_token, page_size);
}

StatusOr<std::vector<S3Object>> ListS3Prefix(const S3Endpoint& endpoint, std::string_view bucket,
                                             std::string_view prefix, const S3PageGetter& get,
                                             const S3ListLimits& limits) {
  std::string where = "s3://" + std::string(bucket) + "/" + std::string(prefix);
  std::vector<S3Object> objects;
  size_t entries = 0;
  std::unordered_set<std::string> tokens_seen;
  std::string token;
  do {
    ASSIGN_OR_RETURN(std::string url, S3ListUrl(endpoint, bucket, prefix, token, limits.page_size));
    StatusOr<std::string> body = get(url);
    if (!body.ok()) return body.status().WithContext("listing " + where);
    StatusOr<S3ListPage> page = ParseS3ListPage(*body);
    if (!page.ok()) return page.status().WithContext("listing " + where);
    entries += page->objects.size() + page->common_prefixes.size();
    if (entries > limits.max_entries) {
      return Status::ResourceExhausted("listing " + where + ": more than " + std::to_string(limits.max_entries) +
                                       " objects and sub-prefixes");
    }
    for (S3Object& object : page->objects) objects.push_back(std::move(object));
    token = page->truncated ? page->next_continuation_token : "";
    if (!token.empty() && !tokens_seen.insert(token).second) {
      return Status::Corruption("listing " + where + ": the server repeated a continuation token");
    }
  } while (!token.empty());
  return objects;
}

StatusOr<S3PrefixContents> ChooseS3PrefixContents(std::string_view prefix,
                                                  const std::vector<S3Object>& objects) {
  constexpr std::string_view kIndexSuffix = ".safetensors.index.json";
  constexpr std::string_view kDefaultIndex = "model.safetensors.index.json";
  std::vector<std::string> indexes;
  S3PrefixContents contents;
  for (const S3Object& object : objects) {
    std::string_view key = object.key;
    if (key.substr(0, prefix.size()) != prefix) continue;
    std::string_view name = key.substr(prefix.size());
    if (name.empty() || name.find('/') != std::string_view::npos) continue;
    if (EndsWith(name, kIndexSuffix) && name.size() > kIndexSuffix.size()) {
      indexes.emplace_back(name);
    } else if (EndsWith(name, ".safetensors") && name.size() > 12) {
      contents.shard_names.emplace_back(name);
    }
  }
  if (indexes.size() == 1) {
    contents.index_name = indexes.front();
  } else if (std::find(indexes.begin(), indexes.end(), kDefaultIndex) != indexes.end()) {
    contents.index_name = std::string(kDefaultIndex);
  } else if (indexes.size() > 1) {
    std::sort(indexes.begin(), indexes.end());
    return Status::InvalidArgument("several indexes under the prefix (" + indexes[0] + ", " + indexes[1] +
                                   ", ...): name one of them");
  }
  if (!contents.index_name.empty()) {
    contents.shard_names.clear();
    return contents;
  }
  if (contents.shard_names.empty()) {
    return Status::NotFound("no *.safetensors.index.json and no *.safetensors object directly under the prefix");
  }
  std::sort(contents.shard_names.begin(), contents.shard_names.end());
  return contents;
}

}  // namespace stfs
