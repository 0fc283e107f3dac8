// s3:// parsing, bucket rules and request URLs (see s3_location.h).
#include "core/remote/s3_location.h"

#include <arpa/inet.h>

#include <cctype>

#include "core/remote/http_client.h"
#include "core/remote/remote_location.h"

namespace stfs {
namespace {

constexpr std::string_view kScheme = "s3://";
constexpr std::string_view kDefaultRegion = "us-east-1";

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool IsIpv4(std::string_view host) {
  in_addr addr{};
  return ::inet_pton(AF_INET, std::string(host).c_str(), &addr) == 1;
}

// An endpoint split into "scheme://", host, ":port" and base path.
struct EndpointParts {
  std::string scheme;  // "http" or "https"
  std::string host;    // as written; "[...]" kept for IPv6
  std::string port;    // "" or ":PORT"
  std::string base;    // "" or "/path" without trailing '/'
};

StatusOr<EndpointParts> SplitEndpoint(const S3Endpoint& endpoint) {
  EndpointParts parts;
  if (endpoint.url.empty()) {
    parts.scheme = "https";
    parts.host = "s3." + S3Region(endpoint) + ".amazonaws.com";
    return parts;
  }
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("endpoint " + RedactUrl(endpoint.url) + ": " + why +
                                   " (expected http(s)://HOST[:PORT])");
  };
  std::string_view url = endpoint.url;
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) return bad("no scheme");
  std::string_view scheme = url.substr(0, sep);
  if (EqualsNoCase(scheme, "http")) {
    parts.scheme = "http";
  } else if (EqualsNoCase(scheme, "https")) {
    parts.scheme = "https";
  } else {
    return bad("scheme is not http or https");
  }
  std::string_view rest = url.substr(sep + 3);
  if (rest.find_first_of("?#@") != std::string_view::npos) {
    return bad("query, fragment or user@ not allowed");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view base = slash == std::string_view::npos ? "" : rest.substr(slash);
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  size_t bracket = authority.rfind(']');
  size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    parts.port = std::string(authority.substr(colon));
    authority = authority.substr(0, colon);
    if (parts.port.size() < 2) return bad("empty port");
    for (char c : parts.port.substr(1)) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return bad("bad port");
    }
  }
  if (authority.empty()) return bad("no host");
  for (char c : authority) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return bad("bad host");
  }
  parts.host = std::string(authority);
  parts.base = std::string(base);
  return parts;
}

bool IsIpHost(std::string_view host) {
  return (!host.empty() && host.front() == '[') || IsIpv4(host);  // "[...]": IPv6 literal
}

bool IsLocalhostName(std::string_view host) {
  return EqualsNoCase(host, "localhost") ||
         (host.size() > 10 && EqualsNoCase(host.substr(host.size() - 10), ".localhost"));
}

}  // namespace

bool IsS3Location(std::string_view location) {
  return location.size() >= kScheme.size() && EqualsNoCase(location.substr(0, kScheme.size()), kScheme);
}

std::string S3Location::ToString() const { return "s3://" + bucket + "/" + key; }

Status ValidateBucketName(std::string_view bucket) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("bucket name '" + std::string(bucket) + "': " + why);
  };
  if (bucket.size() < 3 || bucket.size() > 63) return bad("must be 3 to 63 characters long");
  for (char c : bucket) {
    if (!IsLowerAlnum(c) && c != '.' && c != '-') {
      return bad("only lower-case letters, digits, '.' and '-' are allowed");
    }
  }
  if (!IsLowerAlnum(bucket.front()) || !IsLowerAlnum(bucket.back())) {
    return bad("must start and end with a letter or digit");
  }
  if (bucket.find("..") != std::string_view::npos) return bad("must not contain '..'");
  if (IsIpv4(bucket)) return bad("must not be an IP address");
  return Status::OK();
}

StatusOr<S3Location> ParseS3Location(std::string_view location) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(why + " (expected s3://BUCKET/KEY or s3://BUCKET/PREFIX/)");
  };
  if (!IsS3Location(location)) return bad("not an s3:// location");
  std::string_view rest = location.substr(kScheme.size());
  for (char c : rest) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return bad("control character in location");
  }
  size_t slash = rest.find('/');
  S3Location parsed;
  parsed.bucket = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) parsed.key = std::string(rest.substr(slash + 1));
  if (parsed.bucket.empty()) return bad("missing bucket");
  Status valid = ValidateBucketName(parsed.bucket);
  if (!valid.ok()) return bad(valid.message());
  return parsed;
}

StatusOr<S3Addressing> ParseS3Addressing(std::string_view text) {
  if (text == "auto") return S3Addressing::kAuto;
  if (text == "path") return S3Addressing::kPath;
  if (text == "virtual") return S3Addressing::kVirtual;
  return Status::InvalidArgument("addressing=" + std::string(text) + ": expected auto, path or virtual");
}

std::string S3Region(const S3Endpoint& endpoint) {
  return endpoint.region.empty() ? std::string(kDefaultRegion) : endpoint.region;
}

std::string S3SigV4Provider(const S3Endpoint& endpoint) { return "aws:amz:" + S3Region(endpoint) + ":s3"; }

StatusOr<bool> S3UsesPathStyle(const S3Endpoint& endpoint, std::string_view bucket) {
  ASSIGN_OR_RETURN(EndpointParts parts, SplitEndpoint(endpoint));
  switch (endpoint.addressing) {
    case S3Addressing::kPath:
      return true;
    case S3Addressing::kVirtual:
      if (bucket.find('.') != std::string_view::npos) {
        return Status::InvalidArgument("bucket '" + std::string(bucket) +
                                       "' has '.', so it cannot be a host name label: use addressing=path");
      }
      // BUCKET.localhost is still loopback (RFC 6761; libcurl resolves
      // *.localhost itself), so only an IP address cannot take the bucket.
      if (IsIpHost(parts.host)) {
        return Status::InvalidArgument("endpoint host " + parts.host +
                                       " is an IP address: use addressing=path");
      }
      return false;
    case S3Addressing::kAuto:
      break;
  }
  // A dotted bucket breaks the *.s3 TLS wildcard, so the SDKs go path-style.
  return IsIpHost(parts.host) || IsLocalhostName(parts.host) || bucket.find('.') != std::string_view::npos;
}

StatusOr<std::string> S3ObjectUrl(const S3Endpoint& endpoint, std::string_view bucket,
                                  std::string_view key) {
  ASSIGN_OR_RETURN(EndpointParts parts, SplitEndpoint(endpoint));
  ASSIGN_OR_RETURN(bool path_style, S3UsesPathStyle(endpoint, bucket));
  std::string url = parts.scheme + "://";
  if (path_style) {
    url += parts.host + parts.port + parts.base + "/" + std::string(bucket);
  } else {
    url += std::string(bucket) + "." + parts.host + parts.port + parts.base;
  }
  url += "/" + PercentEncode(key, /*keep_slash=*/true);
  return url;
}

}  // namespace stfs
