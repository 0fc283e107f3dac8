// Remote -o options and environment (see remote_source.h).
//
// Header values are secrets (tokens): error messages name the option and at
// most the header's name, never its value.
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include "core/remote/http_client.h"
#include "core/remote/remote_source.h"

namespace stfs {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Parses a decimal integer that fills `text` exactly.
bool ParseUnsigned(std::string_view text, uint64_t* value) {
  if (text.empty() || text.size() > 19) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *value = v;
  return true;
}

// Parses "4096", "64K", "4M", "1G", "4MiB", "512KB" (binary multiples).
bool ParseSize(std::string_view text, uint64_t* bytes) {
  text = Trim(text);
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  uint64_t number = 0;
  if (!ParseUnsigned(text.substr(0, digits), &number)) return false;
  std::string unit;
  for (char c : text.substr(digits))
    unit.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  int shift = 0;
  if (unit.empty() || unit == "B") {
    shift = 0;
  } else if (unit == "K" || unit == "KB" || unit == "KIB") {
    shift = 10;
  } else if (unit == "M" || unit == "MB" || unit == "MIB") {
    shift = 20;
  } else if (unit == "G" || unit == "GB" || unit == "GIB") {
    shift = 30;
  } else if (unit == "T" || unit == "TB" || unit == "TIB") {
    shift = 40;
  } else {
    return false;
  }
  if (shift > 0 && number > (std::numeric_limits<uint64_t>::max() >> shift)) return false;
  *bytes = number << shift;
  return true;
}

// Parses "250ms", "30s", "2m", or a bare number of seconds.
bool ParseDuration(std::string_view text, std::chrono::milliseconds* out) {
  text = Trim(text);
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  uint64_t number = 0;
  if (!ParseUnsigned(text.substr(0, digits), &number) || number > 1'000'000'000) return false;
  std::string_view unit = text.substr(digits);
  uint64_t ms;
  if (unit == "ms") {
    ms = number;
  } else if (unit.empty() || unit == "s") {
    ms = number * 1000;
  } else if (unit == "m" || unit == "min") {
    ms = number * 60'000;
  } else {
    return false;
  }
  *out = std::chrono::milliseconds(ms);
  return true;
}

// Checks "Name: value": a token name, no CR/LF anywhere.
bool ValidHeader(std::string_view header) {
  size_t colon = header.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  for (char c : header.substr(0, colon)) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '(' || c == ')' || c == ',' || c == '/' || c == ';' ||
        c == '<' || c == '=' || c == '>' || c == '?' || c == '@' || c == '[' || c == '\\' ||
        c == ']' || c == '{' || c == '}' || c == '"') {
      return false;
    }
  }
  return header.find_first_of("\r\n") == std::string_view::npos;
}

std::string HeaderName(std::string_view header) {
  return std::string(Trim(header.substr(0, header.find(':'))));
}

// Drops any header in `headers` named like `header` (case-insensitive).
void RemoveHeaderNamed(std::vector<std::string>* headers, const std::string& name) {
  auto same = [&](const std::string& h) { return EqualsNoCase(HeaderName(h), name); };
  std::erase_if(*headers, same);
}

Status AddHeader(std::string_view header, RemoteOptions* options) {
  header = Trim(header);
  if (!ValidHeader(header)) {
    return Status::InvalidArgument(
        "header= needs 'Name: value' with a plain header name and no line breaks");
  }
  // A later header of the same name replaces the earlier (env, then -o).
  RemoveHeaderNamed(&options->headers, HeaderName(header));
  options->headers.emplace_back(header);
  return Status::OK();
}

Status BadValue(std::string_view key, std::string_view value, std::string_view expected) {
  return Status::InvalidArgument("-o " + std::string(key) + "=" + std::string(value) +
                                 ": expected " + std::string(expected));
}

}  // namespace

bool IsRemoteLocation(std::string_view location) {
  auto starts = [&](std::string_view prefix) {
    if (location.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(location[i])) != prefix[i]) return false;
    }
    return true;
  };
  return starts("http://") || starts("https://") || starts("hf://") || starts("s3://");
}

StatusOr<bool> ApplyRemoteOption(std::string_view option, RemoteOptions* options) {
  size_t eq = option.find('=');
  std::string_view key = option.substr(0, eq);
  std::string_view value =
      eq == std::string_view::npos ? std::string_view() : option.substr(eq + 1);
  bool has_value = eq != std::string_view::npos;
  auto need_value = [&]() -> Status {
    if (!has_value) return Status::InvalidArgument("-o " + std::string(key) + " needs a value");
    return Status::OK();
  };

  auto size_option = [&](uint64_t* field, uint64_t min, uint64_t max) -> Status {
    RETURN_IF_ERROR(need_value());
    uint64_t bytes = 0;
    if (!ParseSize(value, &bytes) || bytes < min || bytes > max) {
      return BadValue(key, value,
                      "a size such as 64K, 4M or 1G, from " + std::to_string(min) + " to " +
                          std::to_string(max) + " bytes");
    }
    *field = bytes;
    return Status::OK();
  };
  auto count_option = [&](int* field, uint64_t min, uint64_t max) -> Status {
    RETURN_IF_ERROR(need_value());
    uint64_t n = 0;
    if (!ParseUnsigned(Trim(value), &n) || n < min || n > max) {
      return BadValue(key, value,
                      "a whole number from " + std::to_string(min) + " to " + std::to_string(max));
    }
    *field = static_cast<int>(n);
    return Status::OK();
  };
  auto duration_option = [&](std::chrono::milliseconds* field) -> Status {
    RETURN_IF_ERROR(need_value());
    if (!ParseDuration(value, field)) {
      return BadValue(key, value, "a duration such as 500ms, 30s or 2m");
    }
    return Status::OK();
  };

  Status status;
  if (key == "cache_size") {
    status = size_option(&options->cache_size, 1 << 20, 1ull << 40);
  } else if (key == "block_size") {
    status = size_option(&options->block_size, 64 << 10, 256 << 20);
  } else if (key == "readahead") {
    status = size_option(&options->readahead, 0, 1ull << 40);
  } else if (key == "request_cost") {
    status = size_option(&options->request_cost, 0, 1ull << 40);
  } else if (key == "connections") {
    status = count_option(&options->connections, 1, 64);
  } else if (key == "retries") {
    status = count_option(&options->retries, 0, 100);
  } else if (key == "max_redirects") {
    status = count_option(&options->max_redirects, 0, 20);
  } else if (key == "retry_delay") {
    status = duration_option(&options->retry_delay);
  } else if (key == "retry_max_delay") {
    status = duration_option(&options->retry_max_delay);
  } else if (key == "connect_timeout") {
    status = duration_option(&options->connect_timeout);
  } else if (key == "min_speed") {
    status = size_option(&options->min_speed, 0, 1ull << 40);
  } else if (key == "stall_timeout" || key == "min_speed_time") {
    status = duration_option(&options->stall_timeout);
    if (status.ok() && options->stall_timeout.count() == 0) {
      status = BadValue(key, value, "a duration above zero");
    }
  } else if (key == "timeout") {
    status = duration_option(&options->timeout);
    if (status.ok() && options->timeout.count() == 0) {
      status = BadValue(key, value, "a duration above zero");
    }
  } else if (key == "header") {
    status = need_value();
    if (status.ok()) status = AddHeader(value, options);
  } else if (key == "cafile" || key == "ca_file") {
    status = need_value();
    if (status.ok() && value.empty()) status = BadValue(key, value, "a file path");
    if (status.ok()) options->ca_file = std::string(value);
  } else if (key == "hf_endpoint") {
    status = need_value();
    if (status.ok() && value.substr(0, 7) != "http://" && value.substr(0, 8) != "https://") {
      status = BadValue(key, value, "an http:// or https:// URL");
    }
    if (status.ok()) options->hub_endpoint = std::string(value);
  } else if (key == "endpoint") {
    status = need_value();
    if (status.ok() && value.substr(0, 7) != "http://" && value.substr(0, 8) != "https://") {
      status = BadValue(key, value, "an http:// or https:// URL");
    }
    if (status.ok()) options->s3.url = std::string(value);
  } else if (key == "region") {
    status = need_value();
    if (status.ok() && value.empty()) status = BadValue(key, value, "a region such as eu-west-1");
    if (status.ok()) options->s3.region = std::string(value);
  } else if (key == "addressing") {
    status = need_value();
    if (status.ok()) {
      StatusOr<S3Addressing> addressing = ParseS3Addressing(value);
      if (addressing.ok()) options->s3.addressing = *addressing;
      else status = BadValue(key, value, "auto, path or virtual");
    }
  } else if (key == "profile") {
    status = need_value();
    if (status.ok() && value.empty()) status = BadValue(key, value, "a profile name");
    if (status.ok()) options->s3_profile = std::string(value);
  } else if (key == "no_sign") {
    if (has_value) return Status::InvalidArgument("-o no_sign takes no value");
    options->s3_no_sign = true;
  } else if (key == "user_agent") {
    status = need_value();
    if (status.ok()) options->user_agent = std::string(value);
  } else {
    return false;
  }
  if (!status.ok()) return status;
  return true;
}

void ApplyRemoteEnvironment(RemoteOptions* options) {
  // s3://: -o endpoint= and region= (parsed before this runs) win.
  auto first_set = [](std::initializer_list<const char*> names) -> std::string {
    for (const char* name : names) {
      if (const char* v = std::getenv(name); v && *v) return v;
    }
    return "";
  };
  if (options->s3.url.empty()) options->s3.url = first_set({"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"});
  if (options->s3.region.empty()) options->s3.region = first_set({"AWS_REGION", "AWS_DEFAULT_REGION"});
  if (const char* endpoint = std::getenv("HF_ENDPOINT"); endpoint && *endpoint) {
    options->hub_endpoint = endpoint;
  }
  const char* token = std::getenv("HF_TOKEN");
  if (!token || !*token) token = std::getenv("HUGGING_FACE_HUB_TOKEN");
  if (token && *token) {
    options->hub_token = std::string(Trim(token));
  } else {
    // huggingface_hub's login stores the token in a file; use it the same way.
    std::string path;
    if (const char* p = std::getenv("HF_TOKEN_PATH"); p && *p) {
      path = p;
    } else if (const char* home = std::getenv("HF_HOME"); home && *home) {
      path = std::string(home) + "/token";
    } else if (const char* user_home = std::getenv("HOME"); user_home && *user_home) {
      path = std::string(user_home) + "/.cache/huggingface/token";
    }
    if (!path.empty()) {
      std::ifstream in(path);
      std::string line;
      if (in && std::getline(in, line)) options->hub_token = std::string(Trim(line));
    }
  }
  if (const char* headers = std::getenv("STFS_HTTP_HEADER"); headers && *headers) {
    std::string_view rest(headers);
    while (!rest.empty()) {
      size_t nl = rest.find('\n');
      std::string_view line = Trim(rest.substr(0, nl));
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
      if (line.empty()) continue;
      Status s = AddHeader(line, options);
      if (!s.ok()) {
        fprintf(stderr, "stfs: ignoring a malformed header in STFS_HTTP_HEADER: %s\n",
                s.message().c_str());
      }
    }
  }
}

std::string RemoteOptionsHelp() {
  return "Remote sources (http://, https://, hf://ORG/REPO/FILE[@REV]) accept:\n"
         "    -o cache_size=SIZE       block cache budget for the mount (default 256M)\n"
         "    -o block_size=SIZE       cache block and read-ahead request size (default 4M)\n"
         "    -o readahead=SIZE        most bytes fetched ahead of a sequential reader\n"
         "                             (default 64M, at most cache_size/2; 0 = off)\n"
         "    -o connections=N         read-ahead transfers in flight (default 4)\n"
         "    -o request_cost=SIZE     bytes one request is worth when a slice or part\n"
         "                             read weighs whole blocks against exact runs\n"
         "                             (default 256K; 0 = always exact)\n"
         "    -o retries=N             retries for 5xx, resets, timeouts, stalls (default 5)\n"
         "    -o retry_delay=TIME      first backoff, doubled per retry (default 200ms)\n"
         "    -o retry_max_delay=TIME  longest backoff (default 10s)\n"
         "    -o connect_timeout=TIME  (default 10s)\n"
         "    -o timeout=TIME          deadline of one read, retries and redirects included;\n"
         "                             then EIO (default 60s)\n"
         "    -o min_speed=SIZE        abort and retry a transfer slower than SIZE bytes/s\n"
         "                             over stall_timeout (default 1K; 0 = off)\n"
         "    -o stall_timeout=TIME    the window of min_speed, whole seconds (default 30s)\n"
         "    -o max_redirects=N       redirects per request (default 5)\n"
         "    -o header='Name: value'  extra request header, repeatable; sent only to the\n"
         "                             location's own host (prefer STFS_HTTP_HEADER for tokens)\n"
         "    -o cafile=PATH           CA bundle for TLS verification\n"
         "    -o hf_endpoint=URL       hub for hf:// (default https://huggingface.co)\n"
         "  s3://BUCKET/KEY and s3://BUCKET/PREFIX/ (SigV4-signed) also accept:\n"
         "    -o endpoint=URL          S3 endpoint (default https://s3.REGION.amazonaws.com)\n"
         "    -o region=NAME           signing region (default us-east-1)\n"
         "    -o addressing=MODE       auto (path-style for IP/localhost endpoints), path,\n"
         "                             or virtual (BUCKET.HOST)\n"
         "    -o profile=NAME          profile of ~/.aws/credentials, else its credential_process\n"
         "                             in ~/.aws/config\n"
         "    -o no_sign               anonymous requests (public buckets)\n"
         "  Environment: HF_TOKEN (Bearer token for hf://), HF_ENDPOINT, STFS_HTTP_HEADER\n"
         "  (headers, one 'Name: value' per line); AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,\n"
         "  AWS_SESSION_TOKEN, AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE, AWS_ENDPOINT_URL,\n"
         "  AWS_REGION; without keys there: web identity (AWS_WEB_IDENTITY_TOKEN_FILE,\n"
         "  AWS_ROLE_ARN), the profile's credential_process, the container\n"
         "  (AWS_CONTAINER_CREDENTIALS_*) or EC2 instance role (IMDSv2), refreshed before\n"
         "  they expire. SIZE: 4096, 64K, 4M, 1G. TIME: 500ms, 30s, 2m.\n";
}

}  // namespace stfs
