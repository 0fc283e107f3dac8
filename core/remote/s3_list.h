// Listing an S3 prefix (ListObjectsV2) and choosing what a prefix means as a
// checkpoint: its index, else its .safetensors objects.
//
// The HTTP exchange itself is the caller's (an S3PageGetter): this file builds
// the request URLs, follows continuation tokens, bounds the work, and picks
// objects. Only objects directly under the prefix count, never those in
// sub-"directories" (the request asks for delimiter '/', and the choice checks
// again).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/remote/s3_location.h"
#include "core/remote/s3_xml.h"
#include "core/status.h"

namespace stfs {

// Returns the canonical (sorted, SigV4-encoded) query of one ListObjectsV2
// page: [continuation-token=T&]delimiter=%2F&list-type=2[&max-keys=N]&prefix=P
// (max-keys when `page_size` > 0). libcurl signs the query as written, so it
// must already be in canonical order.
std::string S3ListQuery(std::string_view prefix, std::string_view continuation_token, int page_size = 0);

// Returns the URL of one ListObjectsV2 page of `bucket`.
StatusOr<std::string> S3ListUrl(const S3Endpoint& endpoint, std::string_view bucket,
                                std::string_view prefix, std::string_view continuation_token,
                                int page_size = 0);

// Fetches the body of a 2xx answer to a GET of `url` (signed as the caller
// sees fit), or an error that names what went wrong.
using S3PageGetter = std::function<StatusOr<std::string>(const std::string& url)>;

// Lists the objects directly under `prefix` (a key ending in '/' or "") of
// `bucket`, page after page. ResourceExhausted beyond `limits.max_entries`
// objects and sub-prefixes; Corruption when a page repeats a continuation token.
struct S3ListLimits {
  size_t max_entries = 100'000;
  int page_size = 0;  // max-keys; 0: the server's default (1000 on AWS)
};
StatusOr<std::vector<S3Object>> ListS3Prefix(const S3Endpoint& endpoint, std::string_view bucket,
                                             std::string_view prefix, const S3PageGetter& get,
                                             const S3ListLimits& limits = {});

// What a prefix holds as a checkpoint. Names are relative to the prefix.
struct S3PrefixContents {
  std::string index_name;                // "" when there is no index
  std::vector<std::string> shard_names;  // sorted; empty when there is an index
};

// Chooses from `objects` (keys under `prefix`): the one *.safetensors.index.json
// directly under it (model.safetensors.index.json when there are several),
// else every *.safetensors directly under it. NotFound when neither exists;
// InvalidArgument when several indexes and none is model.safetensors.index.json.
StatusOr<S3PrefixContents> ChooseS3PrefixContents(std::string_view prefix,
                                                  const std::vector<S3Object>& objects);

}  // namespace stfs
