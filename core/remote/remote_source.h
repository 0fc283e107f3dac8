// The remote byte source: a safetensors object read over HTTP Range requests.
//
// This is the only header the filesystem and the command line include from
// stfs::remote. A remote source behaves like a local file (ByteSource) but
// reads through a block cache with read-ahead, checks every response against
// the object it first saw (ETag / Last-Modified, size), and retries transient
// failures. It must never return bytes of two versions of one object, and it
// must never print request headers (tokens) in a message or a log line.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/byte_source.h"
#include "core/remote/s3_list.h"
#include "core/remote/s3_location.h"
#include "core/status.h"

namespace stfs {

class BlockCache;

struct RemoteOptions {
  // Memory for cached blocks, shared by every source opened with the same
  // `cache` (one mount = one budget). Blocks being fetched count too.
  uint64_t cache_size = 256ull << 20;
  // Cache unit; also the size of each read-ahead request. Aligned in the object.
  uint64_t block_size = 4ull << 20;
  // Most bytes fetched ahead of a sequential reader (0 disables read-ahead).
  // Capped at half of cache_size.
  uint64_t readahead = 64ull << 20;
  // Read-ahead transfers in flight at once (demand reads come on top).
  int connections = 4;
  // What one request costs, in bytes, when a gathered read (a slice, a rank
  // part) weighs fetching whole cache blocks against fetching its runs
  // exactly (http_range_runs.cc). 256K: a GET's fixed cost is about what one
  // connection moves during its first-byte latency (S3: 20-50 ms at 5-15
  // MB/s per stream; less on a LAN), and S3 prices each request; with 4M
  // blocks a block is then fetched whole only where it saves some 16
  // requests. 0: always exact (fewest bytes, a request per distant run).
  uint64_t request_cost = 256ull << 10;
  // Retries after the first attempt, for 5xx, resets, timeouts and stalls.
  int retries = 5;
  // First backoff; doubles per retry up to retry_max_delay, with jitter.
  std::chrono::milliseconds retry_delay{200};
  std::chrono::milliseconds retry_max_delay{10'000};
  std::chrono::milliseconds connect_timeout{10'000};
  // Deadline of one read (a ReadAt, or opening the object): every attempt,
  // backoff and redirect included. A read that cannot finish in time fails
  // with IOError (EIO in a mount).
  std::chrono::milliseconds timeout{60'000};
  // A transfer slower than min_speed bytes/s over stall_timeout (the speed
  // window, whole seconds) is aborted and retried; 0 disables the check.
  uint64_t min_speed = 1024;
  std::chrono::milliseconds stall_timeout{30'000};
  int max_redirects = 5;
  // Extra request headers, "Name: value". Sent only to the origin (scheme,
  // host, port) of the location itself, never to a redirect target elsewhere.
  std::vector<std::string> headers;
  // CA bundle for TLS verification (verification is always on).
  std::string ca_file;
  // Hub endpoint for hf:// locations and its token (sent as Bearer).
  std::string hub_endpoint = "https://huggingface.co";
  std::string hub_token;
  std::string user_agent = "stfs/0.1";
  // s3:// locations: endpoint, region and addressing (-o endpoint=, region=,
  // addressing=; AWS_ENDPOINT_URL, AWS_REGION), the credentials profile
  // (-o profile=) and anonymous access (-o no_sign). Keys come from the
  // chain of s3_credential_provider.h, never from options.
  S3Endpoint s3;
  std::string s3_profile;
  bool s3_no_sign = false;
  // Optional cache shared between sources (e.g. the shards of one mount);
  // null: the source makes its own with cache_size.
  std::shared_ptr<BlockCache> cache;
  // Fault injection for tests: called before each block fetch with its
  // offset and length; may throw.
  std::function<void(uint64_t, uint64_t)> before_fetch_for_tests;
};

// True for http://, https://, hf:// and s3:// locations.
bool IsRemoteLocation(std::string_view location);

// Applies one FUSE-style -o option ("cache_size=512M", "header=Name: value").
// Returns true when consumed, false when it is not a remote option, and
// InvalidArgument when it is one but malformed (never echoing header values).
StatusOr<bool> ApplyRemoteOption(std::string_view option, RemoteOptions* options);

// Fills options from the environment: HF_TOKEN (else the token file of
// huggingface_hub), HF_ENDPOINT, and STFS_HTTP_HEADER (one "Name: value" per
// line, kept out of the process list unlike -o header=).
void ApplyRemoteEnvironment(RemoteOptions* options);

// Returns the help paragraph that lists the remote -o options.
std::string RemoteOptionsHelp();

// Makes a block cache with a budget of `budget_bytes`, for RemoteOptions::cache.
std::shared_ptr<BlockCache> MakeBlockCache(uint64_t budget_bytes);

// Opens the object at `location`. The first request asks for bytes
// 0..99,999 and keeps them, so reading the safetensors header costs one
// request when 8+N <= 100,000 and one more (exactly the missing header
// bytes) otherwise. The returned source is thread-safe; its Size() is the
// total from Content-Range; Describe() is the location without credentials
// or query string; StatsJson() is documented in docs/REMOTE.md.
StatusOr<std::unique_ptr<ByteSource>> OpenRemoteSource(const std::string& location,
                                                       const RemoteOptions& options);

// Lists an s3://BUCKET/PREFIX/ location (ListObjectsV2, signed like the
// reads) and chooses what it holds as a checkpoint, names relative to the
// prefix: its index, else its .safetensors shards, sorted (docs/REMOTE.md
// "s3://"). Open each as location + name with OpenRemoteSource. NotFound
// when it holds neither.
StatusOr<S3PrefixContents> ListS3Checkpoint(const std::string& location, const RemoteOptions& options);

}  // namespace stfs
